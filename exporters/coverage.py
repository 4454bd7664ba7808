"""The coverage gauge: the share of the passages served from each index that the access and the
freshness check could judge, over a trailing window (docs/signals.md, "Coverage").

The counters (``ragmon_passages_judged_total``, ``ragmon_passages_unjudged_total``) hold the same
facts since the process started; this keeps the recent part of them in memory so a dashboard and
the status page show the present, not the process's lifetime. The window is split into
:data:`BUCKETS` buckets of its time, per (index label, check): a bounded memory, since index labels
are capped (``labels.max_indexes``) and checks are two. A bucket is forgotten once it lies wholly
before the window, so the figures cover the window and at most one bucket more.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ragmon.exporters.metrics import BY_NAME

BUCKETS = 12
GAUGE = "ragmon_passage_coverage_ratio"


class CoverageWindow:
    """Passages judged and served per (index label, check), in the last ``window_seconds``
    (``clock``: monotonic seconds). Thread-safe."""

    def __init__(self, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_seconds
        self._width = window_seconds / BUCKETS
        self._clock = clock
        self._buckets: dict[tuple[str, str], deque[list[float]]] = {}  # key -> [[bucket, judged, served], ...]
        self._lock = threading.Lock()

    def add(self, counts: Iterable[tuple[tuple[str, str], int, int]]) -> None:
        """``((index label, check), judged, served)`` of a batch's traces, counted now."""
        bucket = self._clock() // self._width
        with self._lock:
            for key, judged, served in counts:
                kept = self._buckets.get(key)
                if kept is None:
                    kept = self._buckets[key] = deque(maxlen=BUCKETS + 1)
                if kept and kept[-1][0] == bucket:
                    kept[-1][1] += judged
                    kept[-1][2] += served
                else:
                    kept.append([bucket, judged, served])

    def totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """``(index label, check) -> (judged, served)`` over the window; keys that served nothing
        in it are left out (their ratio is unknown, not 0 or 1)."""
        oldest = (self._clock() - self._window) // self._width
        result = {}
        with self._lock:
            for key, kept in list(self._buckets.items()):
                while kept and kept[0][0] < oldest:
                    kept.popleft()
                if not kept:
                    del self._buckets[key]
                    continue
                served = sum(b[2] for b in kept)
                if served:
                    result[key] = (int(sum(b[1] for b in kept)), int(served))
        return result

    def ratios(self) -> dict[tuple[str, str], float]:
        """``(index label, check) -> judged / served`` over the window."""
        return {key: judged / served for key, (judged, served) in self.totals().items()}


class CoverageCollector(Collector):
    """``ragmon_passage_coverage_ratio{index, check}`` at scrape time, from a :class:`CoverageWindow`."""

    def __init__(self, window: CoverageWindow) -> None:
        self._window = window

    def collect(self):
        spec = BY_NAME[GAUGE]
        family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        for (index, check), ratio in sorted(self._window.ratios().items()):
            family.add_metric([index, check], ratio)
        yield family

    def describe(self):
        return []
