"""Reading the dead-letter topic back (``ragmon dead-letters list|replay`` in scaled mode): every
letter from the beginning of each partition to its end at the time of the call, in the shape of
the dead-letter file's letters (``collectors/files.py``), plus where it lies on the topic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from kafka import KafkaConsumer, TopicPartition

from ragmon.collectors.kafka_calls import kafka_call

CALL_TIMEOUT_MS = 10_000
POLL_MS = 500


def read_topic_letters(client_options: dict[str, Any], topic: str, max_raw_bytes: int,
                       deadline: float = 60.0) -> list[dict[str, Any]]:
    """The letters on ``topic``, oldest first per partition. ``max_raw_bytes``: what the writer
    kept of a record (``dead_letter.max_raw_bytes``), to tell a letter whose bytes were cut.
    Uses no consumer group: reading commits nothing and moves nobody's position."""
    consumer = KafkaConsumer(**client_options, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=CALL_TIMEOUT_MS + 5_000)
    try:
        found = kafka_call(lambda: consumer.partitions_for_topic(topic), f"listing the partitions of {topic}",
                           deadline=deadline) or set()
        partitions = [TopicPartition(topic, p) for p in sorted(found)]
        if not partitions:
            return []
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = kafka_call(lambda: consumer.end_offsets(partitions, timeout_ms=CALL_TIMEOUT_MS),
                          f"reading the end offsets of {topic}", deadline=deadline)
        letters: list[dict[str, Any]] = []
        pending = {tp for tp in partitions if ends.get(tp, 0) > 0}
        while pending:
            for tp, messages in consumer.poll(timeout_ms=POLL_MS).items():
                letters.extend(_letter(message, max_raw_bytes) for message in messages
                               if message.offset < ends[tp])
            pending = {tp for tp in pending
                       if kafka_call(lambda tp=tp: consumer.position(tp, timeout_ms=CALL_TIMEOUT_MS),
                                     f"reading the position on {tp.topic}[{tp.partition}]") < ends[tp]}
        return letters
    finally:
        consumer.close()


def _letter(message: Any, max_raw_bytes: int) -> dict[str, Any]:
    headers = {key: value.decode("utf-8", errors="replace") for key, value in message.headers or []}
    body = msgspec.json.decode(message.value) if message.value else {}
    size = int(headers.get("ragmon.size", "0") or 0)
    origin = {key.removeprefix("ragmon.origin."): value for key, value in headers.items()
              if key.startswith("ragmon.origin.")}
    return {
        "time": datetime.fromtimestamp(message.timestamp / 1000, UTC).isoformat(timespec="milliseconds"),
        "source": headers.get("ragmon.source", ""), "reason": headers.get("ragmon.reason", ""),
        "detail": headers.get("ragmon.detail", ""), "origin": origin, "size": size,
        "truncated": size > max_raw_bytes, **body,
        "at": {"topic": message.topic, "partition": message.partition, "offset": message.offset},
    }
