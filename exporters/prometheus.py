"""Prometheus metrics, besides the instruments (``ragmon.exporters.instruments``): the sink that
counts what the signals found and what was sampled, and the collectors that read pipeline counters,
catalog health, the sample queue and the process at scrape time (:func:`register_scrape_time`)."""

from __future__ import annotations

import functools
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ragmon.exporters.coverage import CoverageCollector, CoverageWindow
from ragmon.exporters.instruments import LabelCap, Metrics
from ragmon.exporters.metrics import BY_NAME
from ragmon.exporters.reconciliation import ReconciliationCollector
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.pipeline import Observation, PipelineStats
from ragmon.monitor.core.reconcile import Reconciler
from ragmon.monitor.core.signals import FeedbackSignals, IndexSignals, Outcome, TraceSignals
from ragmon.monitor.core.signals.results import REASONS, STAGES, CatalogSignals, Check, Coverage, LateSignals
from ragmon.monitor.core.signals.rewrite import FollowUp, Rewritten
from ragmon.monitor.labeling.sample_store import Admission

UNKNOWN = "unknown"
LATENCY_STAGES = ("retrieve", "rerank", "generate", "total")


class _Slot:
    """The children of one (tenant, index) pair, bound once: labels() is too slow per trace."""

    __slots__ = ("tenant", "index", "answers", "violations", "unknown_acl", "stale", "duplicates", "mixed",
                 "unsupported", "rephrases", "latency", "tokens", "cost", "empty_keyword", "judged", "unjudged",
                 "follow_ups", "rewritten")

    def __init__(self, m: Metrics, tenant: str, index: str) -> None:
        self.tenant, self.index = tenant, index  # the labels
        self.answers = {o: m.answers.labels(tenant, index, o.value) for o in Outcome}
        self.violations = {s: m.violations.labels(tenant, index, s) for s in ("candidates", "context")}
        self.unknown_acl = m.unknown_acl.labels(tenant, index)
        self.stale = {s: m.stale.labels(tenant, index, s) for s in ("candidates", "context")}
        self.duplicates = {k: m.duplicates.labels(tenant, index, k) for k in ("passage", "doc_version")}
        self.mixed = m.mixed.labels(tenant, index)
        self.unsupported = m.unsupported.labels(tenant, index)
        self.rephrases = m.rephrases.labels(tenant, index)
        self.follow_ups = {o: m.follow_ups.labels(tenant, index, o.value) for o in FollowUp}
        self.rewritten = {o: m.rewritten.labels(tenant, index, o.value) for o in Rewritten}
        self.latency = {s: m.latency.labels(tenant, index, s) for s in LATENCY_STAGES}
        self.tokens = {d: m.tokens.labels(tenant, index, d) for d in ("input", "output")}
        self.cost = m.cost.labels(tenant, index)
        self.empty_keyword = m.empty_keyword.labels(tenant, index)
        self.judged = {(check, stage): m.judged.labels(tenant, index, stage, check.value)
                       for check in Check for stage in STAGES}
        self.unjudged = {(check, stage, reason): m.unjudged.labels(tenant, index, stage, check.value, reason.value)
                         for check in Check for stage in STAGES for reason in REASONS[check]}


MAX_EXEMPLAR_ID = 100  # OpenMetrics bounds an exemplar's label names and values to 128 characters
Exemplar = dict[str, str] | None


