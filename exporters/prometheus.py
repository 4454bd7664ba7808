"""Prometheus metrics (SPEC §3): a sink that counts what the signals found, and a collector that
reads pipeline counters and catalog health at scrape time.

Label values come from closed sets only. Tenant and index are capped (an allowlist, else the first
N seen, then ``other``), retriever likewise; stage, outcome, kind, value, reason are enums.
Nothing else — no user, trace, passage or document id, no text — ever becomes a label.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from exporters.metrics import BY_NAME, MetricSpec
from monitor.catalog import Catalog
from monitor.config import LabelsConfig
from monitor.pipeline import Observation, PipelineStats
from monitor.signals import FeedbackSignals, IndexSignals, Outcome, TraceSignals

OTHER = "other"
UNKNOWN = "unknown"
LATENCY_STAGES = ("retrieve", "rerank", "generate", "total")


class LabelCap:
    """Maps a free-form name to itself while there is room, else to ``other``."""

    def __init__(self, allow: Iterable[str], limit: int) -> None:
        self._allow = frozenset(allow)
        self._limit = limit
        self._seen: set[str] = set(self._allow)
        self._dynamic = 0
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        with self._lock:
            if value in self._seen:
                return value
            if self._dynamic < self._limit:
                self._dynamic += 1
                self._seen.add(value)
                return value
        return OTHER


def _make(spec: MetricSpec, registry: CollectorRegistry):
    if spec.kind == "counter":
        return Counter(spec.name, spec.help, spec.labels, registry=registry)
    if spec.kind == "gauge":
        return Gauge(spec.name, spec.help, spec.labels, registry=registry)
    return Histogram(spec.name, spec.help, spec.labels, buckets=spec.buckets, registry=registry)


class _Slot:
    """The children of one (tenant, index) pair, bound once: labels() is too slow per trace."""

    __slots__ = ("answers", "violations", "unknown_acl", "stale", "duplicates", "mixed", "unsupported",
                 "rephrases", "latency", "tokens", "cost", "empty_keyword")

    def __init__(self, m: PrometheusSink, tenant: str, index: str) -> None:
        self.answers = {o: m.answers.labels(tenant, index, o.value) for o in Outcome}
        self.violations = {s: m.violations.labels(tenant, index, s) for s in ("candidates", "context")}
        self.unknown_acl = m.unknown_acl.labels(tenant, index)
        self.stale = {s: m.stale.labels(tenant, index, s) for s in ("candidates", "context")}
        self.duplicates = {k: m.duplicates.labels(tenant, index, k) for k in ("passage", "doc_version")}
        self.mixed = m.mixed.labels(tenant, index)
        self.unsupported = m.unsupported.labels(tenant, index)
        self.rephrases = m.rephrases.labels(tenant, index)
        self.latency = {s: m.latency.labels(tenant, index, s) for s in LATENCY_STAGES}
        self.tokens = {d: m.tokens.labels(tenant, index, d) for d in ("input", "output")}
        self.cost = m.cost.labels(tenant, index)
        self.empty_keyword = m.empty_keyword.labels(tenant, index)


class PrometheusSink:
    """Counts each observation's signals into metrics on ``registry``."""

    name = "prometheus"
    durable = False  # counts only what is already stored, so a retried batch is not counted twice

    def __init__(self, registry: CollectorRegistry, labels: LabelsConfig, stats: PipelineStats,
                 catalog: Catalog, clock: Callable[[], float] = time.time,
                 sample_queue: Callable[[], dict[str, int]] | None = None) -> None:
        """``sample_queue`` gives the samples in the store per status (for ``ragmon_sample_queue``)."""
        self.registry = registry
        self.tenant = LabelCap(labels.tenants, labels.max_tenants)
        self.index = LabelCap(labels.indexes, labels.max_indexes)
        self.retriever = LabelCap((), labels.max_retrievers)
        made = {spec.name: _make(spec, registry) for spec in BY_NAME.values() if spec.name not in _PULLED}
        self.answers = made["ragmon_answers_total"]
        self.violations = made["ragmon_permission_violations_total"]
        self.unknown_acl = made["ragmon_unknown_acl_passages_total"]
        self.stale = made["ragmon_stale_passages_served_total"]
        self.low_score = made["ragmon_low_score_retrievals_total"]
        self.empty = made["ragmon_empty_retrievals_total"]
        self.empty_keyword = made["ragmon_empty_keyword_retrievals_total"]
        self.without_caller = made["ragmon_traces_without_caller_total"]
        self.top_score = made["ragmon_retrieval_top_score"]
        self.duplicates = made["ragmon_duplicate_slots_total"]
        self.mixed = made["ragmon_mixed_embedding_results_total"]
        self.unsupported = made["ragmon_unsupported_citations_total"]
        self.rephrases = made["ragmon_rephrases_total"]
        self.feedback = made["ragmon_feedback_total"]
        self.latency = made["ragmon_stage_latency_seconds"]
        self.tokens = made["ragmon_tokens_total"]
        self.cost = made["ragmon_cost_usd_total"]
        self.index_lag = made["ragmon_index_lag_seconds"]
        # fed by the sampler (through observations), the probes, the Kafka source and the alert dispatcher
        self.samples = made["ragmon_samples_total"]
        self.samples_dropped = made["ragmon_samples_dropped_total"]
        self.probe_failures = made["ragmon_probe_failures_total"]
        self.consumer_lag = made["ragmon_consumer_lag_messages"]
        self.alert_notifications = made["ragmon_alert_notifications_total"]
        self.probe_leaks = made["ragmon_probe_leaks_total"]
        self.job_runs = made["ragmon_job_runs_total"]
        self.job_last_success = made["ragmon_job_last_success_timestamp_seconds"]
        self.retention_deleted = made["ragmon_retention_deleted_total"]
        self.scheduler_leader = made["ragmon_scheduler_leader"]
        # fed by the OTLP receiver (the MappingReport of collectors.otlp)
        self.derived_ids = made["ragmon_derived_passage_ids_total"]
        self.unmapped = made["ragmon_unmapped_passages_total"]
        self.without_retrieval = made["ragmon_otlp_traces_without_retrieval_total"]
        self.malformed = made["ragmon_malformed_span_attributes_total"]
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._retrievers: dict[tuple[str, str, str], tuple] = {}
        self._lock = threading.Lock()
        registry.register(_ScrapeTimeCollector(stats, catalog, self.index, clock))
        if sample_queue is not None:
            from monitor.sample_store import STATUSES

            registry.register(SampleQueueCollector(sample_queue, STATUSES))

    def consume(self, observation: Observation) -> None:
        if observation.sampling is not None:
            for tenant, stratum in observation.sampling.sampled:
                self.samples.labels(self.tenant(tenant), stratum).inc()
            for reason in observation.sampling.dropped:
                self.samples_dropped.labels(reason).inc()
        signals = observation.signals
        if isinstance(signals, TraceSignals):
            self._trace(signals)
        elif isinstance(signals, FeedbackSignals):
            trace = signals.trace
            tenant, index = (self.tenant(trace.tenant), self.index(trace.index)) if trace else (UNKNOWN, UNKNOWN)
            self.feedback.labels(tenant, index, signals.kind, signals.value or "none").inc()
        elif isinstance(signals, IndexSignals) and signals.lag_seconds is not None:
            self.index_lag.labels(self.index(signals.index)).observe(signals.lag_seconds)

    def flush(self, timeout: float) -> bool:
        return True  # metrics live in memory; nothing to make durable

    def malformed_attributes(self, attributes: list[str]) -> None:
        """OTLP span attributes the receiver could not read (names from a closed set)."""
        for attribute in attributes:
            self.malformed.labels(attribute).inc()

    def mapped(self, mapped) -> None:
        """What the OTLP receiver's mapping of one trace had to derive, drop or skip."""
        for how, n in mapped.derived.items():
            self.derived_ids.labels(how).inc(n)
        if mapped.unmapped:
            self.unmapped.inc(mapped.unmapped)
        if mapped.event is None:
            self.without_retrieval.inc()

    def shutdown(self) -> None:
        pass

    def _slot(self, tenant: str, index: str) -> _Slot:
        key = (self.tenant(tenant), self.index(index))
        slot = self._slots.get(key)
        if slot is None:
            with self._lock:
                slot = self._slots.setdefault(key, _Slot(self, *key))
        return slot

    def _retriever(self, tenant: str, index: str, retriever: str) -> tuple:
        key = (self.tenant(tenant), self.index(index), self.retriever(retriever))
        children = self._retrievers.get(key)
        if children is None:
            with self._lock:
                children = self._retrievers.setdefault(
                    key, (self.low_score.labels(*key), self.empty.labels(*key), self.top_score.labels(*key)))
        return children

    def _trace(self, s: TraceSignals) -> None:
        slot = self._slot(s.tenant, s.index)
        slot.answers[s.outcome].inc()
        if not s.has_caller:
            self.without_caller.labels(self.tenant(s.tenant)).inc()
        if s.access.candidates:
            slot.violations["candidates"].inc(s.access.candidates)
        if s.access.context:
            slot.violations["context"].inc(s.access.context)
        if s.access.unknown_acl:
            slot.unknown_acl.inc(s.access.unknown_acl)
        if s.stale.candidates:
            slot.stale["candidates"].inc(s.stale.candidates)
        if s.stale.context:
            slot.stale["context"].inc(s.stale.context)
        for finding in s.retrievals:
            low, empty, top = self._retriever(s.tenant, s.index, finding.retriever)
            if finding.low:
                low.inc()
            if finding.empty:
                empty.inc()
                if finding.keyword:
                    slot.empty_keyword.inc()
            if finding.top_score is not None:
                top.observe(finding.top_score)
        if s.duplicate_passages:
            slot.duplicates["passage"].inc(s.duplicate_passages)
        if s.duplicate_doc_versions:
            slot.duplicates["doc_version"].inc(s.duplicate_doc_versions)
        if s.mixed_embeddings:
            slot.mixed.inc()
        if s.unsupported_citations:
            slot.unsupported.inc(s.unsupported_citations)
        if s.rephrase_of is not None:
            self._slot(s.rephrase_of.tenant, s.rephrase_of.index).rephrases.inc()
        if s.latency is not None:
            for stage in LATENCY_STAGES:
                value = getattr(s.latency, stage)
                if value is not None:
                    slot.latency[stage].observe(value / 1000.0)
        if s.usage is not None:
            if s.usage.input_tokens:
                slot.tokens["input"].inc(s.usage.input_tokens)
            if s.usage.output_tokens:
                slot.tokens["output"].inc(s.usage.output_tokens)
            if s.usage.cost_usd:
                slot.cost.inc(s.usage.cost_usd)


