"""`ragmon replay` throughput on 100k simulator traces (1% broken), as a user runs it.

Runs the real command (subprocess, JSON summary) several times and prints the median records/s,
with the raw decode loop over the same file beside it as the ceiling.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.gen_events import write_events
from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import InvalidInput

DATA = Path(__file__).parent / ".data"
RUNS = 3
TRACES = 100_000


def events_file(traces: int = TRACES) -> Path:
    path = DATA / f"events-{traces}.jsonl"
    if not path.exists():
        DATA.mkdir(exist_ok=True)
        partial = path.with_suffix(".partial")
        with partial.open("wb") as out:
            write_events(out, traces, bad_ratio=0.01, seed=7)
        partial.rename(path)
    return path


def replay_once(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        summary = Path(scratch) / "summary.json"
        env = {**os.environ, "RAGMON_DEAD_LETTER__PATH": str(Path(scratch) / "dead.jsonl"),
               "RAGMON_DATABASE__URL": f"sqlite:///{Path(scratch) / 'ragmon.db'}"}
        subprocess.run([sys.executable, "-m", "ragmon", "replay", str(path), "--allow-rejects",
                        "--json-file", str(summary)], env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(summary.read_text())


def decode_ceiling(path: Path) -> float:
    decoder = Decoder(Limits(), clock=time.time)
    lines = [line.rstrip(b"\n") for line in path.open("rb") if line.strip()]
    started = time.perf_counter()
    for line in lines:
        with contextlib.suppress(InvalidInput):
            decoder.decode(line)
    return len(lines) / (time.perf_counter() - started)


def measure_ceiling() -> float:
    """The decode ceiling: the median of ``RUNS`` decode loops over the replay file. `make bench`
    divides each path's rate by the ceiling measured just before it (bench/ratios.py)."""
    path = events_file()
    return statistics.median(decode_ceiling(path) for _ in range(RUNS))


def run(measured_ceiling: float | None = None) -> dict[str, float]:
    """The replay's median rate and the decode ceiling beside it (``measured_ceiling`` when given,
    else measured after the replays)."""
    path = events_file()
    runs = [replay_once(path) for _ in range(RUNS)]
    rate = statistics.median(r["records_per_second"] for r in runs)
    ceiling = measure_ceiling() if measured_ceiling is None else measured_ceiling
    first = runs[0]
    print(f"replay: {first['records']} records ({first['accepted']}, rejected {sum(first['rejected'].values())}),"
          f" median of {RUNS} runs")
    print(f"  ragmon replay (CLI, end to end)          {rate:>10,.0f} records/s")
    print(f"  decode loop on the same file (ceiling)   {ceiling:>10,.0f} records/s")
    print(f"  replay / ceiling                         {rate / ceiling:>10.3g}")
    return {"replay_records_per_second": rate, "decode_records_per_second": ceiling}


if __name__ == "__main__":
    run()
