"""Retrieval scores: low top score per list, and empty lists (the keyword side above all)."""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.results import RetrievalFinding


class ScoreBaselines:
    """Trailing top scores per (index, retriever) and their low percentile.

    Keeps the last ``window`` scores of each key, both in arrival order and sorted (kept sorted
    by insertion, so the percentile is exact after every score at the cost of a binary search and
    a memory move, instead of a sort of the window), and at most ``max_keys`` keys (least recently
    used dropped). NaN scores have no rank and are ignored.

    ``on_warming``, when set, is told each score judged while its key had no percentile yet
    (:func:`retrieval_findings` calls it; not the warm-up's :func:`learn_baselines`): replicas
    share those at once (``monitor/storage/score_share.py``), so that a key warms after
    ``min_samples`` scores of all of them, as in one process.
    """

    on_warming: Callable[[tuple[str, str], float], None] | None = None

    def __init__(self, percentile: float, min_samples: int, window: int, max_keys: int = 1000) -> None:
        self._fraction = percentile / 100.0
        self._min_samples = min_samples
        self._window = window
        self._max_keys = max_keys
        self._scores: OrderedDict[tuple[str, str], tuple[deque[float], list[float]]] = OrderedDict()
        self._cut: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def threshold(self, key: tuple[str, str]) -> float | None:
        """The trailing percentile for ``key``, once enough scores were seen."""
        return self._cut.get(key)

    def observe(self, key: tuple[str, str], score: float) -> None:
        if score != score:  # NaN
            return
        with self._lock:
            kept = self._scores.get(key)
            if kept is None:
                kept = self._scores[key] = (deque(), [])
                if len(self._scores) > self._max_keys:
                    dropped, _ = self._scores.popitem(last=False)
                    self._cut.pop(dropped, None)
            else:
                self._scores.move_to_end(key)
            arrived, ordered = kept
            if len(arrived) == self._window:
                del ordered[bisect_left(ordered, arrived.popleft())]
            arrived.append(score)
            insort(ordered, score)
            if len(ordered) >= self._min_samples:
                self._cut[key] = ordered[int(self._fraction * (len(ordered) - 1))]


def top_score(scores: list[float | None]) -> float | None:
    known = [s for s in scores if s is not None]
    return max(known) if known else None


def is_keyword(retriever: str, keyword_retrievers: Collection[str]) -> bool:
    """Whether a retriever is keyword search: its name contains one of ``keyword_retrievers``,
    ignoring case (``bm25`` matches LlamaIndex's ``BM25Retriever`` and Haystack's
    ``InMemoryBM25Retriever`` as well as a plain ``bm25``)."""
    name = retriever.lower()
    return any(keyword in name for keyword in keyword_retrievers)


def retrieval_findings(
    trace: TraceEvent,
    thresholds: Mapping[str, Mapping[str, float]],
    baselines: ScoreBaselines,
    keyword_retrievers: Collection[str],
) -> list[RetrievalFinding]:
    """One finding per retrieval list: its top score, whether it is low, whether it is empty,
    whether it is keyword search (``keyword_retrievers``: lower-case name parts, see :func:`is_keyword`).

    Low means below the configured threshold for (index, retriever), or without one, below the
    trailing percentile of that pair (judged before this score joins it).
    """
    index = trace.index.name
    configured = thresholds.get(index, {})
    findings = []
    for retrieval in trace.retrievals:
        name = retrieval.retriever
        top = top_score([p.score for p in retrieval.passages])
        low = warming = False
        limit = configured.get(name)
        fixed = limit is not None
        if top is not None:
            if limit is None:
                key = (index, name)
                limit = baselines.threshold(key)
                baselines.observe(key, top)
                warming = limit is None and top == top  # not NaN
                if warming and baselines.on_warming is not None:
                    baselines.on_warming(key, top)
            low = limit is not None and top < limit
        findings.append(RetrievalFinding(name, top, low, not retrieval.passages, is_keyword(name, keyword_retrievers),
                                         limit if low else None, fixed and low, warming))
    return findings


def learn_baselines(trace: TraceEvent, thresholds: Mapping[str, Mapping[str, float]],
                    baselines: ScoreBaselines) -> None:
    """Feed a trace another replica already judged (a warm-up) to the baselines that have no
    percentile yet. A baseline that has one is left alone: the replayed scores are older than the
    ones in its window, and appending them would bring back a past distribution."""
    index = trace.index.name
    configured = thresholds.get(index, {})
    for retrieval in trace.retrievals:
        top = top_score([p.score for p in retrieval.passages])
        key = (index, retrieval.retriever)
        if top is not None and retrieval.retriever not in configured and baselines.threshold(key) is None:
            baselines.observe(key, top)
