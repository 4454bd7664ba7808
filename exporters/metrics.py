"""The metric definitions of docs/metrics.md: one list, used to build the metrics and to document them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LAG_BUCKETS = (60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str  # full exposition name (counters end in _total)
    kind: Literal["counter", "gauge", "histogram"]
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()


TI = ("tenant", "index")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ragmon_events_total", "counter", ("source", "type"), "Events accepted, by source and event type."),
    MetricSpec("ragmon_rejected_events_total", "counter", ("source", "reason"),
               "Records rejected and dead-lettered, by source and reason."),
    MetricSpec("ragmon_traces_without_caller_total", "counter", ("tenant",),
               "Traces with neither a caller id nor groups: their permission checks saw only the tenant."),
    MetricSpec("ragmon_derived_passage_ids_total", "counter", ("how",),
               "OTLP passages that carried no id, named from their metadata (how=metadata) or their content "
               "(how=content_hash)."),
    MetricSpec("ragmon_unmapped_passages_total", "counter", (),
               "OTLP passages with nothing to name them (no id, no metadata key, no content): left out of their list."),
    MetricSpec("ragmon_otlp_traces_read_total", "counter", ("scope",),
               "OTLP traces mapped to a trace event, by instrumentation scope (`scope`: the scope most of the "
               "trace's spans came from, as shown ids; capped by `labels.max_scopes`, then `other`)."),
    MetricSpec("ragmon_otlp_traces_without_retrieval_total", "counter", ("scope",),
               "OTLP traces with no retrieval ragmon could read in them (an ingestion run, a bare model call, an "
               "instrumentation ragmon does not read), by instrumentation scope: not processed further; each is "
               "explained by `ragmon otlp unread` (docs/events.md). Before the `scope` label this was one series: "
               "`sum()` it for the former value."),
    MetricSpec("ragmon_otlp_traces_incomplete_total", "counter", ("scope", "missing"),
               "OTLP traces read (in `ragmon_otlp_traces_read_total`) without a caller (`missing=caller`) or "
               "without a context (`missing=context`: no passage reached the model), by instrumentation scope; a "
               "trace lacking both counts once for each. Listed by `ragmon otlp unread`."),
    MetricSpec("ragmon_otlp_unread_digests_total", "counter", ("outcome",),
               "Digests of OTLP traces not read, or read without a caller or a context: stored, repeated (shaped "
               "like one stored in the last hour: only counted), rate_limited (`otlp.unread_digests_per_minute`), "
               "failed (the database refused them: lost)."),
    MetricSpec("ragmon_malformed_span_attributes_total", "counter", ("attribute",),
               "OTLP span attributes that ragmon reads holding a value it cannot use (each named in the answer's "
               "partial_success); the span is kept without it."),
    MetricSpec("ragmon_answers_total", "counter", (*TI, "outcome"),
               "Traces by answer outcome: answered, abstained, empty_context, unknown."),
    MetricSpec("ragmon_permission_violations_total", "counter", (*TI, "stage"),
               "Passages the caller may not read, distinct per trace, at stage candidates or context."),
    MetricSpec("ragmon_unknown_acl_passages_total", "counter", TI,
               "Passages with no known ACL (neither in the catalog nor on the passage), distinct per trace."),
    MetricSpec("ragmon_stale_passages_served_total", "counter", (*TI, "stage"),
               "Passages from an outdated document version, distinct per trace, by stage."),
    MetricSpec("ragmon_passages_judged_total", "counter", (*TI, "stage", "check"),
               "Served passages a check could judge, distinct per trace and stage: check=access (an ACL or a "
               "tenant known for it, in the catalog or on the passage), check=freshness (the catalog knows its "
               "document and served version, or the passage carries indexed_at and source_modified_at)."),
    MetricSpec("ragmon_passages_unjudged_total", "counter", (*TI, "stage", "check", "reason"),
               "Served passages a check could not judge, distinct per trace and stage, by reason: "
               "unknown_document (the catalog does not know its document), no_acl (access: no ACL in the catalog "
               "nor on the passage), no_version (freshness: the served version is known neither from the "
               "passage nor from its index). A zero of the check's signal says nothing of them."),
    MetricSpec("ragmon_passages_found_late_total", "counter", (*TI, "stage", "signal"),
               "Passages of traces judged earlier that a catalog change showed to be leaks "
               "(signal=permission_violation) or stale (signal=stale_passage), distinct per trace and stage; "
               "also counted in ragmon_permission_violations_total and ragmon_stale_passages_served_total."),
    MetricSpec("ragmon_suspicious_catalog_events_total", "counter", ("reason",),
               "Document events accepted but suspicious, by reason: no_tenant (tenant default while the traffic "
               "has several tenants, none default; also the documents held when a second tenant first shows), "
               "bare_principal (an ACL principal without a kind: prefix, which matches no caller), unseen_document "
               "(no served passage named it within catalog.unseen_after_seconds while passages of documents the "
               "catalog does not know were served). Each replica reading the catalog counts them: take the max."),
    MetricSpec("ragmon_passage_coverage_ratio", "gauge", ("index", "check"),
               "Share of the distinct passages served from the index over the last "
               "`signals.coverage_window_seconds` that the check judged; no series without traffic in the window."),
    MetricSpec("ragmon_low_score_retrievals_total", "counter", (*TI, "retriever"),
               "Retrieval lists whose top score is below the threshold or trailing percentile."),
    MetricSpec("ragmon_empty_retrievals_total", "counter", (*TI, "retriever"), "Retrieval lists that came back empty."),
    MetricSpec("ragmon_empty_keyword_retrievals_total", "counter", TI,
               "Lists of keyword retrievers (`signals.keyword_retrievers`) that came back empty: the usual sign of "
               "a tokenizer or keyword-index problem."),
    MetricSpec("ragmon_retrieval_top_score", "histogram", (*TI, "retriever"),
               "Top score of each non-empty retrieval list.", SCORE_BUCKETS),
    MetricSpec("ragmon_duplicate_slots_total", "counter", (*TI, "kind"),
               "Context slots repeating a passage (kind=passage) or another version of a present document "
               "(kind=doc_version)."),
    MetricSpec("ragmon_mixed_embedding_results_total", "counter", TI,
               "Traces whose context mixes passages embedded by different models."),
    MetricSpec("ragmon_unsupported_citations_total", "counter", TI, "Citations not among the context passages."),
    MetricSpec("ragmon_rephrases_total", "counter", TI,
               "Questions asked again by the same caller within the rephrase window (counted for the earlier trace)."),
    MetricSpec("ragmon_follow_up_turns_total", "counter", (*TI, "outcome"),
               "Follow-up turns of conversations (a turn after one ragmon saw, or numbered above 1), by what their "
               "searched queries kept of the conversation: kept (each shares a content term with the message or "
               "the earlier turns), lost (one shares none: an entity dropped by the rewrite), history_unseen (not "
               "judged: the turn just before it was never seen, or forgotten), no_retrieval. Lost share: "
               "lost / (kept + lost)."),
    MetricSpec("ragmon_rewritten_queries_total", "counter", (*TI, "outcome"),
               "Retrievals that searched a rewrite of the user's message (their own query), by outcome: empty (it "
               "holds no word), history (the earlier turns word for word: the condense step returned its history), "
               "other."),
    MetricSpec("ragmon_feedback_total", "counter", (*TI, "kind", "value"),
               "Feedback events by kind and value; tenant and index come from the joined trace, or are unknown."),
    MetricSpec("ragmon_stage_latency_seconds", "histogram", (*TI, "stage"),
               "Latency per stage (retrieve, rerank, generate, total).", LATENCY_BUCKETS),
    MetricSpec("ragmon_tokens_total", "counter", (*TI, "direction"), "Model tokens, by direction (input, output)."),
    MetricSpec("ragmon_cost_usd_total", "counter", TI, "Model cost in US dollars, as reported by the application."),
    MetricSpec("ragmon_index_stale_documents", "gauge", ("index",),
               "Documents whose newest source version (or deletion) the index has not taken in."),
    MetricSpec("ragmon_index_max_staleness_seconds", "gauge", ("index",),
               "Age of the oldest source change not yet in the index."),
    MetricSpec("ragmon_index_lag_seconds", "histogram", ("index",),
               "Source change to indexed, observed once per version an index takes in (an index event sent again "
               "is no new lag).", LAG_BUCKETS),
    MetricSpec("ragmon_index_embedding_models", "gauge", ("index",),
               "Embedding models among the documents an index holds."),
    MetricSpec("ragmon_index_entries", "gauge", TI,
               "Live index entries (documents an index serves) per tenant of their document (tenant=unknown: the "
               "catalog knows no document for them), as of the last reconciliation (at most 30 s old)."),
    MetricSpec("ragmon_index_drift_documents", "gauge", (*TI, "kind"),
               "Documents an index serves that differ from the source, without any traffic (docs/catalog.md, "
               "\"Reconciliation\"), by kind: stale (the source holds a newer version), deleted (deleted at the "
               "source), acl_narrower (a revocation pending: the index still lets read someone the source no "
               "longer allows), acl_wider (the source allows someone the index does not yet let read). A document "
               "may count under several kinds."),
    MetricSpec("ragmon_index_drift_oldest_seconds", "gauge", (*TI, "kind"),
               "Age of the oldest document of each drift kind (0 when there is none): stale from its oldest change "
               "not taken in, deleted from the deletion, an ACL drift from the later of the source's last change "
               "and the indexing."),
    MetricSpec("ragmon_index_drift_unjudged_documents", "gauge", (*TI, "reason"),
               "Live index entries reconciliation could not judge, by reason: unknown_document (no document event "
               "for it: nothing judged), source_acl_unknown, index_acl_unknown (no ACL on that side: the ACL "
               "kinds not judged). A zero drift says nothing of them."),
    MetricSpec("ragmon_samples_total", "counter", ("tenant", "stratum"),
               "Places taken in the labeling queue, per stratum (a trace sampled for two strata takes two)."),
    MetricSpec("ragmon_samples_dropped_total", "counter", ("reason",),
               "Places refused (weekly_cap, weekly_total_cap, near_duplicate, old_week, trace_evicted) or given "
               "up to a lower-ranked trace (displaced), by reason. Places held = samples_total - displaced."),
    MetricSpec("ragmon_sample_queue", "gauge", ("status",), "Samples in the store, by status."),
    MetricSpec("ragmon_findings_total", "counter", ("signal", "outcome"),
               "Findings (a rule that fired on a trace, in words) stored, or dropped by the per-signal rate limit "
               "(outcome rate_limited), by signal."),
    MetricSpec("ragmon_probe_failures_total", "counter", ("probe",),
               "Canary permission probe failures: a leak, a miss, or an error reaching the retrieval."),
    MetricSpec("ragmon_probe_leaks_total", "counter", ("probe",),
               "Canary probe runs that retrieved a document their test identity must not see."),
    # not `job`: Prometheus gives every target a `job` label and would rename this one exported_job
    MetricSpec("ragmon_job_runs_total", "counter", ("scheduled_job", "outcome"),
               "Scheduled job runs, by outcome (ok, failed)."),
    MetricSpec("ragmon_job_last_success_timestamp_seconds", "gauge", ("scheduled_job",),
               "When each scheduled job last finished without error."),
    MetricSpec("ragmon_retention_deleted_total", "counter", ("kind",),
               "Records deleted by retention: unlabeled samples, dead letters, findings, conversation_turns (kept "
               "for samples' histories), unread_traces (digests of OTLP traces ragmon could not read)."),
    MetricSpec("ragmon_scheduler_leader", "gauge", (),
               "1 while this process holds the scheduler lock and runs the jobs."),
    MetricSpec("ragmon_catalog_source_syncs_total", "counter", ("source", "outcome"),
               "Syncs of each catalog source (catalog.sources, by its name), by outcome: ok, failed (the source "
               "could not be read whole, or its events not applied: nothing changed), held (it would have deleted "
               "more than max_deletion_share: nothing changed)."),
    MetricSpec("ragmon_catalog_source_changes_total", "counter", ("source", "kind"),
               "Catalog events a source's syncs applied, by kind: document, tombstone (a document gone from the "
               "source), index, removal (an index entry gone)."),
    MetricSpec("ragmon_catalog_source_refused_total", "counter", ("source", "reason"),
               "Items a source's syncs left out, by reason: too_large, too_many, symlink, not_regular, unreadable, "
               "bad_front_matter, bad_record, duplicate, or the catalog's own reason for an event it rejected "
               "(too_long, catalog_full, …). A document left out keeps its last state."),
    MetricSpec("ragmon_catalog_source_items", "gauge", ("source",),
               "Documents and index entries in a source's last complete snapshot (tombstones and removals not "
               "counted)."),
    MetricSpec("ragmon_catalog_source_last_success_timestamp_seconds", "gauge", ("source",),
               "When a source was last synced whole (outcome ok)."),
    MetricSpec("ragmon_served_documents_dropped_total", "counter", (),
               "Served (index, tenant, document, version) keys left out of the digest `ragmon catalog check` reads: "
               "beyond the keys gathered between two writes, or an id longer than its column."),
    MetricSpec("ragmon_alert_notifications_total", "counter", ("notifier", "outcome"),
               "Pushed alerts sent (outcome sent) or not taken and kept for a retry (failed), per notifier."),
    MetricSpec("ragmon_last_event_timestamp_seconds", "gauge", ("source", "type"),
               "When the last event of each source and type was accepted."),
    MetricSpec("ragmon_consumer_lag_messages", "gauge", ("topic",),
               "Kafka messages not yet committed in the partitions this replica holds, per topic."),
    MetricSpec("ragmon_consumer_group_lag_messages", "gauge", ("topic",),
               "Kafka messages the whole consumer group has not committed yet (end offset minus committed offset "
               "over every partition of the topic, held or not), as this replica reads it: partitions a dead "
               "replica held count too. Take the max over replicas."),
    MetricSpec("ragmon_kafka_assigned_partitions", "gauge", ("topic",),
               "Partitions of the topic this replica holds in the consumer group."),
    MetricSpec("ragmon_kafka_warmup_records_total", "counter", ("topic",),
               "Records replayed into state only (kafka.warmup_records) after an assignment: what another replica "
               "processed on a partition this one took over."),
    MetricSpec("ragmon_kafka_rebalances_total", "counter", (),
               "Partition assignments this replica received (each group rebalance that reached it)."),
    MetricSpec("ragmon_duplicate_events_total", "counter", ("source",),
               "Traces delivered again within dedupe.window (a client's retry, a redelivery): acknowledged, "
               "not counted again in any signal, metric or sample."),
    MetricSpec("ragmon_dead_letters_dropped_total", "counter", (),
               "Dead letters deleted with the oldest rotated dead-letter file (dead_letter.keep_files)."),
    MetricSpec("ragmon_sink_errors_total", "counter", ("sink",),
               "Observations a sink failed on (a bug: the other sinks still got them)."),
    MetricSpec("ragmon_build_info", "gauge", ("version",), "Always 1; the running ragmon version."),
    MetricSpec("ragmon_redacted_label_values_total", "counter", ("label",),
               "Distinct tenant, index, retriever or scope names exported as their shown ids (redacted text and a "
               "keyed hash, docs/sampling.md): a redaction detector fired on them."),
    MetricSpec("ragmon_http_unauthenticated", "gauge", (),
               "1 when the HTTP port serves a non-loopback address without a token (http.allow_unauthenticated)."),
    MetricSpec("ragmon_http_request_duration_seconds", "histogram", ("route", "status"),
               "HTTP requests answered, by route (the route's path, such as `/v1/events`, or its template, "
               "`/api/v1/traces/{trace_id}`; any other path is `other`) and status code, and the time from "
               "each one's arrival to the end of its answer. "
               "`_count` counts the requests.", HTTP_BUCKETS),
    MetricSpec("ragmon_telemetry_spans_total", "counter", ("outcome",),
               "ragmon's own spans (telemetry.otlp_endpoint), by outcome: exported, failed (the collector refused "
               "them or did not answer in time), dropped (telemetry.max_queue_spans were already waiting)."),
)

BY_NAME = {spec.name: spec for spec in METRICS}

# computed when Prometheus scrapes (ragmon.exporters.prometheus), never pushed into
PULLED = frozenset({
    "ragmon_events_total", "ragmon_rejected_events_total", "ragmon_last_event_timestamp_seconds",
    "ragmon_sink_errors_total", "ragmon_duplicate_events_total", "ragmon_index_stale_documents",
    "ragmon_index_max_staleness_seconds", "ragmon_index_embedding_models", "ragmon_build_info", "ragmon_sample_queue",
    "ragmon_passage_coverage_ratio", "ragmon_index_entries", "ragmon_index_drift_documents",
    "ragmon_index_drift_oldest_seconds", "ragmon_index_drift_unjudged_documents",
})


def reference_markdown() -> str:
    """docs/metrics.md, generated from :data:`METRICS` (a test keeps the committed file equal)."""
    lines = [
        "# Metrics reference",
        "",
        "Generated from `exporters/metrics.py` by `python -m ragmon.exporters.metrics > docs/metrics.md`.",
        "All metrics are served at `GET /metrics`. Label values come from closed sets: `tenant` and",
        "`index` are capped (the `labels` config: an allowlist, else the first 50 seen, then `other`),",
        "`retriever` at 10, an OTLP instrumentation `scope` at 20; `stage`, `outcome`, `kind`, `value`,",
        "`direction`, `reason`, `source`, `type`, `missing`, `check`, `signal` are enums. No user, trace,",
        "passage or document id and no text is ever a label value; a tenant, index, retriever or scope name",
        "a redaction detector fires on is exported as its shown id, as the findings, samples and alerts show it",
        "(docs/sampling.md, \"Shown ids\"); a scope name is also made visible (a control character as its",
        "escape) and cut to 128 characters (docs/events.md, \"Traces ragmon cannot read\").",
        "`route` is one of the paths ragmon serves (a route with a trace id by its template), or `other`: a",
        "request for any other path adds no series.",
        "",
        "Besides these, `/metrics` carries prometheus_client's standard process and runtime metrics:",
        "`process_*` (CPU seconds, resident and virtual memory, open file descriptors, start time),",
        "`python_info` and `python_gc_*`.",
        "",
        "Exemplars: scraped as OpenMetrics (`Accept: application/openmetrics-text`, what Prometheus asks",
        "for first; store them with `--enable-feature=exemplar-storage`), `ragmon_permission_violations_total`,",
        "`ragmon_stale_passages_served_total`, `ragmon_unsupported_citations_total` and",
        "`ragmon_stage_latency_seconds` carry the shown id of the latest trace behind each series as an",
        "exemplar, `{trace_id=\"…\"}` (ids over 100 characters are left out), the id its findings and sample",
        "are stored by, so a Grafana panel links a spike to `ragmon trace show` /",
        "`GET /api/v1/traces/{trace_id}`. The classic text format has none.",
        "",
        "| metric | type | labels | meaning |",
        "|---|---|---|---|",
    ]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels)
        lines.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.help} |")
    lines += ["", "## Histogram buckets", ""]
    for spec in METRICS:
        if spec.buckets:
            buckets = ", ".join(f"{b:g}" for b in spec.buckets)
            lines.append(f"- `{spec.name}`: {buckets}")
    from ragmon.exporters.dashboard import reference_markdown as dashboards  # the server extra's SDK

    lines += ["", *dashboards()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")

