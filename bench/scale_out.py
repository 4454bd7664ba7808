"""Scale-out: N `ragmon serve` replicas in one consumer group, on one shared PostgreSQL, over a
topic of N partitions, for N = 1 and 2. Prints each rate (first processed trace to the last
committed offset), the ratio of two replicas to one, and where the CPU went per 1,000 traces: the
replicas, the broker and PostgreSQL. Those costs are the inputs of the model in
docs/performance.md ("Scale-out"): how far more partitions and replicas carry the rate, and what
stops it.

The rates are measured one after the other in one run, on this machine's 2 cores, which the
replicas share with the broker, PostgreSQL and this script."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import msgspec

from bench.kafka import consume_all
from tests.collectors.kafka_support import new_topic, produce
from tests.ragmon_process import RagmonServer
from tests.services.harness import Kafka, Postgres

TRACES = 30_000
RUNS = 3
REPLICAS = (1, 2)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int) -> float:
    """CPU time of process ``root`` and its descendants (a service and, for PostgreSQL, its
    backends, each in a session of its own): their own, and that of the children they reaped
    (PostgreSQL's ended backends)."""
    stats: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                stats[int(entry.name)] = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue  # ended meanwhile
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)  # field 4 of stat: the parent
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += sum(int(value) for value in stats[pid][11:15])  # utime, stime, cutime, cstime
        todo.extend(children.get(pid, []))
    return total / TICKS


def scale_once(kafka: Kafka, postgres: Postgres, events: list[bytes], replicas: int) -> dict[str, float]:
    """One run of ``replicas`` replicas over ``replicas`` partitions: the steady rate in traces/s
    and the CPU seconds per 1,000 traces of the replicas, the broker and PostgreSQL."""
    from ragmon.monitor.storage.store import make_engine, upgrade

    topic, group = new_topic(kafka, replicas, "scale"), f"scale-{uuid.uuid4().hex[:8]}"
    produce(kafka, topic, events, [str(number % 997).encode() for number in range(len(events))])
    url = postgres.create_database(f"scale_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    env = {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
           "RAGMON_KAFKA__GROUP_ID": group, "RAGMON_KAFKA__CATALOG_TOPIC": f"{topic}-catalog",
           "RAGMON_KAFKA__DEAD_LETTER_TOPIC": f"{topic}-dlq", "RAGMON_KAFKA__SAMPLES_TOPIC": f"{topic}-samples",
           "RAGMON_DATABASE__URL": url, "RAGMON_REDACTION__CALLER_KEY": "one-key-for-every-replica-of-the-bench"}
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-") as scratch, ExitStack() as stack:
        servers = []
        for n in range(replicas):
            (Path(scratch) / str(n)).mkdir()
            servers.append(RagmonServer(Path(scratch) / str(n), **env))
            stack.callback(servers[-1].stop)
        with ThreadPoolExecutor(replicas) as pool:  # together: none runs alone through the backlog's start
            list(pool.map(lambda server: server.start(timeout=60), servers))
        broker_pid, postgres_pid = kafka.process.pid, postgres.process.pid
        cpu: list = []

        def on_first() -> None:  # the CPU counters start with the first processed trace, as the rate does
            cpu.extend([[cpu_seconds(s.process.pid) for s in servers], cpu_seconds(broker_pid),
                        cpu_seconds(postgres_pid)])

        started, counted, finished = consume_all(kafka, servers, len(events), topic, group, on_first)
        ragmon_cpu, broker_cpu, postgres_cpu = cpu
        per_thousand = 1000 / (len(events) - counted)
        return {
            "rate": (len(events) - counted) / (finished - started),
            "ragmon_cpu": sum(cpu_seconds(s.process.pid) - c for s, c in zip(servers, ragmon_cpu, strict=True))
            * per_thousand,
            "broker_cpu": (cpu_seconds(broker_pid) - broker_cpu) * per_thousand,
            "postgres_cpu": (cpu_seconds(postgres_pid) - postgres_cpu) * per_thousand,
        }


def run() -> dict[str, float]:
    from ragmon.monitor.app.simulate import Simulator

    simulator = Simulator(seed=29, start=time.time() - TRACES / 10 - 600, rate=10.0)  # all in the past
    events = [msgspec.json.encode(e) for e in simulator.traffic(TRACES) if e["type"] == "trace"][:TRACES]
    figures: dict[int, dict[str, float]] = {}
    with Kafka() as kafka, Postgres() as postgres:
        runs: dict[int, list[dict[str, float]]] = {n: [] for n in REPLICAS}
        for _ in range(RUNS):  # alternated, so that a change in the machine's load hits both alike
            for n in REPLICAS:
                runs[n].append(scale_once(kafka, postgres, events, n))
        for n in REPLICAS:
            figures[n] = {key: statistics.median(run[key] for run in runs[n]) for key in runs[n][0]}
    print(f"Scale-out: {len(events)} traces, N ragmon serve replicas in one group over N partitions, one "
          f"PostgreSQL, median of {RUNS} runs alternated (CPU seconds per 1,000 traces)")
    print(f"  {'replicas':>8} {'traces/s':>10} {'ragmon CPU':>11} {'broker CPU':>11} {'PostgreSQL CPU':>15}")
    for n in REPLICAS:
        f = figures[n]
        print(f"  {n:>8} {f['rate']:>10,.0f} {f['ragmon_cpu']:>11.2f} {f['broker_cpu']:>11.2f} "
              f"{f['postgres_cpu']:>15.2f}")
    ratio = figures[2]["rate"] / figures[1]["rate"]
    print(f"  two replicas / one: {ratio:.2f}x")
    return {"scale_out_two_vs_one": ratio, **{f"scale_out_{k}_{n}": v for n, f in figures.items()
                                                for k, v in f.items()}}


if __name__ == "__main__":
    run()
