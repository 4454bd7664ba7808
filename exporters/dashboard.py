"""The Grafana dashboards of ragmon (``ragmon dashboard render``), committed under the Helm chart
and shipped as a ConfigMap for Grafana's sidecar: four dashboards of time series, stats and tables
(built by ``ragmon.exporters.grafana`` with Grafana's typed builders).

Every query is filtered by the ``namespace`` and ``job`` variables (which ragmon deployment) and,
where the metric has them, by ``tenant`` and ``index``; it sums or takes the maximum over pods, so
a scaled deployment reads the same as one process. Stat panels colour their value; the thresholds
follow the alert rules' defaults where an alert watches the same thing (docs/metrics.md lists them).
"""

from __future__ import annotations

from typing import Any

from ragmon.exporters.grafana import ANY, DEPLOYMENT, Dashboard, Panel, Thresholds
from ragmon.exporters.grafana import TENANT_INDEX as TI
from ragmon.exporters.grafana import render as render_json
from ragmon.monitor.config.alerting import AlertsConfig

RATE = "$__rate_interval"
D = DEPLOYMENT
INDEX = f'{DEPLOYMENT}, index=~"$index"'
_ALERTS = AlertsConfig()  # the defaults the chart's rules use

ANSWERING = Thresholds("Red when no answer at all reached ragmon over the rate window.", "red", ((ANY, "green"),))
NO_ANSWER = Thresholds(
    f"Orange from {_ALERTS.no_answer_min_ratio:.0%} (alerts.no_answer_min_ratio, under which the no-answer spike "
    "alert stays quiet), red from a quarter of the answers.",
    "green", ((_ALERTS.no_answer_min_ratio, "orange"), (0.25, "red")))
LEAKS = Thresholds("Red at any passage the caller may not read reaching the model (RagmonPermissionLeakContext).",
                   "green", ((ANY, "red"),))
STALENESS = Thresholds(
    f"Orange from {_ALERTS.stale_warning_hours:g} h, red from {_ALERTS.stale_critical_hours:g} h: the index "
    "staleness alert's warning and critical thresholds.",
    "green", ((_ALERTS.stale_warning_hours * 3600, "orange"), (_ALERTS.stale_critical_hours * 3600, "red")))

def _no_answer_ratio() -> str:
    answers = f'sum by (tenant, index) (rate(ragmon_answers_total{{{TI}, outcome!="unknown"}}[{RATE}]))'
    return (f'sum by (tenant, index) (rate(ragmon_answers_total{{{TI}, outcome=~"abstained|empty_context"}}'
            f"[{RATE}])) / {answers}")


def overview() -> Dashboard:
    return Dashboard("ragmon-overview", "ragmon / overview",
                     "Is the RAG system answering, from fresh and permitted passages, and is the monitor seeing it?",
                     by_tenant=False, panels=[
        Panel("Answers per second", [(f"sum(rate(ragmon_answers_total{{{D}}}[{RATE}]))", "answers")], "stat",
              "reqps", width=6, height=5, thresholds=ANSWERING),
        Panel("No-answer share", [
            (f'sum(rate(ragmon_answers_total{{{D}, outcome=~"abstained|empty_context"}}[{RATE}]))'
             f' / sum(rate(ragmon_answers_total{{{D}, outcome!="unknown"}}[{RATE}]))', "no answer")],
              "stat", "percentunit", width=6, height=5, thresholds=NO_ANSWER),
        Panel("Leaks into context (24 h)", [
            (f'sum(increase(ragmon_permission_violations_total{{{D}, stage="context"}}[24h])) or vector(0)', "leaks")],
              "stat", width=6, height=5, thresholds=LEAKS),
        Panel("Stalest index", [(f"max(ragmon_index_max_staleness_seconds{{{D}}})", "staleness")], "stat", "s",
              width=6, height=5, thresholds=STALENESS),
        Panel("Events accepted and rejected", [
            (f"sum by (type) (rate(ragmon_events_total{{{D}}}[{RATE}]))", "{{type}}"),
            (f"sum by (reason) (rate(ragmon_rejected_events_total{{{D}}}[{RATE}]))", "rejected: {{reason}}")],
            unit="reqps"),
        Panel("Answers by outcome", [(f"sum by (outcome) (rate(ragmon_answers_total{{{D}}}[{RATE}]))",
                                      "{{outcome}}")], unit="reqps"),
        Panel("Seconds since the last trace", [
            (f'time() - max(ragmon_last_event_timestamp_seconds{{{D}, type="trace"}})', "since last trace")],
              unit="s", width=8),
        Panel("Kafka consumer lag (whole group)",
              [(f"max by (topic) (ragmon_consumer_group_lag_messages{{{D}}}) or vector(0)", "{{topic}}")],
              width=8),
        Panel("Sink errors and failed alert deliveries", [
            (f"sum(rate(ragmon_sink_errors_total{{{D}}}[{RATE}])) or vector(0)", "sink errors"),
            (f'sum(rate(ragmon_alert_notifications_total{{{D}, outcome="failed"}}[{RATE}])) or vector(0)',
             "failed alert deliveries")], width=8),
    ])