class _Tally:
    """What one batch adds to the instruments, applied in one go when the batch ends.

    prometheus_client takes a lock for every increment and checks an exemplar's labels each time
    one is given: per trace, that cost more than the signals it counts (``python -m bench.replay``).
    Here a counter's increments are summed, and only the exemplar that would be left standing is
    given: a counter's latest (with its own amount), and a histogram's latest in each bucket, since
    a scrape sees one exemplar per counter and per bucket. What a scrape reads after the batch is
    what per-observation updates would have left. The exemplars given are passed through
    ``relabel`` first (the sink shows their trace ids there: only those left standing, a few per
    batch, pay for it)."""

    __slots__ = ("counts", "latest", "observed", "coverage")

    def __init__(self) -> None:
        self.coverage: dict[tuple[str, str], list[int]] = {}  # (index label, check) -> [judged, served]
        self.counts: dict[Any, float] = {}  # counter child -> the batch's increments
        self.latest: dict[Any, tuple[float, dict[str, str]]] = {}  # counter child -> (amount, exemplar), the latest
        self.observed: list[tuple[Any, tuple[float, ...], float, Exemplar]] = []  # (child, its bounds, value, exemplar)

    def add(self, child: Any, amount: float, exemplar: Exemplar = None) -> None:
        self.counts[child] = self.counts.get(child, 0) + amount
        if exemplar is not None:
            self.latest[child] = (amount, exemplar)

    def observe(self, child: Any, bounds: tuple[float, ...], value: float, exemplar: Exemplar = None) -> None:
        self.observed.append((child, bounds, value, exemplar))

    def apply(self, relabel: Callable[[dict[str, str]], dict[str, str]] = lambda labels: labels) -> None:
        for child, amount in self.counts.items():
            latest = self.latest.get(child)
            if latest is None:
                child.inc(amount)
                continue
            if amount > latest[0]:
                child.inc(amount - latest[0])
            child.inc(latest[0], relabel(latest[1]))
        kept: set[tuple[int, int]] = set()  # (child, bucket) whose latest exemplar was met
        chosen = [False] * len(self.observed)
        for i in range(len(self.observed) - 1, -1, -1):  # newest first
            child, bounds, value, exemplar = self.observed[i]
            if exemplar is not None:
                bucket = (id(child), bisect_left(bounds, value))  # the first bucket whose bound is >= value
                if bucket not in kept:
                    kept.add(bucket)
                    chosen[i] = True
        for (child, _, value, exemplar), keep in zip(self.observed, chosen, strict=True):
            child.observe(value, relabel(exemplar) if keep and exemplar is not None else None)


