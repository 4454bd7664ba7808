"""The Kafka path end to end: simulator traces (about 3 KB with 10 passages) produced to a real
broker (the test harness's, KRaft, loopback), then `ragmon serve` consuming them as one group
member: signals, metrics, samples stored, offsets committed. The rate is traces until every one is
counted in ragmon_answers_total and the group's committed offsets reach the log end."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
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


def consume_all(kafka: Kafka, servers: list[RagmonServer], traces: int, topic: str, group: str,
                on_first: Callable[[], None] = lambda: None) -> tuple[float, float, float]:
    """Wait until ``servers`` together counted ``traces`` answers and ``group`` committed the log
    end of ``topic``. Returns (when the first trace was counted, how many were counted then, when
    the last offset was committed), ``time.perf_counter`` seconds; ``on_first`` runs at the first."""
    first: tuple[float, float] | None = None
    while True:
        try:
            done = sum(answers(server.url) for server in servers)
        except httpx.TransportError:
            stopped = [s for s in servers if s.process is None or s.process.poll() is not None] or servers
            raise RuntimeError(f"ragmon serve stopped answering (exit status {stopped[0].process.poll()}):\n"
                               f"{stopped[0].log_path.read_text()[-3000:]}") from None
        if first is None and done > 0:
            first = (time.perf_counter(), done)
            on_first()
        if done >= traces:
            break
        time.sleep(0.05)
    ends = end_offsets(kafka, topic)
    while committed(kafka, group, topic) != ends:
        time.sleep(0.05)
    assert first is not None
    return first[0], first[1], time.perf_counter()


def kafka_once(kafka: Kafka, events: list[bytes]) -> tuple[float, float]:
    """(steady rate, rate including the process start) in traces/s. The steady rate counts from
    the first processed trace (after start-up and the group join) to the last committed offset."""
    topic, group = new_topic(kafka, PARTITIONS, "bench"), f"bench-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, events, [str(number % 997).encode() for number in range(len(events))])
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-") as scratch:
        started = time.perf_counter()
        with RagmonServer(Path(scratch), RAGMON_KAFKA__BOOTSTRAP_SERVERS=f'["{kafka.bootstrap_servers}"]',
                          RAGMON_KAFKA__TRACES_TOPIC=topic, RAGMON_KAFKA__GROUP_ID=group,
                          RAGMON_KAFKA__CATALOG_TOPIC=f"{topic}-catalog",
                          RAGMON_KAFKA__DEAD_LETTER_TOPIC=f"{topic}-dlq",
                          RAGMON_KAFKA__SAMPLES_TOPIC=f"{topic}-samples") as server:
            first, counted, finished = consume_all(kafka, [server], len(events), topic, group)
    return (len(events) - counted) / (finished - first), len(events) / (finished - started)


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
