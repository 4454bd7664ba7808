"""The instruments: every metric of docs/metrics.md that ragmon pushes values into, made once on a
registry, with the caps on free-form label values. The metrics sink (``ragmon.exporters.prometheus``)
counts signals into them; the jobs, the probes, the Kafka source, the alert dispatcher and the OTLP
receiver each get this object and feed the ones that are theirs.

Label values come from closed sets only. Tenant and index are capped (an allowlist, else the first
N seen, then ``other``), retriever likewise; stage, outcome, kind, value, reason are enums.
Nothing else — no user, trace, passage or document id, no text — ever becomes a label.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ragmon.exporters.metrics import BY_NAME, PULLED, MetricSpec
from ragmon.monitor.config.settings import LabelsConfig
from ragmon.monitor.labeling.redact import SHOWN_SEPARATOR

OTHER = "other"
MAX_HIDDEN = 10_000  # private names remembered per label


class LabelCap:
    """Maps a free-form name to its label value while there is room, else to ``other``.

    A name is exported as its shown id (``shown``: ``Redactor.shown_id``), the id the findings, the
    stored samples and pushed alerts show: itself when no detector fires on it, else its redacted
    text and a keyed hash (an e-mail used as a tenant name becomes ``[EMAIL]~k…``). Such a private
    name takes a place under the cap like any other, and is reported to ``on_redacted`` when it
    takes it.
    Allowlisted names are taken as they are. Without ``shown`` every name is taken as it is."""

    def __init__(self, allow: Iterable[str], limit: int, shown: Callable[[str], str] | None = None,
                 on_redacted: Callable[[], None] | None = None) -> None:
        self._allow = frozenset(allow)
        self._limit = limit
        self._shown = shown
        self._on_redacted = on_redacted or (lambda: None)
        self._seen: set[str] = set(self._allow)  # label values given out
        self._private: dict[str, str] = {}  # private name -> its label value, so the detectors run once per name
        self._dynamic = 0
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        """The label value of a name as a sender wrote it."""
        if value in self._seen:
            return value
        label = self._private.get(value)
        if label is not None:
            return label
        with self._lock:
            if value in self._seen:
                return value
            if self._dynamic >= self._limit:  # full: no need to look at the name
                return OTHER
            shown = value if self._shown is None else self._shown(value)
            if shown == value:
                return self._take(value)
            label = self._take(shown, private=True)
            if len(self._private) < MAX_HIDDEN:
                self._private[value] = label
            return label

    def of_shown(self, shown: str) -> str:
        """The label value of a name already shown (a tenant as a stored sample holds it): the
        same as the name itself gets, without showing it twice."""
        if shown in self._seen:
            return shown
        with self._lock:
            return self._take(shown, private=self._shown is not None and SHOWN_SEPARATOR in shown)

    def _take(self, label: str, private: bool = False) -> str:
        """``label`` while there is room (under the lock)."""
        if label in self._seen:
            return label
        if self._dynamic >= self._limit:
            return OTHER
        self._dynamic += 1
        self._seen.add(label)
        if private:  # once per name: its label is seen from now on
            self._on_redacted()
        return label


class RequestDurations:
    """Observes ``ragmon_http_request_duration_seconds`` for the HTTP port's hot path, keeping the
    histogram's child per (route, status): ``labels()`` builds its key under a lock on every call,
    which made an observation cost twice as much (``python -m bench.http_metrics``)."""

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram
        self._children: dict[tuple[str, int], Histogram] = {}

    def observe(self, route: str, status: int, seconds: float) -> None:
        child = self._children.get((route, status))
        if child is None:  # two threads may both get here: labels() hands both the same child
            child = self._children[(route, status)] = self._histogram.labels(route, str(status))
        child.observe(seconds)


def _make(spec: MetricSpec, registry: CollectorRegistry):
    if spec.kind == "counter":
        return Counter(spec.name, spec.help, spec.labels, registry=registry)
    if spec.kind == "gauge":
        return Gauge(spec.name, spec.help, spec.labels, registry=registry)
    return Histogram(spec.name, spec.help, spec.labels, buckets=spec.buckets, registry=registry)


class Metrics:
    """Every pushed instrument, by a short name."""

    def __init__(self, registry: CollectorRegistry, labels: LabelsConfig,
                 shown: Callable[[str], str] | None = None) -> None:
        """``shown``: how every surface shows an id a sender chose (``Redactor.shown_id``), for
        tenant, index and retriever labels (see :class:`LabelCap`) and the trace ids of exemplars;
        without it, names and ids are taken as they are."""
        self.registry = registry
        self.shown: Callable[[str], str] = shown or (lambda value: value)
        made = {spec.name: _make(spec, registry) for spec in BY_NAME.values() if spec.name not in PULLED}
        redacted = made["ragmon_redacted_label_values_total"]
        self.tenant = LabelCap(labels.tenants, labels.max_tenants, shown, redacted.labels("tenant").inc)
        self.index = LabelCap(labels.indexes, labels.max_indexes, shown, redacted.labels("index").inc)
        self.retriever = LabelCap((), labels.max_retrievers, shown, redacted.labels("retriever").inc)
        # scope names come shown already (collectors/unread/names.py): of_shown counts the redacted ones
        self.scope = LabelCap(labels.scopes, labels.max_scopes, shown, redacted.labels("scope").inc)
        self.answers = made["ragmon_answers_total"]
        self.violations = made["ragmon_permission_violations_total"]
        self.unknown_acl = made["ragmon_unknown_acl_passages_total"]
        self.stale = made["ragmon_stale_passages_served_total"]
        self.judged = made["ragmon_passages_judged_total"]
        self.unjudged = made["ragmon_passages_unjudged_total"]
        self.found_late = made["ragmon_passages_found_late_total"]
        self.suspicious = made["ragmon_suspicious_catalog_events_total"]
        self.low_score = made["ragmon_low_score_retrievals_total"]
        self.empty = made["ragmon_empty_retrievals_total"]
        self.empty_keyword = made["ragmon_empty_keyword_retrievals_total"]
        self.without_caller = made["ragmon_traces_without_caller_total"]
        self.top_score = made["ragmon_retrieval_top_score"]
        self.duplicates = made["ragmon_duplicate_slots_total"]
        self.mixed = made["ragmon_mixed_embedding_results_total"]
        self.unsupported = made["ragmon_unsupported_citations_total"]
        self.rephrases = made["ragmon_rephrases_total"]
        self.follow_ups = made["ragmon_follow_up_turns_total"]
        self.rewritten = made["ragmon_rewritten_queries_total"]
        self.feedback = made["ragmon_feedback_total"]
        self.latency = made["ragmon_stage_latency_seconds"]
        self.tokens = made["ragmon_tokens_total"]
        self.cost = made["ragmon_cost_usd_total"]
        self.index_lag = made["ragmon_index_lag_seconds"]
        # fed by the sampling decisions, the probes, the jobs, the Kafka source and the alert dispatcher
        self.samples = made["ragmon_samples_total"]
        self.samples_dropped = made["ragmon_samples_dropped_total"]
        self.findings = made["ragmon_findings_total"]
        self.probe_failures = made["ragmon_probe_failures_total"]
        self.consumer_lag = made["ragmon_consumer_lag_messages"]
        self.consumer_group_lag = made["ragmon_consumer_group_lag_messages"]
        self.assigned_partitions = made["ragmon_kafka_assigned_partitions"]
        self.rebalances = made["ragmon_kafka_rebalances_total"]
        self.warmup_records = made["ragmon_kafka_warmup_records_total"]
        self.alert_notifications = made["ragmon_alert_notifications_total"]
        self.probe_leaks = made["ragmon_probe_leaks_total"]
        self.source_syncs = made["ragmon_catalog_source_syncs_total"]
        self.source_changes = made["ragmon_catalog_source_changes_total"]
        self.source_refused = made["ragmon_catalog_source_refused_total"]
        self.source_items = made["ragmon_catalog_source_items"]
        self.source_last_success = made["ragmon_catalog_source_last_success_timestamp_seconds"]
        self.served_dropped = made["ragmon_served_documents_dropped_total"]
        self.job_runs = made["ragmon_job_runs_total"]
        self.job_last_success = made["ragmon_job_last_success_timestamp_seconds"]
        self.retention_deleted = made["ragmon_retention_deleted_total"]
        self.scheduler_leader = made["ragmon_scheduler_leader"]
        self.http_unauthenticated = made["ragmon_http_unauthenticated"]
        self.dead_letters_dropped = made["ragmon_dead_letters_dropped_total"]
        # fed by the HTTP port (collectors/http_metrics.py) and by ragmon's own tracing (monitor/app/telemetry.py)
        self.http_requests = RequestDurations(made["ragmon_http_request_duration_seconds"])
        self.telemetry_spans = made["ragmon_telemetry_spans_total"]
        # fed by the OTLP receiver (the MappingReport of ragmon.collectors.otlp)
        self.derived_ids = made["ragmon_derived_passage_ids_total"]
        self.unmapped = made["ragmon_unmapped_passages_total"]
        self.malformed = made["ragmon_malformed_span_attributes_total"]
        # fed by the OTLP receiver's watch (the TraceReport of ragmon.collectors.unread.watch)
        self.traces_read = made["ragmon_otlp_traces_read_total"]
        self.without_retrieval = made["ragmon_otlp_traces_without_retrieval_total"]
        self.incomplete = made["ragmon_otlp_traces_incomplete_total"]
        self.unread_digests_total = made["ragmon_otlp_unread_digests_total"]
        self._per_scope: dict[tuple[str, ...], Counter] = {}  # the children, as RequestDurations keeps them

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

    def otlp_trace(self, scope: str, read: bool, missing: Iterable[str]) -> None:
        """One assembled OTLP trace of ``scope`` (a shown name): read into a trace event or not,
        and what a read one lacked (``caller``, ``context``)."""
        label = self.scope.of_shown(scope)
        self._scoped("read" if read else "without_retrieval", label).inc()
        if read:
            for what in missing:
                self._scoped("incomplete", label, what).inc()

    def unread_digests(self, outcome: str, n: int) -> None:
        """Digests of unread or incomplete OTLP traces: stored, repeated, rate_limited, failed."""
        self.unread_digests_total.labels(outcome).inc(n)

    def _scoped(self, which: str, scope: str, *missing: str) -> Counter:
        """The child of counter ``which`` for ``scope`` (and ``missing``), kept: labels() builds
        its key under a lock on every call."""
        key = (which, scope, *missing)
        child = self._per_scope.get(key)
        if child is None:  # two threads may both get here: labels() hands both the same child
            counter = {"read": self.traces_read, "without_retrieval": self.without_retrieval,
                       "incomplete": self.incomplete}[which]
            child = self._per_scope[key] = counter.labels(scope, *missing)
        return child
