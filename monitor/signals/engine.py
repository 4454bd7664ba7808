"""Joins the signal functions and their bounded state into one call per event."""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.catalog import Catalog
from monitor.model import DocumentEvent, Event, FeedbackEvent, IndexEvent, TraceEvent
from monitor.signals.access import permission_violations
from monitor.signals.context import duplicate_slots, mixed_embeddings, unsupported_citations
from monitor.signals.freshness import stale_passages
from monitor.signals.memory import RecentTraces, RephraseDetector
from monitor.signals.outcome import answer_outcome, compile_refusals
from monitor.signals.results import FeedbackSignals, IndexSignals, Signals, TraceRef, TraceSignals
from monitor.signals.scores import ScoreBaselines, retrieval_findings

if TYPE_CHECKING:  # the configuration imports the signal results; a runtime import would be circular
    from monitor.config import SignalsConfig


class SignalEngine:
    """Computes the signals of each event and keeps the catalog and the bounded memories current.

    Not thread-safe as a whole: the pipeline calls it for one batch at a time.
    """

    def __init__(self, config: SignalsConfig, catalog: Catalog) -> None:
        self.catalog = catalog
        self._config = config
        self._refusals = compile_refusals(config.refusal_patterns)
        self._keyword = frozenset(name.lower() for name in config.keyword_retrievers)
        self.baselines = ScoreBaselines(config.low_score_percentile, config.low_score_min_samples,
                                        config.low_score_window)
        self.recent = RecentTraces(config.recent_traces)
        self.rephrases = RephraseDetector(config.rephrase_window_seconds, config.rephrase_min_jaccard,
                                          config.rephrase_callers)

    def observe(self, event: Event) -> Signals | None:
        if isinstance(event, TraceEvent):
            return self.trace(event)
        if isinstance(event, FeedbackEvent):
            return FeedbackSignals(self.recent.get(event.trace_id), event.kind, event.value)
        if isinstance(event, IndexEvent):
            return IndexSignals(event.index, self.catalog.apply_index(event))
        if isinstance(event, DocumentEvent):
            self.catalog.apply_document(event)
        return None

    def trace(self, trace: TraceEvent) -> TraceSignals:
        context = trace.final_context()
        ref = TraceRef(trace.trace_id, trace.tenant, trace.index.name, trace.time)
        self.recent.remember(ref)
        duplicate_passages, duplicate_versions = duplicate_slots(context)
        return TraceSignals(
            tenant=trace.tenant,
            index=trace.index.name,
            has_caller=trace.caller is not None and bool(trace.caller.id or trace.caller.groups),
            outcome=answer_outcome(trace, self._refusals),
            access=permission_violations(trace, self.catalog),
            stale=stale_passages(trace, self.catalog),
            retrievals=retrieval_findings(trace, self._config.low_score_thresholds, self.baselines, self._keyword),
            duplicate_passages=duplicate_passages,
            duplicate_doc_versions=duplicate_versions,
            mixed_embeddings=mixed_embeddings(context),
            unsupported_citations=unsupported_citations(trace),
            rephrase_of=self._rephrase(trace, ref),
            latency=trace.latency_ms,
            usage=trace.usage,
        )

    def _rephrase(self, trace: TraceEvent, ref: TraceRef) -> TraceRef | None:
        caller = trace.caller.id if trace.caller is not None and trace.caller.id else trace.conversation_id
        if not caller:
            return None
        return self.rephrases.check(f"{trace.tenant}\x00{caller}", ref, trace.query)
