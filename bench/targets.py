"""The targets `make bench` checks its figures against.

Each target says what docs/performance.md reports about it: ``met`` (the figure reached the target
when last measured) or missed. `make bench` prints every figure beside its target and exits 1 when
a figure reported as met falls short, so a change that loses a kept promise (memory, alert
latency, the decoder's fast path) does not pass unseen. A figure reported as missed is printed
with how far it is from its target; reaching it is news, not a failure.

``python -m bench.targets`` prints the table docs/performance.md holds (a docs test compares them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

#: the figure's name in the dicts the benchmarks return
FIGURES_OF = {
    "decode": ("fast_vs_thorough",),
    "replay": ("replay_records_per_second",),
    "otlp": ("otlp_traces_per_second", "phoenix_multiple"),
    "kafka": ("kafka_traces_per_second",),
    "alert_latency": ("alert_push_p99_seconds",),
    "memory": ("rss_end_mb", "rss_ratio"),
}


@dataclass(frozen=True)
class Target:
    """``figure`` at least (``at_least``) or at most ``goal``; ``met``: docs/performance.md
    reports it as met."""

    figure: str
    what: str
    goal: float
    at_least: bool
    unit: str
    met: bool

    def holds(self, value: float) -> bool:
        return value >= self.goal if self.at_least else value <= self.goal

    def words(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {_number(self.goal)}{self.unit}"

    def short_by(self, value: float) -> float:
        """How many times better ``value`` must get to reach the goal."""
        if value <= 0:
            return float("inf")
        return self.goal / value if self.at_least else value / self.goal


TARGETS = (
    Target("replay_records_per_second", "`ragmon replay`, end to end (`bench.replay`)", 20_000, True, " records/s",
           False),
    Target("otlp_traces_per_second", "OTLP/HTTP into `ragmon serve` (`bench.otlp`)", 5_000, True, " traces/s", False),
    Target("kafka_traces_per_second", "Kafka, first trace to last commit (`bench.kafka`)", 15_000, True,
           " traces/s", False),
    Target("phoenix_multiple", "ragmon / Arize Phoenix on the same OTLP payloads (`bench.otlp --phoenix`)", 100,
           True, "x", False),
    Target("fast_vs_thorough", "decoder's fast path / its thorough checker (`bench.decode`)", 2.0, True, "x", False),
    Target("alert_push_p99_seconds", "leak alert pushed, p99 (`bench.alert_latency`)", 2.0, False, " s", True),
    Target("rss_end_mb", "RSS after 2M traces (`bench.memory`)", 300, False, " MB", True),
    Target("rss_ratio", "RSS after 2M traces / after 200k (`bench.memory`)", 1.2, False, "x", True),
)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def check(figures: dict[str, float], every_one_run: bool = True) -> int:
    """Print each target with its figure; 1 when a target reported as met falls short (or its
    figure is missing, when ``every_one_run``: a run of some benchmarks checks only theirs), else 0."""
    failed = 0
    print("\ntargets (docs/performance.md)")
    for target in TARGETS:
        value = figures.get(target.figure)
        if value is None and not every_one_run:
            continue
        if value is None:
            verdict = "NOT MEASURED" + (" - reported as met" if target.met else "")
            failed += target.met
        elif target.holds(value):
            verdict = "met" if target.met else "met - reported as missed: update docs/performance.md"
        else:
            short = f"short by {_number(target.short_by(value))}x"
            verdict = f"SHORT - reported as met ({short})" if target.met else f"missed, as reported ({short})"
            failed += target.met
        shown = "" if value is None else f"{_number(value)}{target.unit}"
        print(f"  {target.what:78s} {shown:>18s}  target {target.words():16s} {verdict}")
    return 1 if failed else 0


def reference_markdown() -> str:
    """The table of targets docs/performance.md holds."""
    lines = ["| figure | target | reported |", "|---|---|---|"]
    lines += [f"| {t.what} | {t.words()} | {'met' if t.met else 'missed'} |" for t in TARGETS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