def retrieval_quality() -> Dashboard:
    return Dashboard("ragmon-retrieval", "ragmon / retrieval quality",
                     "Per tenant and index: abstention, weak retrievals, duplicates, rephrases, feedback, latency "
                     "and cost.",
                     panels=[
        Panel("No-answer share", [(_no_answer_ratio(), "{{tenant}}/{{index}}")], unit="percentunit"),
        Panel("Low top-score share of retrievals", [
            (f"sum by (tenant, index, retriever) (rate(ragmon_low_score_retrievals_total{{{TI}}}[{RATE}]))"
             f" / sum by (tenant, index, retriever) (rate(ragmon_retrieval_top_score_count{{{TI}}}[{RATE}]))",
             "{{tenant}}/{{index}} {{retriever}}")], unit="percentunit"),
        Panel("Top score, median and 10th percentile", [
            (f"histogram_quantile(0.5, sum by (le, retriever) (rate(ragmon_retrieval_top_score_bucket{{{TI}}}"
             f"[{RATE}])))", "p50 {{retriever}}"),
            (f"histogram_quantile(0.1, sum by (le, retriever) (rate(ragmon_retrieval_top_score_bucket{{{TI}}}"
             f"[{RATE}])))", "p10 {{retriever}}")]),
        Panel("Empty retrievals", [(f"sum by (retriever) (rate(ragmon_empty_retrievals_total{{{TI}}}[{RATE}]))",
                                    "{{retriever}}"),
                                   (f"sum(rate(ragmon_empty_keyword_retrievals_total{{{TI}}}[{RATE}]))",
                                    "keyword side")], unit="reqps"),
        Panel("Duplicate slots and mixed embeddings", [
            (f"sum by (kind) (rate(ragmon_duplicate_slots_total{{{TI}}}[{RATE}]))", "duplicate {{kind}}"),
            (f"sum(rate(ragmon_mixed_embedding_results_total{{{TI}}}[{RATE}]))", "mixed embeddings")],
              unit="reqps"),
        Panel("Rephrases and unsupported citations", [
            (f"sum(rate(ragmon_rephrases_total{{{TI}}}[{RATE}]))", "rephrases"),
            (f"sum(rate(ragmon_unsupported_citations_total{{{TI}}}[{RATE}]))", "unsupported citations")],
              unit="reqps"),
        Panel("Feedback", [(f"sum by (kind, value) (rate(ragmon_feedback_total{{{TI}}}[{RATE}]))",
                            "{{kind}} {{value}}")], unit="reqps"),
        Panel("Stage latency, p95", [
            (f"histogram_quantile(0.95, sum by (le, stage) (rate(ragmon_stage_latency_seconds_bucket{{{TI}}}"
             f"[{RATE}])))", "{{stage}}")], unit="s"),
        Panel("Tokens and cost", [
            (f"sum by (direction) (rate(ragmon_tokens_total{{{TI}}}[{RATE}]))", "tokens {{direction}}"),
            (f"sum(rate(ragmon_cost_usd_total{{{TI}}}[{RATE}])) * 3600", "USD per hour")]),
    ])


def permissions_and_freshness() -> Dashboard:
    return Dashboard("ragmon-permissions-freshness", "ragmon / permissions and freshness",
                     "Passages the caller may not read, ACL coverage, stale passages and index staleness.",
                     panels=[
        Panel("Permission violations by stage", [
            (f"sum by (tenant, index, stage) (increase(ragmon_permission_violations_total{{{TI}}}[{RATE}]))",
             "{{tenant}}/{{index}} {{stage}}")]),
        Panel("Passages with unknown ACL, traces without caller", [
            (f"sum by (tenant, index) (rate(ragmon_unknown_acl_passages_total{{{TI}}}[{RATE}]))",
             "{{tenant}}/{{index}} passages"),
            # no series until the first trace without a caller: 0 rather than no data
            (f'sum by (tenant) (rate(ragmon_traces_without_caller_total{{{D}, tenant=~"$tenant"}}'
             f"[{RATE}])) or vector(0)", "{{tenant}} traces without caller")], unit="reqps"),
        Panel("Stale passages served", [
            (f"sum by (tenant, index, stage) (rate(ragmon_stale_passages_served_total{{{TI}}}[{RATE}]))",
             "{{tenant}}/{{index}} {{stage}}")], unit="reqps"),
        Panel("Index staleness", [(f"max by (index) (ragmon_index_max_staleness_seconds{{{INDEX}}})", "{{index}}")],
              unit="s"),
        Panel("Stale documents per index", [(f"max by (index) (ragmon_index_stale_documents{{{INDEX}}})",
                                             "{{index}}")]),
        Panel("Indexing lag, p90", [
            (f"histogram_quantile(0.9, sum by (le, index) (rate(ragmon_index_lag_seconds_bucket{{{INDEX}}}"
             f"[{RATE}])))", "{{index}}")], unit="s"),
        Panel("Embedding models per index", [(f"max by (index) (ragmon_index_embedding_models{{{INDEX}}})",
                                              "{{index}}")]),
        Panel("Index drift without traffic: documents by kind", [
            (f"max by (tenant, index, kind) (ragmon_index_drift_documents{{{TI}}})", "{{tenant}}/{{index}} {{kind}}"),
            (f"max by (tenant, index, reason) (ragmon_index_drift_unjudged_documents{{{TI}}})",
             "{{tenant}}/{{index}} not judged: {{reason}}")]),
        Panel("Oldest revocation pending in the index", [
            (f'max by (tenant, index) (ragmon_index_drift_oldest_seconds{{{TI}, kind="acl_narrower"}})',
             "{{tenant}}/{{index}}")], unit="s",
              description=f"RagmonRevocationPending fires from {_ALERTS.revocation_grace_minutes:g} minutes "
                          "(alerts.revocation_grace_minutes); `ragmon catalog reconcile` names the documents."),
        Panel("Canary probe failures and leaks", [
            (f"sum by (probe) (increase(ragmon_probe_failures_total{{{D}}}[1h])) or vector(0)", "failures {{probe}}"),
            (f"sum by (probe) (increase(ragmon_probe_leaks_total{{{D}}}[1h])) or vector(0)", "leaks {{probe}}")]),
    ])


