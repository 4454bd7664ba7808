"""Decoder choice: msgspec typed decoding (validates while parsing) against orjson (parses only).

Prints records/s for: orjson.loads alone; msgspec untyped; msgspec typed into our event structs;
and the full ragmon Decoder (typed decode plus limits and timestamp normalization). Medians of
several runs over the same simulator traffic.
"""

from __future__ import annotations

import statistics
import time

import msgspec
import orjson

from ragmon.monitor.app.simulate import Simulator
from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder, _Checker
from ragmon.monitor.core.model import Event

RUNS = 5


def sample(traces: int = 20_000) -> list[bytes]:
    simulator = Simulator(seed=11)
    return [msgspec.json.encode(e) for e in simulator.traffic(traces) if e["type"] == "trace"]


def rate(fn, records: list[bytes]) -> float:
    results = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for record in records:
            fn(record)
        results.append(len(records) / (time.perf_counter() - started))
    return statistics.median(results)


def run() -> dict[str, float]:
    records = sample()
    typed = msgspec.json.Decoder(Event)
    ours = Decoder(Limits(), clock=time.time)
    figures = {
        "orjson.loads (no validation)": rate(orjson.loads, records),
        "msgspec untyped (no validation)": rate(msgspec.json.decode, records),
        "msgspec typed (validates types)": rate(typed.decode, records),
        "ragmon Decoder (types, limits, times)": rate(ours.decode, records),
        "the same, thorough checker only": rate(thorough(typed), records),
    }
    size = statistics.mean(len(r) for r in records)
    print(f"decode: {len(records)} traces, mean {size:.0f} bytes, median of {RUNS} runs")
    for name, value in figures.items():
        print(f"  {name:40s} {value:>10,.0f} traces/s")
    fast = figures["ragmon Decoder (types, limits, times)"] / figures["the same, thorough checker only"]
    print(f"  fast path / thorough checker             {fast:>10.2f}x")
    return {**figures, "fast_vs_thorough": fast}


def thorough(typed: msgspec.json.Decoder):
    """The decoder as it would be without its fast path: every record through the checker that
    names the offending field (what the fast path runs only for records that break a limit)."""
    limits = Limits()

    def decode(record: bytes):
        return _Checker(limits, time.time()).event(typed.decode(record))

    return decode


if __name__ == "__main__":
    run()
