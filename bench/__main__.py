"""`make bench`: every benchmark, printing its figures, then each target with its figure, then each
path's ratio to the decode ceiling against the last sitting's (about 40 minutes on 2 cores).

Exits 1 when a figure docs/performance.md reports as meeting its target falls short of it
(bench/targets.py), or when a path's ratio to the decode ceiling fell more than 15% below the
last sitting's record (bench/ratios.py) in a second run of that path as well (on this shared
machine one run of unchanged code fell 26% once, a fall the next run did not repeat); 2 when the
record cannot be read or a benchmark named is not one.

``python -m bench otlp replay`` runs those benchmarks alone, each rated after a decode ceiling of
its own, and checks only what they measured. ``--record FILE`` compares with the record FILE
holds instead (a run's saved output ends with its record): a change against its base commit in
one sitting, when the machine is too busy to compare with the last quiet one.
"""

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench import alert_latency, decode, http_metrics, kafka, memory, otlp, ratios, replay, scale_out, sizing, targets


def http_request_metrics() -> dict[str, float]:
    http_metrics.run()
    return {}  # µs per request, printed: no target, no ratio


BENCHMARKS: dict[str, Callable[[], dict[str, float]]] = {
    "decode": decode.run,
    "http_metrics": http_request_metrics,
    "replay": replay.run,
    "otlp": lambda: otlp.run(phoenix=True),
    "kafka": kafka.run,
    "scale_out": scale_out.run,
    "alert_latency": alert_latency.run,
    "memory": memory.in_own_process,
    "sizing": sizing.run,  # figures for docs/sizing.md: printed, no target, no ratio
}

#: the benchmarks whose figures are rated against the decode ceiling (bench/ratios.py)
RATED_BY = {"replay": ("replay_records_per_second",), "otlp": ("otlp_traces_per_second",),
            "kafka": ("kafka_traces_per_second",), "scale_out": ("scale_out_rate_1", "scale_out_rate_2")}


def main(names: list[str], record: Path | None = None) -> int:
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"no benchmark named {', '.join(unknown)}; the benchmarks: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    try:
        recorded = ratios.read_record(record)
    except OSError as error:
        print(f"make bench: the record cannot be read: {error}", file=sys.stderr)
        return 2
    except ratios.MalformedRecord as error:
        print(f"make bench: {error}", file=sys.stderr)
        return 2
    figures: dict[str, float] = {}
    measured: dict[str, ratios.Measured] = {}
    busiest = 0.0  # the highest load average seen before or after a rated path

    def rated(name: str) -> dict[str, ratios.Measured]:
        nonlocal busiest
        # the ceiling just before the path, so that the machine's pace of that hour reaches both
        ceiling, load = replay.measure_ceiling(), os.getloadavg()[0]
        busiest = max(busiest, load)
        print(f"decode ceiling before {name}: {ceiling:,.0f} records/s (load average {load:.1f})")
        figures.update(replay.run(ceiling) if name == "replay" else BENCHMARKS[name]())
        busiest = max(busiest, os.getloadavg()[0])
        return {figure: ratios.Measured(figures[figure], ceiling) for figure in RATED_BY[name]}

    for name in names or BENCHMARKS:
        if name in RATED_BY:
            measured |= rated(name)
        else:
            figures |= BENCHMARKS[name]()
    fallen = ratios.fallen(measured, recorded)
    for name in (name for name in RATED_BY if set(RATED_BY[name]) & set(fallen)):
        print(f"\n{name}: {', '.join(set(RATED_BY[name]) & set(fallen))} fell more than {ratios.TOLERANCE:.0%} "
              "below the record; measuring it again (a fall the machine's noise made seldom comes twice)")
        measured = ratios.better(measured, rated(name))
    failed = targets.check(figures, every_one_run=not names)
    failed |= ratios.check(measured, recorded, "docs/performance.md" if record is None else str(record))
    if failed and busiest > (os.cpu_count() or 1):
        # other work on the machine slows a path that needs both cores more than the one-core decode
        # loop: a ratio measured so can fall for the load alone
        print(f"the machine was busy (load average up to {busiest:.1f} on {os.cpu_count()} cores): run again "
              "on a quiet machine before believing a ratio fallen")
    print("\nthis run's record (to paste over docs/performance.md's after a sitting"
          f"{'' if not names else '; this run measured only some paths'}):\n")
    print(ratios.record_markdown(measured))
    return failed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run alone: {', '.join(BENCHMARKS)}")
    parser.add_argument("--record", type=Path, help="compare with the record in this file, not docs/performance.md")
    arguments = parser.parse_args()
    sys.exit(main(arguments.names, arguments.record))
