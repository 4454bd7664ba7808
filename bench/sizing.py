"""Sizing: what one ragmon process needs for a catalog of a given size, the figures docs/sizing.md
and the chart's default resources come from.

For each catalog size, in a process of its own (so that RSS is that catalog's, not an earlier
one's): the runtime `ragmon serve` builds (SQLite), the simulator's document and index events for
that many documents, then simulator traffic over them through the whole pipeline. Printed per size:
RSS with the runtime built and no catalog, after the catalog, and after the traffic (the bounded
memories full); the CPU seconds (``time.process_time``, which does not count the waits a busy
machine adds) per 1,000 catalog events and per 1,000 traces. ``python -m bench.sizing
[--documents N ...] [--traces N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry

DOCUMENTS = (1_000, 10_000)  # the simulator's own work per trace grows with the corpus: 50,000 took over 10 minutes
TRACES = 20_000  # enough for the bounded memories (recent traces kept for judging again: 10,000) to fill
BATCH = 500
INDEXES = 3  # the simulator's: policies, handbook, support-kb
TENANTS = 3


def measure(documents: int, traces: int) -> dict[str, float]:
    """The figures of one catalog size, measured in this process."""
    from ragmon.monitor.app.simulate import Simulator
    from ragmon.monitor.app.wiring import build_runtime, settle_start_up_objects
    from ragmon.monitor.config.settings import load_settings
    from ragmon.monitor.core.records import Privilege, RawRecord
    from tests.ragmon_process import rss_mb

    encode = msgspec.json.Encoder().encode
    with tempfile.TemporaryDirectory(prefix="ragmon-sizing-") as scratch:
        settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{scratch}/ragmon.db",
                                          "RAGMON_DEAD_LETTER__PATH": f"{scratch}/dead.jsonl"})
        simulator = Simulator(seed=43, docs_per_index=max(1, documents // (INDEXES * TENANTS)),
                              start=time.time() - traces / 20, rate=20.0)
        runtime = build_runtime(settings, clock=lambda: simulator.now, registry=CollectorRegistry())
        settle_start_up_objects()
        gc.collect()
        figures = {"documents": float(sum(len(docs) for docs in simulator.documents.values())),
                   "rss_empty_mb": rss_mb()}

        def feed(events, count_traces: bool) -> tuple[int, float]:
            """Process ``events``; how many (traces only, if ``count_traces``) and the CPU seconds of
            the processing alone (the simulator's own work, which grows with the corpus, left out)."""
            events = list(events)
            counted = sum(1 for event in events if not count_traces or event["type"] == "trace")
            records = [RawRecord("file", encode(event), privilege=Privilege.TRUSTED) for event in events]
            started = time.process_time()
            for start in range(0, len(records), BATCH):
                runtime.pipeline.process(records[start:start + BATCH])
            return counted, time.process_time() - started

        events, cpu = feed(simulator.catalog(), count_traces=False)
        gc.collect()
        figures |= {"rss_catalog_mb": rss_mb(), "cpu_ms_per_catalog_event": 1000 * cpu / events}
        asked, cpu = 0, 0.0
        while asked < traces:  # in slices, so that the generator's own memory does not grow with the run
            counted, spent = feed(simulator.traffic(min(1_000, traces - asked)), count_traces=True)
            asked, cpu = asked + counted, cpu + spent
        gc.collect()
        figures |= {"rss_traffic_mb": rss_mb(), "cpu_ms_per_trace": 1000 * cpu / asked}
        runtime.close()
    return figures


def run(sizes: tuple[int, ...] = DOCUMENTS, traces: int = TRACES) -> dict[str, float]:
    """Every size in a process of its own; prints a table and returns the figures by size."""
    print(f"sizing: one process, SQLite, {traces:,} simulator traces after the catalog")
    print(f"  {'documents':>10}  {'RSS built':>9}  {'+ catalog':>9}  {'+ traffic':>9}  "
          f"{'CPU ms/catalog event':>20}  {'CPU ms/trace':>12}")
    figures: dict[str, float] = {}
    for documents in sizes:
        with tempfile.TemporaryDirectory(prefix="ragmon-sizing-") as scratch:
            out = Path(scratch) / "figures.json"
            subprocess.run([sys.executable, "-m", "bench.sizing", "--one", str(documents), "--traces", str(traces),
                            "--json-file", str(out)], check=True)
            one = json.loads(out.read_text())
        print(f"  {one['documents']:>10,.0f}  {one['rss_empty_mb']:>6.0f} MB  {one['rss_catalog_mb']:>6.0f} MB  "
              f"{one['rss_traffic_mb']:>6.0f} MB  {one['cpu_ms_per_catalog_event']:>20.3f}  "
              f"{one['cpu_ms_per_trace']:>12.3f}", flush=True)
        figures |= {f"sizing_{documents}_{name}": value for name, value in one.items() if name != "documents"}
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.sizing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=list(DOCUMENTS), help="catalog sizes")
    parser.add_argument("--traces", type=int, default=TRACES, help="simulator traces after each catalog")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a single size, measured in this process
    parser.add_argument("--json-file", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one is not None:
        arguments.json_file.write_text(json.dumps(measure(arguments.one, arguments.traces)))
    else:
        run(tuple(arguments.documents), arguments.traces)
