"""Reading the dead-letter topic back (``ragmon dead-letters list|replay`` in scaled mode): every
letter from the beginning of each partition to its end at the time of the call, as the file's
letters are read (``collectors/letters.py``), each named by where it lies on the topic.

The topic is not only ragmon's to write, so each message is checked: its value must be the JSON
object :class:`~ragmon.collectors.letter_body.LetterBody` writes (other keys are ignored), its
headers must hold what the sink writes. The letter's own fields come from the Kafka record (its
time, topic, partition and offset) and its headers, never from keys in the value. A message that
fails a check is :class:`~ragmon.collectors.letters.Unusable`, named by partition and offset."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from kafka import KafkaConsumer, TopicPartition

from ragmon.collectors.kafka_calls import kafka_call
from ragmon.collectors.letters import (
    Letter,
    LetterBodyFields,
    LetterProblem,
    LettersRead,
    Unusable,
    checked_body,
    decoded_object,
    privilege_named,
)

CALL_TIMEOUT_MS = 10_000
POLL_MS = 500
MAX_SIZE_DIGITS = 19  # a record's size in bytes fits a signed 64-bit integer


def read_topic_letters(client_options: dict[str, Any], topic: str, max_raw_bytes: int,
                       deadline: float = 60.0) -> LettersRead:
    """The letters on ``topic``, oldest first per partition, and the messages that are no usable
    letter. ``max_raw_bytes``: what the writer kept of a record (``dead_letter.max_raw_bytes``), to
    tell a letter whose bytes were cut. Uses no consumer group: reading commits nothing and moves
    nobody's position."""
    consumer = KafkaConsumer(**client_options, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=CALL_TIMEOUT_MS + 5_000)
    try:
        found = kafka_call(lambda: consumer.partitions_for_topic(topic), f"listing the partitions of {topic}",
                           deadline=deadline) or set()
        partitions = [TopicPartition(topic, p) for p in sorted(found)]
        read = LettersRead()
        if not partitions:
            return read
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = kafka_call(lambda: consumer.end_offsets(partitions, timeout_ms=CALL_TIMEOUT_MS),
                          f"reading the end offsets of {topic}", deadline=deadline)
        pending = {tp for tp in partitions if ends.get(tp, 0) > 0}
        while pending:
            for tp, messages in consumer.poll(timeout_ms=POLL_MS).items():
                for message in messages:
                    if message.offset < ends[tp]:
                        _take(message, max_raw_bytes, read)
            pending = {tp for tp in pending
                       if kafka_call(lambda tp=tp: consumer.position(tp, timeout_ms=CALL_TIMEOUT_MS),
                                     f"reading the position on {tp.topic}[{tp.partition}]") < ends[tp]}
        return read
    finally:
        consumer.close()


def _take(message: Any, max_raw_bytes: int, read: LettersRead) -> None:
    """``message`` into ``read``: a letter, or an unusable one named by where it lies."""
    where = f"{message.topic}[{message.partition}]@{message.offset}"
    try:
        read.letters.append(_letter(message, where, max_raw_bytes))
    except LetterProblem as problem:
        read.unusable.append(Unusable(where, str(problem)))


def _letter(message: Any, where: str, max_raw_bytes: int) -> Letter:
    """The letter ``message`` holds; raises :class:`LetterProblem`."""
    headers = {key: value.decode("utf-8", errors="replace") for key, value in message.headers or []
               if value is not None}

    def header(name: str) -> str:
        if (value := headers.get(f"ragmon.{name}")) is None:
            raise LetterProblem(f"header `ragmon.{name}` missing")
        return value

    size = header("size")
    if not (size.isascii() and size.isdigit() and len(size) <= MAX_SIZE_DIGITS):
        raise LetterProblem("header `ragmon.size` is not a whole number of bytes")
    try:
        written = datetime.fromtimestamp(message.timestamp / 1000, UTC)
    except (ValueError, OverflowError, OSError):  # a producer may set any timestamp, year 10000 too
        raise LetterProblem("record timestamp is not a time ragmon can show") from None
    body = LetterBodyFields()
    if message.value:  # an empty value: a letter that kept nothing of its bytes
        try:
            body = msgspec.convert(decoded_object(message.value, "value is "), LetterBodyFields)
        except msgspec.ValidationError as error:
            raise LetterProblem(f"value: {error}") from None
    return Letter(
        where=where, key=f"{message.topic}:{message.partition}:{message.offset}",
        time=written.isoformat(timespec="milliseconds"),
        source=header("source"), reason=header("reason"), detail=header("detail"),
        origin={key.removeprefix("ragmon.origin."): value for key, value in headers.items()
                if key.startswith("ragmon.origin.")},
        size=int(size), truncated=int(size) > max_raw_bytes,
        privilege=privilege_named(headers.get("ragmon.privilege"), "header `ragmon.privilege`"),
        body=checked_body(body))
