"""Helpers for the tests against the real Kafka broker. Every admin, offset and coordinator call
goes through the product's :func:`~ragmon.collectors.kafka_calls.kafka_call`: a broker just started (or
restarted) answers some of them with retriable errors for a while, e.g. the group coordinator
while it loads its offsets topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

import msgspec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from kafka.structs import TopicPartition

from ragmon.collectors.kafka_calls import kafka_call

DEADLINE = 60.0  # seconds of retries of one call


def new_topic(kafka, partitions: int = 1, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"

    def create() -> None:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass  # an earlier try got through before it failed
        finally:
            admin.close()

    kafka_call(create, f"creating topic {name}", deadline=DEADLINE)
    return name


def produce(kafka, topic: str, values: Iterable[bytes], keys: Iterable[bytes | None] | None = None,
            partition: int | None = None) -> int:
    """Send ``values`` (with ``keys``, else unkeyed) to ``topic``, or to one ``partition`` of it;
    returns once the broker has them all."""
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all", linger_ms=20,
                             batch_size=256 * 1024)
    n = 0
    keys = iter(keys) if keys is not None else None
    for value in values:
        producer.send(topic, value=value, key=next(keys) if keys is not None else None, partition=partition)
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

    def list_offsets() -> dict:
        return kafka.admin_call(lambda admin: admin.list_group_offsets(group).get(group, {}))

    offsets = kafka_call(list_offsets, f"listing the committed offsets of group {group}", deadline=DEADLINE)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


def _partitions(consumer: KafkaConsumer, topic: str) -> list[TopicPartition]:
    found = consumer.partitions_for_topic(topic)
    if not found:  # a topic just created may not be in the metadata yet
        raise UnknownTopicOrPartitionError(topic)
    return [TopicPartition(topic, p) for p in sorted(found)]


def end_offsets(kafka, topic: str) -> dict[int, int]:
    def read() -> dict[int, int]:
        consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers)
        try:
            partitions = _partitions(consumer, topic)
            return {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
        finally:
            consumer.close()

    return kafka_call(read, f"reading the end offsets of {topic}", deadline=DEADLINE)


def read_all(kafka, topic: str, timeout: float = 10.0) -> list:
    """Every message of ``topic``, read from the beginning without a group."""
    ends = end_offsets(kafka, topic)
    consumer = kafka_call(lambda: KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False),
                          "connecting a consumer", deadline=DEADLINE)
    partitions = [TopicPartition(topic, p) for p in ends]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)

    def behind() -> bool:
        for tp in partitions:
            position = kafka_call(lambda tp=tp: consumer.position(tp), f"reading the position in {topic}",
                                  deadline=DEADLINE)
            if position is None or position < ends[tp.partition]:
                return True
        return False

    messages = []
    deadline = time.monotonic() + timeout
    while behind() and time.monotonic() < deadline:
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