def labeling_queue() -> Dashboard:
    return Dashboard("ragmon-labeling", "ragmon / labeling queue",
                     "What goes into the weekly labeling batch, and what the scheduler did.", panels=[
        Panel("Samples in the store by status", [(f"max by (status) (ragmon_sample_queue{{{D}}})", "{{status}}")]),
        Panel("Sampled per stratum", [
            (f'sum by (stratum) (increase(ragmon_samples_total{{{D}, tenant=~"$tenant"}}[{RATE}]))', "{{stratum}}")]),
        Panel("Dropped samples by reason", [
            (f"sum by (reason) (increase(ragmon_samples_dropped_total{{{D}}}[{RATE}])) or vector(0)", "{{reason}}")]),
        Panel("Scheduled jobs: hours since last success", [
            (f"(time() - max by (scheduled_job) (ragmon_job_last_success_timestamp_seconds{{{D}}})) / 3600",
             "{{scheduled_job}}")], "table", "h"),
        Panel("Scheduled job runs", [
            (f"sum by (scheduled_job, outcome) (increase(ragmon_job_runs_total{{{D}}}[1h]))",
             "{{scheduled_job}} {{outcome}}")]),
        Panel("Retention deletions", [
            (f"sum by (kind) (increase(ragmon_retention_deleted_total{{{D}}}[1d])) or vector(0)", "{{kind}}")]),
    ], by_tenant=True)


DASHBOARDS = (overview, retrieval_quality, permissions_and_freshness, labeling_queue)


def render_dashboards() -> dict[str, str]:
    """File name -> JSON text of every dashboard (stable bytes)."""
    return {f"{d.uid}.json": render_json(d) for d in (make() for make in DASHBOARDS)}


def reference_markdown() -> list[str]:
    """The dashboards section of docs/metrics.md: each dashboard's variables and every stat's
    colours, from the definitions above."""
    lines = ["## Dashboards", "",
             "`ragmon dashboard render` writes them (the Helm chart ships them under `dashboards/`). Variables:",
             "`datasource` (a Prometheus), `namespace` and `job` (the ragmon deployment, as Prometheus labels",
             "its targets; listed from `ragmon_build_info`), and on the dashboards that read per tenant `tenant`",
             "and `index`. Each narrows the next, takes several values, and defaults to All (`.*`, which also",
             "matches series without the label, e.g. no `namespace` outside Kubernetes). Every query is",
             "filtered by them; several deployments selected are summed.", "",
             "| dashboard | uid | variables |", "|---|---|---|"]
    stats = []
    for make in DASHBOARDS:
        dashboard = make()
        names = [v["name"] for v in dashboard.to_json()["templating"]["list"]]
        lines.append(f"| {dashboard.title} | `{dashboard.uid}` | {', '.join(f'`{n}`' for n in names)} |")
        stats += [(dashboard, panel) for panel in dashboard.panels if panel.thresholds is not None]
    lines += ["", "Stat panels colour their value (a step applies from its value up):", "",
              "| dashboard | stat | unit | colours | why |", "|---|---|---|---|---|"]
    for dashboard, panel in stats:
        t = panel.thresholds
        colours = ", ".join([t.base, *(f"{c} {'above 0' if v == ANY else f'from {v:g}'}" for v, c in t.steps)])
        lines.append(f"| {dashboard.title} | {panel.title} | `{panel.unit}` | {colours} | {t.meaning} |")
    return lines


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of a rendered dashboard."""
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]
