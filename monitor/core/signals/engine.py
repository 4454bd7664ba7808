"""Joins the signal functions and their bounded state into one call per event."""

from __future__ import annotations

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, Event, FeedbackEvent, IndexEvent, TraceEvent, partition_key
from ragmon.monitor.core.signals.access import permission_violations
from ragmon.monitor.core.signals.catalog_audit import CatalogAudit
from ragmon.monitor.core.signals.context import duplicate_slots, mixed_embeddings, unsupported_citations
from ragmon.monitor.core.signals.explain import explain_trace
from ragmon.monitor.core.signals.freshness import stale_passages
from ragmon.monitor.core.signals.memory import RecentTraces, RephraseDetector
from ragmon.monitor.core.signals.outcome import answer_outcome, compile_refusals
from ragmon.monitor.core.signals.results import (
    CatalogSignals,
    FeedbackSignals,
    IndexSignals,
    Signals,
    TraceRef,
    TraceSignals,
)
from ragmon.monitor.core.signals.rewrite import RewriteJudge, rewrite_findings
from ragmon.monitor.core.signals.scores import ScoreBaselines, learn_baselines, retrieval_findings
from ragmon.monitor.core.signals.stages import stage_ids


class SignalEngine:
    """Computes the signals of each event and keeps its own bounded memories (score baselines,
    recent traces, recent questions per caller, recent turns per conversation) current. It reads
    the catalog and never changes it: the catalog stage (:meth:`Catalog.apply`) runs before it on every event.

    Not thread-safe as a whole: the pipeline calls it for one batch at a time.
    """

    def __init__(self, config: SignalsConfig, catalog: Catalog, explain: bool = True,
                 audit: CatalogAudit | None = None) -> None:
        """``explain``: also put each trace's findings in words (``TraceSignals.findings``, for
        the findings store); they cost only the traces on which a signal fired. ``audit``: finds
        the catalog events accepted but suspicious (``CatalogSignals``, ``TraceSignals.suspicious``)."""
        self.catalog = catalog
        self.audit = audit
        self._explain = explain
        self._config = config
        self._refusals = compile_refusals(config.refusal_patterns)
        self._keyword = frozenset(name.lower() for name in config.keyword_retrievers)
        self.baselines = ScoreBaselines(config.low_score_percentile, config.low_score_min_samples,
                                        config.low_score_window)
        self.recent = RecentTraces(config.recent_traces)
        self.rephrases = RephraseDetector(config.rephrase_window_seconds, config.rephrase_min_jaccard,
                                          config.rephrase_callers)
        self.rewrites = RewriteJudge(config.rewrite_conversations)

    def observe(self, event: Event) -> Signals | None:
        if isinstance(event, TraceEvent):
            return self.trace(event)
        if isinstance(event, FeedbackEvent):
            return FeedbackSignals(self.recent.get(event.trace_id), event.kind, event.value)
        if isinstance(event, IndexEvent):
            return IndexSignals(event.index, self.catalog.lag_taken_in(event))
        if isinstance(event, DocumentEvent) and self.audit is not None:
            suspicious = self.audit.document(event)
            return CatalogSignals(suspicious) if suspicious else None
        return None

    def learn(self, event: Event) -> None:
        """Take in an event another replica already judged (``Pipeline.warm``): the memories only,
        as that replica had them (recent traces for the feedback join, questions per caller, turns
        per conversation, and
        the score baselines that have no percentile yet; see :func:`learn_baselines`)."""
        if isinstance(event, TraceEvent):
            ref = TraceRef(event.trace_id, event.tenant, event.index.name, event.time)
            self.recent.remember(ref)
            self._rephrase(event, ref)
            self.rewrites.remember(event)
            learn_baselines(event, self._config.low_score_thresholds, self.baselines)

    def trace(self, trace: TraceEvent) -> TraceSignals:
        context = trace.final_context()
        ref = TraceRef(trace.trace_id, trace.tenant, trace.index.name, trace.time)
        self.recent.remember(ref)
        duplicate_passages, duplicate_versions = duplicate_slots(context)
        stages = stage_ids(trace)
        signals = TraceSignals(
            tenant=trace.tenant,
            index=trace.index.name,
            has_caller=trace.caller is not None and bool(trace.caller.id or trace.caller.groups),
            outcome=answer_outcome(trace, self._refusals),
            access=permission_violations(trace, self.catalog, stages),
            stale=stale_passages(trace, self.catalog, stages),
            retrievals=retrieval_findings(trace, self._config.low_score_thresholds, self.baselines, self._keyword),
            duplicate_passages=duplicate_passages,
            duplicate_doc_versions=duplicate_versions,
            mixed_embeddings=mixed_embeddings(context),
            unsupported_citations=unsupported_citations(trace),
            rephrase_of=self._rephrase(trace, ref),
            latency=trace.latency_ms,
            usage=trace.usage,
            rewrite=self.rewrites.judge(trace),
        )
        if self._explain:
            signals.findings = explain_trace(trace, signals, self.catalog)
            if signals.rewrite is not None:
                signals.findings += rewrite_findings(ref, signals.rewrite, trace)
        if self.audit is not None:
            signals.suspicious = self.audit.trace(trace)
        return signals

    def _rephrase(self, trace: TraceEvent, ref: TraceRef) -> TraceRef | None:
        key = partition_key(trace.caller.id if trace.caller is not None else None, trace.conversation_id)
        if not key:
            return None
        return self.rephrases.check(f"{trace.tenant}\x00{key}", ref, trace.query)
