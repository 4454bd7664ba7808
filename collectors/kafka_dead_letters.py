"""The dead-letter topic (scaled mode): rejected records, with their reason and origin."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from kafka import KafkaProducer
from kafka.errors import KafkaError

from ragmon.collectors.letter_body import LetterBody
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.records import DeadLetter


class KafkaDeadLetterSink:
    """Produces each rejected record to the dead-letter topic: as the value, a JSON object of what
    ``body`` keeps of the bytes (:class:`LetterBody`: keyed hash, redacted text, raw bytes only
    encrypted), and source, reason, detail, size, the sender's privilege and origin as headers.
    ``write`` returns once the broker acknowledged the batch; a producer error raises
    :class:`Retryable` (the batch is then retried, so a letter that did get through before the
    error may appear twice: at least once)."""

    def __init__(self, producer: KafkaProducer, topic: str, max_raw_bytes: int, timeout: float = 30.0, *,
                 body: LetterBody | None = None) -> None:
        self._producer = producer
        self._body = body or LetterBody(max_bytes=max_raw_bytes)
        self._encode = msgspec.json.Encoder().encode
        self._topic = topic
        self._max_raw_bytes = max_raw_bytes
        self._timeout = timeout

    def write(self, letters: Sequence[DeadLetter]) -> None:
        try:
            futures = [self._send(letter) for letter in letters]
            self._producer.flush(self._timeout)
            for future in futures:
                future.get(timeout=0)
        except KafkaError as error:
            raise Retryable(f"dead-letter topic: {type(error).__name__}") from error

    def _send(self, letter: DeadLetter):
        record = letter.record
        size = len(record.data) if record.size is None else record.size
        headers = [("ragmon.source", record.source.encode()), ("ragmon.reason", letter.reason.value.encode()),
                   ("ragmon.detail", letter.detail.encode()), ("ragmon.size", str(size).encode()),
                   ("ragmon.privilege", record.privilege.value.encode())]
        headers += [(f"ragmon.origin.{k}", str(v).encode()) for k, v in record.origin.items() if v is not None]
        return self._producer.send(self._topic, value=self._encode(self._body.fields(record.data, record.privilege)),
                                   headers=headers)

    def shutdown(self) -> None:
        self._producer.close(timeout=10)
