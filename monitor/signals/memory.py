"""Bounded memories of recent traffic: recent traces (to join late feedback) and recent questions
per caller (to detect rephrases)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from monitor.signals.results import TraceRef

_WORDS = re.compile(r"\w+")


def question_tokens(text: str) -> frozenset[str]:
    """Normalized words of a question: lower-cased word characters, punctuation dropped."""
    return frozenset(_WORDS.findall(text.casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


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

    Remembers the last ``per_caller`` questions of at most ``callers`` callers (least recently
    active dropped). Seeing the same trace twice (a retried batch) is not a rephrase.
    """

    def __init__(self, window_seconds: float, min_jaccard: float, callers: int, per_caller: int = 8) -> None:
        self._window = window_seconds
        self._min_jaccard = min_jaccard
        self._callers = callers
        self._per_caller = per_caller
        self._recent: OrderedDict[str, list[tuple[TraceRef, frozenset[str]]]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, caller: str, ref: TraceRef, question: str) -> TraceRef | None:
        """Return the earlier trace that ``ref`` rephrases, if any, and remember ``ref``."""
        tokens = question_tokens(question)
        with self._lock:
            history = self._recent.get(caller)
            if history is None:
                history = self._recent[caller] = []
                if len(self._recent) > self._callers:
                    self._recent.popitem(last=False)
            else:
                self._recent.move_to_end(caller)
            if any(previous.trace_id == ref.trace_id for previous, _ in history):
                return None  # already seen: a redelivery, not a question asked again
            earlier = None
            for previous, previous_tokens in reversed(history):
                close = 0 <= ref.time - previous.time <= self._window
                if close and jaccard(tokens, previous_tokens) >= self._min_jaccard:
                    earlier = previous
                    break
            history.append((ref, tokens))
            if len(history) > self._per_caller:
                del history[0]
            return earlier
