"""Judging again: when the catalog changes, the recent traces that served the changed documents
are judged again against it, and the leaks and stale passages found then are reported as found
late (docs/signals.md, "Judged again").

A revocation the catalog learns of after the traces that leaked (a catalog sync that runs hourly,
a change feed that lags, ``ragmon replay`` of catalog events, a catalog configured after traffic
started) would otherwise leave them judged by the old ACL for good. What is held against a trace
is only what the catalog says was in force when the trace was answered:

- access: the document's current tenant and ACL, when its newest change was made at or before the
  trace's time (the catalog keeps no ACL history: a change made after the trace is not its rule);
- freshness: the version current at the trace's time by the document's version history (or its
  deletion, made by then), against the version served (the passage's, else the one its index had
  reported by then); a version the change feed never announced decides nothing.

A passage already flagged by the same check is not reported again, so a trace is never counted
twice for one passage. The traces kept for this are the last ``signals.late_judging_traces`` judged
and at most ``signals.late_judging_bytes`` of their records as received (a decoded trace takes about
2.7 times its record in memory): kept by reference, oldest dropped first. A batch's catalog changes
are collected and the kept traces walked at most every ``catalog.refresh_seconds``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Event, Passage, TraceEvent
from ragmon.monitor.core.signals.access import Access, caller_principals, document_access
from ragmon.monitor.core.signals.explain import FindingSignal, Rule, Why, by_stage
from ragmon.monitor.core.signals.freshness import Freshness, stale_as_of
from ragmon.monitor.core.signals.results import (
    MAX_IDS,
    AccessFindings,
    LateSignals,
    Signals,
    StaleFindings,
    TraceRef,
    TraceSignals,
)

FOUND_LATE = "found late, after the catalog changed: "


@dataclass(slots=True)
class _Kept:
    trace: TraceEvent
    size: int  # the record's bytes as received
    flagged_access: frozenset[str]  # passage ids already reported as leaks
    flagged_stale: frozenset[str]  # passage ids already reported as stale


class LateJudge:
    """Keeps the recent judged traces and judges them again when the catalog changes. The
    pipeline calls it under its lock (``Stages.keep``, ``Stages.late``): one call at a time."""

    def __init__(self, catalog: Catalog, max_traces: int, max_bytes: int, interval: float,
                 clock: Callable[[], float] = time.monotonic, explain: bool = True) -> None:
        """``interval``: the least time between two walks of the kept traces; ``explain``: also
        put what is found in words (findings)."""
        self._catalog = catalog
        self._max_traces = max_traces
        self._max_bytes = max_bytes
        self._interval = interval
        self._clock = clock
        self._explain = explain
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._bytes = 0
        self._pending: set[str] = set()
        self._next = 0.0
        self._lock = threading.Lock()  # changed() may come from a thread of its own (the catalog refresh)
        self.judged_again = 0  # traces walked again, since the start

    def keep(self, event: Event, signals: Signals | None, data: bytes) -> None:
        """Keep a trace just judged, with what it was flagged for."""
        if not isinstance(event, TraceEvent) or not isinstance(signals, TraceSignals):
            return
        kept = _Kept(event, len(data), signals.access.flagged, signals.stale.flagged)
        with self._lock:
            old = self._kept.pop(event.trace_id, None)
            if old is not None:
                self._bytes -= old.size
            self._kept[event.trace_id] = kept
            self._bytes += kept.size
            while self._kept and (len(self._kept) > self._max_traces or self._bytes > self._max_bytes):
                self._bytes -= self._kept.popitem(last=False)[1].size

    def changed(self, doc_ids: Iterable[str]) -> None:
        """The catalog changed these documents (an event applied, or a refresh from the store)."""
        with self._lock:
            self._pending.update(doc_ids)

    def __len__(self) -> int:
        return len(self._kept)

    def judge_again(self, force: bool = False) -> list[tuple[TraceEvent, LateSignals]]:
        """The kept traces that served changed documents, judged again; only those where something
        was found late. Does nothing before ``interval`` has passed since the last walk (unless
        ``force``): changes wait and are taken together."""
        now = self._clock()
        with self._lock:
            if not self._pending or (not force and now < self._next):
                return []
            pending, self._pending = self._pending, set()
            kept = list(self._kept.values())
        self._next = now + self._interval
        found = []
        for entry in kept:
            late = self._judge(entry, pending)
            if late is not None:
                found.append((entry.trace, late))
        self.judged_again += len(kept)
        return found

    def _judge(self, kept: _Kept, changed: set[str]) -> LateSignals | None:
        trace = kept.trace
        document_of = self._catalog.document_of
        if not any(document_of(p) in changed for p in _passages(trace)):
            return None
        access_rule, stale_rule = self._rules(kept, changed)
        leaks, stale = _flag(trace, access_rule), _flag(trace, stale_rule)
        if not leaks[0] and not stale[0]:
            return None
        access = AccessFindings(len(leaks[1]), len(leaks[2]), 0, *_documents(trace, leaks[0], document_of),
                                flagged=leaks[0])
        staleness = StaleFindings(len(stale[1]), len(stale[2]), _documents(trace, stale[0], document_of)[0],
                                  flagged=stale[0])
        late = LateSignals(trace.tenant, trace.index.name, access, staleness)
        if self._explain:
            ref = TraceRef(trace.trace_id, trace.tenant, trace.index.name, trace.time)
            if leaks[0]:
                late.findings += by_stage(FindingSignal.PERMISSION_VIOLATION, ref, trace, access_rule, document_of)
            if stale[0]:
                late.findings += by_stage(FindingSignal.STALE_PASSAGE, ref, trace, stale_rule, document_of)
        # reported now: not again (after the words, which the rules give only for what is new)
        kept.flagged_access |= leaks[0]
        kept.flagged_stale |= stale[0]
        return late

    def _rules(self, kept: _Kept, changed: set[str]) -> tuple[Rule, Rule]:
        """Why a passage of a changed document is a leak, or stale, by what was in force at the
        trace's time; None for any other passage, and for those already reported."""
        catalog, trace = self._catalog, kept.trace
        principals = caller_principals(trace)
        caller = sorted(principals)

        def access(passage: Passage) -> Why | None:
            doc_id = catalog.document_of(passage)
            if doc_id not in changed or passage.id in kept.flagged_access:
                return None
            document = catalog.document(doc_id)  # type: ignore[arg-type]
            if document is None or document.modified_at > trace.time:
                return None
            verdict = document_access(doc_id, trace.tenant, principals, catalog)  # type: ignore[arg-type]
            if verdict is Access.OTHER_TENANT:
                return Why(FOUND_LATE + "the catalog puts the document in tenant {owner}; the caller is of tenant "
                           "{tenant}", ids={"owner": document.tenant, "tenant": trace.tenant})
            if verdict is Access.CATALOG_EXCLUDES:
                return Why(FOUND_LATE + "catalog ACL {acl} excludes the caller {caller}",
                           {"acl": sorted(document.acl or ()), "caller": caller})
            return None

        def stale(passage: Passage) -> Why | None:
            doc_id = catalog.document_of(passage)
            if doc_id not in changed or passage.id in kept.flagged_stale:
                return None
            decided = stale_as_of(catalog, doc_id, passage.doc_version, trace.index.name,  # type: ignore[arg-type]
                                  trace.time)
            if decided is None:
                return None
            freshness, served, current = decided
            if freshness is Freshness.DELETED:
                return Why(FOUND_LATE + "the catalog records the document as deleted before the trace")
            return Why(FOUND_LATE + "version {served} was served; the version current at the time of the trace "
                       "was {current}", terms={"served": served, "current": current or ""})

        return access, stale


