"""Memory under a long stream: RSS of one process after 200k and after 2M simulator traces through
the whole pipeline (signals, metrics, catalog, sampler on SQLite). Bounded state (recent traces,
rephrase memory, late-strata window, label caps) must keep the second within 1.2x of the first
and under 300 MB. ``--traces N`` shortens the run (the checkpoints scale with it)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry

TRACES = 2_000_000
BATCH = 500


def run(traces: int = TRACES) -> dict[str, float]:
    from ragmon.monitor.app.simulate import Simulator
    from ragmon.monitor.app.wiring import build_runtime, settle_start_up_objects
    from ragmon.monitor.config.settings import load_settings
    from ragmon.monitor.core.records import Privilege, RawRecord
    from tests.ragmon_process import rss_mb

    checkpoints = {traces // 10: "early", traces: "end"}
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ragmon-memory-") as scratch:
        settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{scratch}/ragmon.db",
                                          "RAGMON_DEAD_LETTER__PATH": f"{scratch}/dead.jsonl"})
        simulator = Simulator(seed=41, start=time.time() - traces / 20, rate=20.0)
        runtime = build_runtime(settings, clock=lambda: simulator.now, registry=CollectorRegistry())
        encode = msgspec.json.Encoder().encode
        runtime.pipeline.process([RawRecord("file", encode(e), privilege=Privilege.TRUSTED)
                                  for e in simulator.catalog()])
        settle_start_up_objects()  # as `ragmon serve` does once it is built
        seen, batch, started = 0, [], time.perf_counter()
        # the simulator's traffic in slices, so the generator's own memory does not grow with the run
        while seen < traces:
            for event in simulator.traffic(min(10_000, traces - seen)):
                batch.append(RawRecord("file", encode(event), privilege=Privilege.TRUSTED))
                if event["type"] == "trace":
                    seen += 1
                    if seen in checkpoints:
                        runtime.pipeline.process(batch)
                        batch = []
                        gc.collect()
                        figures[checkpoints[seen]] = rss_mb()
                        print(f"  after {seen:>9,} traces: RSS {figures[checkpoints[seen]]:.0f} MB "
                              f"({seen / (time.perf_counter() - started):,.0f} traces/s)", flush=True)
                if len(batch) >= BATCH:
                    runtime.pipeline.process(batch)
                    batch = []
        runtime.close()
    ratio = figures["end"] / figures["early"]
    print(f"memory: RSS after {traces:,} traces / after {traces // 10:,} = {ratio:.2f} (goal <= 1.2), "
          f"end {figures['end']:.0f} MB (goal < 300)")
    return {"rss_early_mb": figures["early"], "rss_end_mb": figures["end"], "rss_ratio": ratio}


def in_own_process() -> dict[str, float]:
    """:func:`run` in a process of its own (what `make bench` calls): RSS is the pipeline's, not
    that of the benchmarks run before it in the same interpreter (the heap does not shrink back)."""
    with tempfile.TemporaryDirectory(prefix="ragmon-memory-") as scratch:
        out = Path(scratch) / "figures.json"
        subprocess.run([sys.executable, "-m", "bench.memory", "--json-file", str(out)], check=True)
        return json.loads(out.read_text())


if __name__ == "__main__":
    count = int(sys.argv[sys.argv.index("--traces") + 1]) if "--traces" in sys.argv else TRACES
    figures = run(count)
    if "--json-file" in sys.argv:
        Path(sys.argv[sys.argv.index("--json-file") + 1]).write_text(json.dumps(figures))
