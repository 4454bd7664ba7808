"""Bounded memories of recent traffic: recent traces (to join late feedback) and recent questions
per caller (to detect rephrases)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Collection

from ragmon.monitor.core.signals.results import TraceRef

_WORDS = re.compile(r"\w+")
MAX_TOKENS = 64  # distinct words kept per question: memory stays small whatever the query's size


def question_tokens(text: str) -> tuple[int, ...]:
    """Normalized words of a question (lower-cased word characters, punctuation dropped), the
    first :data:`MAX_TOKENS` distinct ones, kept as hashes.

    A tuple, not a set: the rephrase memory holds many, and a tuple of ints drops out of the
    cyclic garbage collector's scans where a set would stay in them.
    """
    return tuple(dict.fromkeys(map(hash, _WORDS.findall(text.casefold()))))[:MAX_TOKENS]


def jaccard(a: Collection[int], b: Collection[int]) -> float:
    """Jaccard similarity of two collections of distinct items."""
    if not a and not b:
        return 1.0
    common = len(frozenset(a).intersection(b))
    return common / (len(a) + len(b) - common)


class RecentTraces:
    """The last ``capacity`` traces by id. ``evicted`` counts those pushed out."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._traces: OrderedDict[str, TraceRef] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def remember(self, ref: TraceRef) -> None:
        with self._lock:
            self._traces[ref.trace_id] = ref
            if len(self._traces) > self._capacity:
                self._traces.popitem(last=False)
                self.evicted += 1

    def get(self, trace_id: str) -> TraceRef | None:
        return self._traces.get(trace_id)

    def __len__(self) -> int:
        return len(self._traces)


class RephraseDetector:
    """Finds a caller asking nearly the same question again within a time window.

    Remembers the last ``per_caller`` questions of at most ``callers`` callers (the least recently
    active forgotten first). Time is each caller's own: a question is compared with that caller's
    earlier ones within the window before it, and nothing is forgotten because another caller's
    trace is later. Partitions are consumed at their own pace, so a trace time from one says
    nothing about how far another has got (a global "now" would forget the callers of a partition
    that lags). Seeing the same trace twice (a retried batch) is not a rephrase.
    """

    def __init__(self, window_seconds: float, min_jaccard: float, callers: int, per_caller: int = 8) -> None:
        self._window = window_seconds
        self._min_jaccard = min_jaccard
        self._callers = callers
        self._per_caller = per_caller
        # per caller, a tuple of (trace, question tokens) pairs: tuples of untracked items, so the
        # garbage collector skips them (a list would be scanned on every full collection)
        self._recent: OrderedDict[str, tuple[tuple[TraceRef, tuple[int, ...]], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, caller: str, ref: TraceRef, question: str) -> TraceRef | None:
        """Return the earlier trace that ``ref`` rephrases, if any, and remember ``ref``."""
        tokens = question_tokens(question)
        with self._lock:
            history = self._recent.get(caller)
            if history is None:
                history = ()
            else:
                self._recent.move_to_end(caller)
            for previous, _ in history:
                if previous.trace_id == ref.trace_id:
                    return None  # already seen: a redelivery, not a question asked again
            earlier = None
            token_set, size, least = frozenset(tokens), len(tokens), self._min_jaccard
            for previous, previous_tokens in reversed(history):
                if not 0 <= ref.time - previous.time <= self._window:
                    continue
                # |a & b| <= min size and |a | b| >= max size: sets too different in size cannot reach
                # the similarity, and most pairs are ruled out without building the intersection.
                other = len(previous_tokens)
                if min(size, other) < least * max(size, other):
                    continue
                if jaccard(token_set, previous_tokens) >= least:
                    earlier = previous
                    break
            self._recent[caller] = (*history[max(0, len(history) + 1 - self._per_caller):], (ref, tokens))
            if len(self._recent) > self._callers:
                self._recent.popitem(last=False)
            return earlier

    def __len__(self) -> int:
        return len(self._recent)