def _passages(trace: TraceEvent) -> Iterable[Passage]:
    for retrieval in trace.retrievals:
        yield from retrieval.passages
    if trace.context is not None:
        yield from trace.context


def _flag(trace: TraceEvent, rule: Rule) -> tuple[frozenset[str], set[str], set[str]]:
    """(passage ids the rule flags, those at stage candidates, those at stage context): an id is
    flagged when any copy of it is, at every stage it is in."""
    flagged = frozenset(p.id for p in _passages(trace) if rule(p) is not None)
    if not flagged:
        return flagged, set(), set()
    candidates = {p.id for r in trace.retrievals for p in r.passages if p.id in flagged}
    return flagged, candidates, {p.id for p in trace.final_context() if p.id in flagged}


def _documents(trace: TraceEvent, flagged: frozenset[str], document_of: Callable[[Passage], str | None]
               ) -> tuple[list[str], list[str]]:
    """(documents of the flagged passages, those in the context), in order, at most MAX_IDS each."""
    every: list[str] = []
    context: list[str] = []
    for passages, out in ((list(_passages(trace)), every), (trace.final_context(), context)):
        for passage in passages:
            doc_id = document_of(passage) if passage.id in flagged else None
            if doc_id and doc_id not in out and len(out) < MAX_IDS:
                out.append(doc_id)
    return every, context