_PULLED = frozenset({
    "ragmon_events_total", "ragmon_rejected_events_total", "ragmon_last_event_timestamp_seconds",
    "ragmon_sink_errors_total", "ragmon_index_stale_documents", "ragmon_index_max_staleness_seconds",
    "ragmon_index_embedding_models", "ragmon_build_info", "ragmon_sample_queue",
})


def _family(name: str):
    spec = BY_NAME[name]
    base = spec.name.removesuffix("_total") if spec.kind == "counter" else spec.name
    cls = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
    return cls(base, spec.help, labels=spec.labels)


class _ScrapeTimeCollector(Collector):
    """Values computed when Prometheus scrapes: pipeline counters and catalog health."""

    def __init__(self, stats: PipelineStats, catalog: Catalog, index_cap: LabelCap,
                 clock: Callable[[], float]) -> None:
        self._stats = stats
        self._catalog = catalog
        self._index = index_cap
        self._clock = clock
        try:
            self._version = version("ragmon")
        except PackageNotFoundError:
            self._version = "unknown"

    def collect(self):
        accepted, rejected, last_times, sink_errors = self._stats.full_snapshot()
        events = _family("ragmon_events_total")
        for (source, event_type), n in sorted(accepted.items()):
            events.add_metric([source, event_type], n)
        rejections = _family("ragmon_rejected_events_total")
        for (source, reason), n in sorted(rejected.items()):
            rejections.add_metric([source, reason], n)
        last = _family("ragmon_last_event_timestamp_seconds")
        for (source, event_type), when in sorted(last_times.items()):
            last.add_metric([source, event_type], when)
        errors = _family("ragmon_sink_errors_total")
        for sink, n in sorted(sink_errors.items()):
            errors.add_metric([sink], n)
        yield from (events, rejections, last, errors)
        yield from self._index_health()
        info = _family("ragmon_build_info")
        info.add_metric([self._version], 1)
        yield info

    def _index_health(self):
        merged: dict[str, list[float]] = {}
        for index, health in self._catalog.health(self._clock()).items():
            stale, worst, models = merged.setdefault(self._index(index), [0, 0.0, 0])
            merged[self._index(index)] = [stale + health.stale_documents,
                                          max(worst, health.max_staleness_seconds),
                                          max(models, health.embedding_models)]
        families = [_family(name) for name in ("ragmon_index_stale_documents",
                                               "ragmon_index_max_staleness_seconds",
                                               "ragmon_index_embedding_models")]
        for index, values in sorted(merged.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([index], value)
        return families

    def describe(self):
        return []  # values exist only at scrape time; registering must not call collect()


def metric_sum(registry: CollectorRegistry, name: str, **match: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``match`` (for views and tests)."""
    total = 0.0
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in match.items()):
                total += sample.value
    return total


class SampleQueueCollector(Collector):
    """``ragmon_sample_queue{status}`` at scrape time, from the store, at most every ``ttl`` seconds."""

    def __init__(self, counts: Callable[[], dict[str, int]], statuses: Iterable[str], ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._counts = counts
        self._statuses = tuple(statuses)
        self._ttl = ttl
        self._clock = clock
        self._cached: tuple[float, dict[str, int]] | None = None

    def collect(self):
        now = self._clock()
        if self._cached is None or now - self._cached[0] >= self._ttl:
            try:
                self._cached = (now, self._counts())
            except Exception:  # the store is down: keep the last figures rather than fail the scrape
                if self._cached is None:
                    return
        family = _family("ragmon_sample_queue")
        for status in self._statuses:
            family.add_metric([status], self._cached[1].get(status, 0))
        yield family

    def describe(self):
        return []
