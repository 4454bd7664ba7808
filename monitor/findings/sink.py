"""Sink: the findings of each observation, redacted, rate-limited per signal, into the findings store.

Ids a sender chose (trace ids, tenants, index names, passage and document ids) are stored as their
shown ids (``Redactor.shown_id``), the key the labeling queue stores a sample by, so a finding names
its sample's trace, and a reader given a raw id finds both through the same rule; the words are
bounded, the whole principal lists kept apart (``monitor/findings/wording.py``).

A trace's findings come with its signals (``TraceSignals.findings``, made by the signal engine
against the catalog the trace was judged by); a thumb down or an escalation is a finding of the
trace it is about. Durable: a batch's findings are stored before it is acknowledged, and a
database error refuses the batch (:class:`Retryable`), so none is lost to an outage; a flood of
one signal is cut by its rate limit instead, and counted.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from ragmon.monitor.core.model import FeedbackEvent, TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.rate_limit import TokenBucket
from ragmon.monitor.core.signals.explain import Finding, FindingSignal, explain_feedback
from ragmon.monitor.core.signals.results import FeedbackSignals, LateSignals, TraceSignals
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.findings.wording import Wording
from ragmon.monitor.labeling.redact import Redactor

BURST_SECONDS = 10.0  # a signal may burst to this many seconds' worth of its rate
NAME_LENGTH = 256  # the tenant and index columns' width (migration 0005)

Count = Callable[[str, str, int], None]  # (signal, outcome: stored | rate_limited, n)


class FindingsSink:
    """Turns observations into finding rows and stores them on flush."""

    name = "findings"
    durable = True

    def __init__(self, store: FindingsStore, redactor: Redactor, per_signal_per_second: float,
                 clock: Callable[[], float] = time.time, count: Count | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``redactor`` must hold the caller key (callers become pseudonyms); ``clock`` stamps the
        rows (``recorded_at``, what retention goes by), ``monotonic`` drives the rate limits;
        ``count`` is told, once a batch is stored, how many findings of each signal were stored
        and how many the rate limit dropped."""
        self._store = store
        self._redactor = redactor
        self._wording = Wording(redactor)
        self._clock = clock
        self._count = count
        self._buckets = {signal: TokenBucket(per_signal_per_second, per_signal_per_second * BURST_SECONDS, monotonic)
                         for signal in FindingSignal}
        self._pending: dict[str, dict[str, Any]] = {}
        self._dropped: Counter[str] = Counter()
        self._lock = threading.Lock()

    def consume(self, observation: Observation) -> None:
        event, signals = observation.event, observation.signals
        if isinstance(event, TraceEvent) and isinstance(signals, TraceSignals | LateSignals):
            findings, origin = signals.findings, None  # the trace's origin: made once a finding is kept
        elif isinstance(event, FeedbackEvent) and isinstance(signals, FeedbackSignals):
            findings = explain_feedback(event, signals)
            origin = (f"feedback\0{event.kind}\0{event.value}\0{event.time}", "")
        else:
            return
        if not findings:
            return
        with self._lock:
            for finding in findings:
                if not self._buckets[finding.signal].take():
                    self._dropped[finding.signal.value] += 1
                    continue
                if origin is None:
                    # the shown ids and the caller's pseudonym only for a trace with a finding kept: at a
                    # sustained rate most traces' findings are all rate-limited (counted, never stored)
                    origin = self._trace_origin(event, signals)  # type: ignore[arg-type]
                row = self._row(finding, *origin)
                self._pending[row["key"]] = row

    def _trace_origin(self, event: TraceEvent, signals: TraceSignals | LateSignals) -> tuple[str, str]:
        """What a trace's finding rows are keyed by (its shown id; for a late one, with its passages'),
        and its caller's pseudonym ("" without a caller)."""
        origin = self._redactor.shown_id(event.trace_id)
        if isinstance(signals, LateSignals):  # found after the trace's own findings: rows of their own
            shown = self._redactor.shown_id
            origin = "\0".join(("late", origin, *(shown(p) for f in signals.findings for p in f.passage_ids)))
        if event.caller is not None and event.caller.id:
            return origin, self._redactor.pseudonymize_caller(event.caller.id)
        return origin, ""

    def flush(self, timeout: float) -> bool:
        with self._lock:
            rows, dropped = list(self._pending.values()), Counter(self._dropped)
        self._store.add(rows)  # raises Retryable: the rows stay pending for the batch's retry
        with self._lock:
            for row in rows:
                self._pending.pop(row["key"], None)
            self._dropped -= dropped
        if self._count is not None:
            for signal, n in Counter(row["signal"] for row in rows).items():
                self._count(signal, "stored", n)
            for signal, n in dropped.items():
                self._count(signal, "rate_limited", n)
        return True

    def shutdown(self) -> None:
        pass

    def _row(self, finding: Finding, origin: str, caller: str) -> dict[str, Any]:
        shown, redact = self._redactor.shown_id, self._redactor.redact
        ref = finding.trace
        trace_id = shown(ref.trace_id)
        # made of shown ids: a hash of raw ones would give away a guessable address in a trace id
        made_of = "\0".join((trace_id, finding.signal.value, finding.stage or "", origin))
        lists = self._wording.shown_principals(finding)
        return {
            "key": hashlib.sha256(made_of.encode()).hexdigest(),
            "trace_id": trace_id, "time": ref.time, "recorded_at": self._clock(),
            # within the decoder's default limits a shown id fits; a longer limit's names are cut
            "tenant": shown(ref.tenant)[:NAME_LENGTH], "index_name": shown(ref.index)[:NAME_LENGTH],
            # a rephrase is the same caller's (the detector keys questions by caller); feedback names none
            "caller": caller if finding.signal is not FindingSignal.NEGATIVE_FEEDBACK else "",
            "signal": finding.signal.value, "stage": finding.stage,
            "passage_ids": [shown(p) for p in finding.passage_ids],
            "documents": [[shown(doc_id), None if version is None else redact(version)]
                          for doc_id, version in finding.documents],
            "reason": self._wording.reason(finding, lists),
            "principals": self._wording.full_lists(lists),
        }
