"""Retrieval scores: low top score per list, and empty lists (the keyword side above all)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Collection, Mapping

from monitor.model import TraceEvent
from monitor.signals.results import RetrievalFinding


class ScoreBaselines:
    """Trailing top scores per (index, retriever) and their low percentile.

    Keeps the last ``window`` scores of each key and at most ``max_keys`` keys (least recently
    used dropped). The percentile is recomputed every ``refresh`` new scores, not on every one.
    """

    def __init__(self, percentile: float, min_samples: int, window: int,
                 max_keys: int = 1000, refresh: int = 100) -> None:
        self._fraction = percentile / 100.0
        self._min_samples = min_samples
        self._window = window
        self._max_keys = max_keys
        self._refresh = refresh
        self._scores: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._cut: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (percentile, scores added since)
        self._lock = threading.Lock()

    def threshold(self, key: tuple[str, str]) -> float | None:
        """The trailing percentile for ``key``, once enough scores were seen."""
        cut = self._cut.get(key)
        return None if cut is None else cut[0]

    def observe(self, key: tuple[str, str], score: float) -> None:
        with self._lock:
            scores = self._scores.get(key)
            if scores is None:
                scores = self._scores[key] = deque(maxlen=self._window)
                if len(self._scores) > self._max_keys:
                    dropped, _ = self._scores.popitem(last=False)
                    self._cut.pop(dropped, None)
            else:
                self._scores.move_to_end(key)
            scores.append(score)
            cut = self._cut.get(key)
            since = cut[1] + 1 if cut is not None else len(scores)
            if len(scores) >= self._min_samples and (cut is None or since >= self._refresh):
                ordered = sorted(scores)
                self._cut[key] = (ordered[int(self._fraction * (len(ordered) - 1))], 0)
            elif cut is not None:
                self._cut[key] = (cut[0], since)


def top_score(scores: list[float | None]) -> float | None:
    known = [s for s in scores if s is not None]
    return max(known) if known else None


def retrieval_findings(
    trace: TraceEvent,
    thresholds: Mapping[str, Mapping[str, float]],
    baselines: ScoreBaselines,
    keyword_retrievers: Collection[str],
) -> list[RetrievalFinding]:
    """One finding per retrieval list: its top score, whether it is low, whether it is empty.

    Low means below the configured threshold for (index, retriever), or without one, below the
    trailing percentile of that pair (judged before this score joins it).
    """
    index = trace.index.name
    configured = thresholds.get(index, {})
    findings = []
    for retrieval in trace.retrievals:
        name = retrieval.retriever
        top = top_score([p.score for p in retrieval.passages])
        low = False
        if top is not None:
            limit = configured.get(name)
            if limit is None:
                limit = baselines.threshold((index, name))
                baselines.observe((index, name), top)
            low = limit is not None and top < limit
        findings.append(RetrievalFinding(name, top, low, not retrieval.passages, name in keyword_retrievers))
    return findings