class PrometheusSink:
    """Counts each observation's signals and sampling decisions into the instruments, once per
    batch: ``consume`` tallies, ``flush`` (which the pipeline calls when the batch is durable)
    applies the tally (see :class:`_Tally`)."""

    name = "prometheus"
    durable = False  # counts only what is already stored, so a retried batch is not counted twice

    def __init__(self, metrics: Metrics, coverage: CoverageWindow | None = None) -> None:
        """``coverage``: the trailing window of the coverage gauge, fed with each durable batch."""
        self._coverage = coverage
        self._m = metrics
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._retrievers: dict[tuple[str, str, str], tuple] = {}
        self._lock = threading.Lock()
        self._tally = _Tally()
        self._tally_lock = threading.Lock()  # consume and flush may come from several threads
        self._latency_bounds = _bounds("ragmon_stage_latency_seconds")
        self._score_bounds = _bounds("ragmon_retrieval_top_score")

    def consume(self, observation: Observation) -> None:
        with self._tally_lock:
            self._consume(observation, self._tally)

    def _consume(self, observation: Observation, tally: _Tally) -> None:
        if observation.sampling is not None:  # dropped before the quota; the quota's own: count_admission
            for reason in observation.sampling.dropped:
                tally.add(self._m.samples_dropped.labels(reason), 1)
        signals = observation.signals
        if isinstance(signals, TraceSignals):
            trace_id = getattr(observation.event, "trace_id", "")
            # an exemplar's labels hold at most 128 characters; a longer id is left out, not cut. The
            # shown id given at flush stays within them: an id shown as it is is this id, a private
            # id's shown id is at most 82 characters
            self._trace(signals, {"trace_id": trace_id} if 0 < len(trace_id) <= MAX_EXEMPLAR_ID else None, tally)
        elif isinstance(signals, FeedbackSignals):
            trace = signals.trace
            tenant, index = (self._m.tenant(trace.tenant), self._m.index(trace.index)) if trace else (UNKNOWN, UNKNOWN)
            tally.add(self._m.feedback.labels(tenant, index, signals.kind, signals.value or "none"), 1)
        elif isinstance(signals, CatalogSignals):
            for reason, n in signals.suspicious.items():
                tally.add(self._m.suspicious.labels(reason), n)
        elif isinstance(signals, LateSignals):
            trace_id = getattr(observation.event, "trace_id", "")
            self._late(signals, {"trace_id": trace_id} if 0 < len(trace_id) <= MAX_EXEMPLAR_ID else None, tally)
        elif isinstance(signals, IndexSignals) and signals.lag_seconds is not None:
            self._m.index_lag.labels(self._m.index(signals.index)).observe(signals.lag_seconds)  # rare: at once

    def count_admission(self, admission: Admission) -> None:
        """Count what the weekly quota admitted and refused (or took back) once it is stored. The
        tenant label is the stored tenant, already a shown id."""
        for tenant, stratum in admission.sampled:
            self._m.samples.labels(self._m.tenant.of_shown(tenant), stratum).inc()
        for reason in admission.dropped:
            self._m.samples_dropped.labels(reason).inc()

    def flush(self, timeout: float) -> bool:
        """Apply the batch's tally (metrics live in memory: nothing to make durable)."""
        with self._tally_lock:
            tally, self._tally = self._tally, _Tally()
        # an exemplar names its trace by its shown id, as the findings and samples do; a trace
        # leaves one in several series (each latency stage, its leak): shown once per batch
        shown = functools.lru_cache(maxsize=None)(self._m.shown)
        tally.apply(lambda exemplar: {"trace_id": shown(exemplar["trace_id"])})
        if self._coverage is not None and tally.coverage:
            self._coverage.add((key, judged, served) for key, (judged, served) in tally.coverage.items())
        return True

    def shutdown(self) -> None:
        pass

    def _slot(self, tenant: str, index: str) -> _Slot:
        key = (self._m.tenant(tenant), self._m.index(index))
        slot = self._slots.get(key)
        if slot is None:
            with self._lock:
                slot = self._slots.setdefault(key, _Slot(self._m, *key))
        return slot

    def _retriever(self, tenant: str, index: str, retriever: str) -> tuple:
        key = (self._m.tenant(tenant), self._m.index(index), self._m.retriever(retriever))
        children = self._retrievers.get(key)
        if children is None:
            with self._lock:
                children = self._retrievers.setdefault(
                    key, (self._m.low_score.labels(*key), self._m.empty.labels(*key), self._m.top_score.labels(*key)))
        return children

    def _trace(self, s: TraceSignals, exemplar: Exemplar, tally: _Tally) -> None:
        """Tallies the trace's signals. ``exemplar`` (its trace id, shown when the tally is
        applied) goes with the leak, stale-served and unsupported-citation counters and the latency
        histograms, shown by an OpenMetrics scrape, so that a panel links a spike to a trace
        (``GET /api/v1/traces/{id}``)."""
        add = tally.add
        slot = self._slot(s.tenant, s.index)
        add(slot.answers[s.outcome], 1)
        for reason, n in s.suspicious.items():
            add(self._m.suspicious.labels(reason), n)
        if not s.has_caller:
            add(self._m.without_caller.labels(self._m.tenant(s.tenant)), 1)
        if s.access.candidates:
            add(slot.violations["candidates"], s.access.candidates, exemplar)
        if s.access.context:
            add(slot.violations["context"], s.access.context, exemplar)
        if s.access.unknown_acl:
            add(slot.unknown_acl, s.access.unknown_acl)
        if s.stale.candidates:
            add(slot.stale["candidates"], s.stale.candidates, exemplar)
        if s.stale.context:
            add(slot.stale["context"], s.stale.context, exemplar)
        self._coverage_of(slot, Check.ACCESS, s.access.coverage, tally)
        self._coverage_of(slot, Check.FRESHNESS, s.stale.coverage, tally)
        for finding in s.retrievals:
            low, empty, top = self._retriever(s.tenant, s.index, finding.retriever)
            if finding.low:
                add(low, 1)
            if finding.empty:
                add(empty, 1)
                if finding.keyword:
                    add(slot.empty_keyword, 1)
            if finding.top_score is not None:
                tally.observe(top, self._score_bounds, finding.top_score)
        if s.duplicate_passages:
            add(slot.duplicates["passage"], s.duplicate_passages)
        if s.duplicate_doc_versions:
            add(slot.duplicates["doc_version"], s.duplicate_doc_versions)
        if s.mixed_embeddings:
            add(slot.mixed, 1)
        if s.unsupported_citations:
            add(slot.unsupported, s.unsupported_citations, exemplar)
        if s.rephrase_of is not None:
            add(self._slot(s.rephrase_of.tenant, s.rephrase_of.index).rephrases, 1)
        if s.rewrite is not None:
            if s.rewrite.follow_up is not None:
                add(slot.follow_ups[s.rewrite.follow_up], 1)
            for outcome, n in s.rewrite.rewritten.items():
                add(slot.rewritten[outcome], n)
        if s.latency is not None:
            for stage in LATENCY_STAGES:
                value = getattr(s.latency, stage)
                if value is not None:
                    tally.observe(slot.latency[stage], self._latency_bounds, value / 1000.0, exemplar)
        if s.usage is not None:
            if s.usage.input_tokens:
                add(slot.tokens["input"], s.usage.input_tokens)
            if s.usage.output_tokens:
                add(slot.tokens["output"], s.usage.output_tokens)
            if s.usage.cost_usd:
                add(slot.cost, s.usage.cost_usd)


    def _late(self, s: LateSignals, exemplar: Exemplar, tally: _Tally) -> None:
        """Leaks and stale passages of an earlier trace that a catalog change showed: counted where
        the trace's own are (the leak and staleness alerts see them) and apart, as found late."""
        slot = self._slot(s.tenant, s.index)
        for signal, found, counters in (("permission_violation", s.access, slot.violations),
                                        ("stale_passage", s.stale, slot.stale)):
            for stage in STAGES:
                n = getattr(found, stage)
                if n:
                    tally.add(counters[stage], n, exemplar)
                    tally.add(self._m.found_late.labels(slot.tenant, slot.index, stage, signal), n)

    @staticmethod
    def _coverage_of(slot: _Slot, check: Check, coverage: Coverage, tally: _Tally) -> None:
        """The passages a check judged and could not judge, per stage (and reason), and over the
        trace for the coverage window."""
        for stage, n in coverage.judged.items():
            tally.add(slot.judged[(check, stage)], n)
        for (stage, reason), n in coverage.unjudged.items():
            tally.add(slot.unjudged[(check, stage, reason)], n)
        if coverage.served:
            counted = tally.coverage.get((slot.index, check.value))
            if counted is None:
                counted = tally.coverage[(slot.index, check.value)] = [0, 0]
            counted[0] += coverage.served - coverage.served_unjudged
            counted[1] += coverage.served


