"""The Kafka path end to end: simulator traces (about 3 KB with 10 passages) produced to a real
broker (the test harness's, KRaft, loopback), then `ragmon serve` consuming them as one group
member: signals, metrics, samples stored, offsets committed. The rate is traces until every one is
counted in ragmon_answers_total and the group's committed offsets reach the log end."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import msgspec

from bench.otlp import answers
from tests.ragmon_process import RagmonServer
from tests.services.harness import Kafka

TRACES = 50_000
RUNS = 3
PARTITIONS = 6


def produce(kafka: Kafka, topic: str, events: list[bytes]) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=20, batch_size=256 * 1024,
                             compression_type=None)
    for number, event in enumerate(events):
        producer.send(topic, event, key=str(number % 997).encode())
    producer.flush(120)
    producer.close()


def committed_all(kafka: Kafka, topic: str, group: str) -> bool:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = consumer.end_offsets(partitions)
        return all((consumer.committed(tp) or 0) >= ends[tp] for tp in partitions)
    finally:
        consumer.close()


def kafka_once(kafka: Kafka, events: list[bytes]) -> tuple[float, float]:
    """(steady rate, rate including the process start) in traces/s. The steady rate counts from
    the first processed trace (after start-up and the group join) to the last committed offset."""
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, events)
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-") as scratch:
        started = time.perf_counter()
        first: tuple[float, float] | None = None
        with RagmonServer(Path(scratch), RAGMON_KAFKA__BOOTSTRAP_SERVERS=f'["{kafka.bootstrap_servers}"]',
                          RAGMON_KAFKA__TRACES_TOPIC=topic, RAGMON_KAFKA__GROUP_ID=group,
                          RAGMON_KAFKA__CATALOG_TOPIC=f"{topic}-catalog",
                          RAGMON_KAFKA__DEAD_LETTER_TOPIC=f"{topic}-dlq",
                          RAGMON_KAFKA__SAMPLES_TOPIC=f"{topic}-samples") as server:
            while True:
                try:
                    done = answers(server.url)
                except httpx.TransportError:
                    raise RuntimeError(f"ragmon serve stopped answering (exit status {server.process.poll()}):\n"
                                       f"{server.log_path.read_text()[-3000:]}") from None
                if first is None and done > 0:
                    first = (time.perf_counter(), done)
                if done >= len(events):
                    break
                time.sleep(0.05)
            while not committed_all(kafka, topic, group):
                time.sleep(0.05)
            finished = time.perf_counter()
    assert first is not None
    return (len(events) - first[1]) / (finished - first[0]), len(events) / (finished - started)


def run() -> dict[str, float]:
    from monitor.simulate import Simulator

    simulator = Simulator(seed=29, start=time.time() - TRACES / 10 - 600, rate=10.0)  # all in the past
    events = [msgspec.json.encode(e) for e in simulator.traffic(TRACES) if e["type"] == "trace"][:TRACES]
    size = statistics.mean(len(e) for e in events)
    with Kafka() as kafka:
        runs = [kafka_once(kafka, events) for _ in range(RUNS)]
    rate = statistics.median(steady for steady, _ in runs)
    with_start = statistics.median(whole for _, whole in runs)
    print(f"Kafka: {len(events)} traces of {size / 1024:.1f} KB on {PARTITIONS} partitions, one ragmon serve, "
          f"median of {RUNS} runs")
    print(f"  consumed, processed, committed           {rate:>10,.0f} traces/s")
    print(f"  the same, counting the process start     {with_start:>10,.0f} traces/s")
    return {"kafka_traces_per_second": rate}


if __name__ == "__main__":
    run()
