"""Decoder choice: msgspec typed decoding (validates while parsing) against orjson (parses only).

Prints records/s for: orjson.loads alone; msgspec untyped; msgspec typed into our event structs;
and the full ragmon Decoder (typed decode plus limits and timestamp normalization), and the same
with its thorough checker only. Medians of several rounds over the same simulator traffic, each
round running every decoder once.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import msgspec
import orjson

from ragmon.monitor.app.simulate import Simulator
from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder, _Checker
from ragmon.monitor.core.model import Event
from ragmon.monitor.core.times import TimeReader

RUNS = 5


def sample(traces: int = 20_000) -> list[bytes]:
    simulator = Simulator(seed=11)
    return [msgspec.json.encode(e) for e in simulator.traffic(traces) if e["type"] == "trace"]


def rates(decoders: dict[str, Callable[[bytes], object]], records: list[bytes]) -> dict[str, list[float]]:
    """Records/s of each decoder in each of ``RUNS`` rounds; a round runs every decoder once, so
    that a change in the machine's load reaches all of them alike."""
    results: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(RUNS):
        for name, decode in decoders.items():
            started = time.perf_counter()
            for record in records:
                decode(record)
            results[name].append(len(records) / (time.perf_counter() - started))
    return results


def run() -> dict[str, float]:
    records = sample()
    typed = msgspec.json.Decoder(Event)
    ours = Decoder(Limits(), clock=time.time)
    measured = rates({
        "orjson.loads (no validation)": orjson.loads,
        "msgspec untyped (no validation)": msgspec.json.decode,
        "msgspec typed (validates types)": typed.decode,
        "ragmon Decoder (types, limits, times)": ours.decode,
        "the same, thorough checker only": thorough(typed),
    }, records)
    figures = {name: statistics.median(values) for name, values in measured.items()}
    size = statistics.mean(len(r) for r in records)
    print(f"decode: {len(records)} traces, mean {size:.0f} bytes, median of {RUNS} rounds")
    for name, value in figures.items():
        print(f"  {name:40s} {value:>10,.0f} traces/s")
    # the ratio within each round, then its median: both sides measured under the same load
    fast = statistics.median(f / t for f, t in zip(measured["ragmon Decoder (types, limits, times)"],
                                                    measured["the same, thorough checker only"], strict=True))
    print(f"  fast path / thorough checker             {fast:>10.2f}x")
    return {**figures, "fast_vs_thorough": fast}


def thorough(typed: msgspec.json.Decoder):
    """The decoder as it would be without its fast path: every record through the checker that
    names the offending field (what the fast path runs only for records that break a limit)."""
    limits, times = Limits(), TimeReader()

    def decode(record: bytes):
        return _Checker(limits, time.time(), times).event(typed.decode(record))

    return decode


if __name__ == "__main__":
    run()
