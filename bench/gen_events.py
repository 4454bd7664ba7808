"""Write simulator traffic as JSONL: the catalog, then traces and feedback, some records broken.

    python bench/gen_events.py --traces 100000 --bad-ratio 0.01 --out /tmp/events.jsonl

Also makes the bundled example (``monitor/app/examples/events.jsonl``) with ``--traces 400``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import msgspec

from ragmon.monitor.app.simulate import CORRUPTIONS, Simulator, corrupt


def write_events(out, traces: int, bad_ratio: float, seed: int) -> dict[str, int]:
    """Write the events; return how many records of each expected rejection reason were written."""
    encode = msgspec.json.encode
    simulator = Simulator(seed=seed)
    rng = random.Random(seed + 1)
    kinds = sorted(CORRUPTIONS)
    expected: dict[str, int] = {}
    for event in simulator.catalog():
        out.write(encode(event) + b"\n")
    for event in simulator.traffic(traces):
        if event["type"] == "trace" and rng.random() < bad_ratio:
            how = kinds[sum(expected.values()) % len(kinds)]
            out.write(corrupt(event, how, encode) + b"\n")
            expected[CORRUPTIONS[how]] = expected.get(CORRUPTIONS[how], 0) + 1
        else:
            out.write(encode(event) + b"\n")
    return expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--bad-ratio", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with args.out.open("wb") as out:
        expected = write_events(out, args.traces, args.bad_ratio, args.seed)
    print(f"wrote {args.out}; broken records by expected reason: {expected}", file=sys.stderr)


if __name__ == "__main__":
    main()