def _bounds(name: str) -> tuple[float, ...]:
    """The upper bounds of a histogram's buckets, ``+Inf`` last, as prometheus_client counts them."""
    return (*BY_NAME[name].buckets, float("inf"))


def register_scrape_time(metrics: Metrics, stats: PipelineStats, catalog: Catalog,
                         clock: Callable[[], float] = time.time,
                         sample_queue: Callable[[], dict[str, int]] | None = None,
                         coverage: CoverageWindow | None = None, reconciler: Reconciler | None = None) -> None:
    """Register the values computed when Prometheus scrapes: pipeline counters, catalog health and
    its reconciliation (``reconciler``'s, else one of ``catalog``'s own), the process and its
    runtime and, with ``sample_queue`` (the samples in the store per status),
    ``ragmon_sample_queue``, with ``coverage`` (the window the sink feeds),
    ``ragmon_passage_coverage_ratio``."""
    metrics.registry.register(_ScrapeTimeCollector(stats, catalog, metrics.index, clock))
    reconciler = reconciler if reconciler is not None else Reconciler(catalog, clock)
    metrics.registry.register(ReconciliationCollector(reconciler, metrics.tenant, metrics.index))
    if coverage is not None:
        metrics.registry.register(CoverageCollector(coverage))
    # what prometheus_client puts on its global registry, which ragmon does not use: process_*
    # (CPU, memory, file descriptors, start time), python_info and python_gc_*
    for standard in (ProcessCollector, PlatformCollector, GCCollector):
        standard(registry=metrics.registry)
    if sample_queue is not None:
        from ragmon.monitor.labeling.sample_store import STATUSES

        metrics.registry.register(SampleQueueCollector(sample_queue, STATUSES))


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
        accepted, rejected, last_times, sink_errors, duplicates = self._stats.full_snapshot()
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
        duplicated = _family("ragmon_duplicate_events_total")
        for source, n in sorted(duplicates.items()):
            duplicated.add_metric([source], n)
        yield from (events, rejections, last, errors, duplicated)
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
    return metric_reader(registry)(name, **match)


def metric_reader(registry: CollectorRegistry) -> Callable[..., float]:
    """One collection of ``registry``, read as :func:`metric_sum` reads it: ``read(name, **match)``.
    A view that shows many figures collects once, not once per figure."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in registry.collect():
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))

    def read(name: str, **match: str) -> float:
        return sum((value for labels, value in samples.get(name, ())
                    if all(labels.get(k) == v for k, v in match.items())), 0.0)

    return read


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
