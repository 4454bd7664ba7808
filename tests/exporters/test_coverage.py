"""The coverage gauge's trailing window: what was judged of what was served, per index and check,
forgetting what fell out of the window."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from ragmon.exporters.coverage import CoverageCollector, CoverageWindow


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


def test_the_ratio_is_over_the_window_and_old_buckets_are_forgotten():
    clock = Clock()
    window = CoverageWindow(3600.0, clock)
    window.add([(("policies", "access"), 0, 10), (("policies", "freshness"), 10, 10)])
    clock.now += 1800
    window.add([(("policies", "access"), 10, 10)])
    assert window.ratios() == {("policies", "access"): 0.5, ("policies", "freshness"): 1.0}
    clock.now += 2100  # the first batch is out of the window (and its bucket), the second still in it
    assert window.ratios() == {("policies", "access"): 1.0}
    clock.now += 3600  # nothing served in the window: no ratio at all, not a 0 or a 1
    assert window.ratios() == {} and window.totals() == {}


def test_the_gauge_names_index_and_check():
    clock = Clock()
    window = CoverageWindow(60.0, clock)
    window.add([(("hr", "access"), 1, 4)])
    registry = CollectorRegistry()
    registry.register(CoverageCollector(window))
    assert b'ragmon_passage_coverage_ratio{check="access",index="hr"} 0.25' in generate_latest(registry)
