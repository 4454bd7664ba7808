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
from tests.collectors.kafka_support import committed, end_offsets, new_topic, produce
from tests.ragmon_process import RagmonServer
from tests.services.harness import Kafka

TRACES = 50_000
RUNS = 3
PARTITIONS = 6


def kafka_once(kafka: Kafka, events: list[bytes]) -> tuple[float, float]:
    """(steady rate, rate including the process start) in traces/s. The steady rate counts from
    the first processed trace (after start-up and the group join) to the last committed offset."""
    topic, group = new_topic(kafka, PARTITIONS, "bench"), f"bench-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, events, [str(number % 997).encode() for number in range(len(events))])
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
            ends = end_offsets(kafka, topic)
            while committed(kafka, group, topic) != ends:
                time.sleep(0.05)
            finished = time.perf_counter()
    assert first is not None
    return (len(events) - first[1]) / (finished - first[0]), len(events) / (finished - started)


def run() -> dict[str, float]:
    from ragmon.monitor.app.simulate import Simulator

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
