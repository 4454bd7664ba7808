"""Helpers for the tests against the real Kafka broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

import msgspec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import CoordinatorNotAvailableError
from kafka.structs import TopicPartition


def new_topic(kafka, partitions: int = 1, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    return name


def produce(kafka, topic: str, values: Iterable[bytes], keys: Iterable[bytes | None] | None = None) -> int:
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all", linger_ms=20,
                             batch_size=256 * 1024)
    n = 0
    keys = iter(keys) if keys is not None else None
    for value in values:
        producer.send(topic, value=value, key=next(keys) if keys is not None else None)
        n += 1
    producer.flush(60)
    producer.close()
    return n


def key_of(event: dict, trace_keys: dict[str, bytes]) -> bytes | None:
    """The emitter's keying: caller id, else conversation id; feedback follows its trace."""
    if event["type"] == "trace":
        caller = (event.get("caller") or {}).get("id") or event.get("conversation_id")
        key = caller.encode() if caller else None
        trace_keys[event["trace_id"]] = key
        return key
    if event["type"] == "feedback":
        return trace_keys.get(event["trace_id"])
    return event.get("doc_id", "").encode() or None


def committed(kafka, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition of ``topic`` (missing: nothing committed)."""
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        for attempt in range(20):
            try:
                offsets = admin.list_group_offsets(group).get(group, {})
                break
            except CoordinatorNotAvailableError:  # the offsets topic is still being created
                if attempt == 19:
                    raise
                time.sleep(0.25)
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


def end_offsets(kafka, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        return {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def read_all(kafka, topic: str, timeout: float = 10.0) -> list:
    """Every message of ``topic``, read from the beginning without a group."""
    ends = end_offsets(kafka, topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in ends]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    messages = []
    deadline = time.monotonic() + timeout
    while any(consumer.position(tp) < ends[tp.partition] for tp in partitions) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            messages.extend(batch)
    consumer.close()
    return messages


def wait_for(condition, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def encode(event: dict) -> bytes:
    return msgspec.json.encode(event)
