"""Grafana dashboards built from code (``ragmon dashboard render``), committed under the Helm chart
and shipped as a ConfigMap for Grafana's sidecar.

A small builder rather than a dependency: four dashboards of time series, stats and tables, each
with a Prometheus datasource variable (sidecar provisioning does not resolve ``${DS_...}`` import
inputs, so panels point at ``${datasource}``) and tenant and index variables. Every query sums
over pods, so scaled deployments read the same as one process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TI = 'tenant=~"$tenant", index=~"$index"'
RATE = "$__rate_interval"


@dataclass
class Panel:
    title: str
    exprs: list[tuple[str, str]]  # (PromQL, legend)
    kind: str = "timeseries"  # timeseries | stat | table
    unit: str = "short"
    description: str = ""
    width: int = 12
    height: int = 8


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    panels: list[Panel] = field(default_factory=list)
    by_tenant: bool = True  # tenant and index variables

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid, "title": self.title, "description": self.description, "tags": ["ragmon"],
            "editable": True, "schemaVersion": 39, "version": 1, "refresh": "1m",
            "time": {"from": "now-6h", "to": "now"}, "timezone": "browser",
            "templating": {"list": _variables(self.by_tenant)},
            "panels": _laid_out(self.panels),
        }


def _variables(by_tenant: bool) -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = [{
        "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "refresh": 1, "options": [],
    }]
    if by_tenant:
        for name, source in (("tenant", "label_values(ragmon_answers_total, tenant)"),
                             ("index", 'label_values(ragmon_answers_total{tenant=~"$tenant"}, index)')):
            variables.append({
                "name": name, "label": name, "type": "query", "datasource": DATASOURCE,
                "query": {"query": source, "refId": name}, "definition": source, "refresh": 2,
                "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"},
                "sort": 1, "hide": 0, "options": [],
            })
    return variables


def _laid_out(panels: list[Panel]) -> list[dict[str, Any]]:
    out, x, y, row_height = [], 0, 0, 0
    for number, panel in enumerate(panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        out.append({
            "id": number, "type": panel.kind, "title": panel.title, "description": panel.description,
            "datasource": DATASOURCE, "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if panel.kind == "timeseries" else {},
            "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                         "datasource": DATASOURCE, **({"instant": True, "format": "table"}
                                                      if panel.kind == "table" else {})}
                        for i, (expr, legend) in enumerate(panel.exprs)],
        })
        x += panel.width
        row_height = max(row_height, panel.height)
    return out


def _no_answer_ratio() -> str:
    answers = f'sum by (tenant, index) (rate(ragmon_answers_total{{{TI}, outcome!="unknown"}}[{RATE}]))'
    return (f'sum by (tenant, index) (rate(ragmon_answers_total{{{TI}, outcome=~"abstained|empty_context"}}'
            f"[{RATE}])) / {answers}")


def overview() -> Dashboard:
    return Dashboard("ragmon-overview", "ragmon / overview",
                     "Is the RAG system answering, from fresh and permitted passages, and is the monitor seeing it?",
                     by_tenant=False, panels=[
        Panel("Answers per second", [("sum(rate(ragmon_answers_total[$__rate_interval]))", "answers")], "stat",
              "reqps", width=6, height=5),
        Panel("No-answer share", [(f'sum(rate(ragmon_answers_total{{outcome=~"abstained|empty_context"}}[{RATE}]))'
                                   f' / sum(rate(ragmon_answers_total{{outcome!="unknown"}}[{RATE}]))', "no answer")],
              "stat", "percentunit", width=6, height=5),
        Panel("Leaks into context (24 h)", [('sum(increase(ragmon_permission_violations_total{stage="context"}[24h]))'
                                             " or vector(0)", "leaks")], "stat", width=6, height=5),
        Panel("Stalest index", [("max(ragmon_index_max_staleness_seconds)", "staleness")], "stat", "s",
              width=6, height=5),
        Panel("Events accepted and rejected", [
            ("sum by (type) (rate(ragmon_events_total[$__rate_interval]))", "{{type}}"),
            ("sum by (reason) (rate(ragmon_rejected_events_total[$__rate_interval]))", "rejected: {{reason}}")],
            unit="reqps"),
        Panel("Answers by outcome", [("sum by (outcome) (rate(ragmon_answers_total[$__rate_interval]))",
                                      "{{outcome}}")], unit="reqps"),
        Panel("Seconds since the last trace", [('time() - max(ragmon_last_event_timestamp_seconds{type="trace"})',
                                                "since last trace")], unit="s", width=8),
        Panel("Kafka consumer lag (whole group)",
              [("max by (topic) (ragmon_consumer_group_lag_messages) or vector(0)", "{{topic}}")],
              width=8),
        Panel("Sink errors and failed alert deliveries", [
            ("sum(rate(ragmon_sink_errors_total[$__rate_interval])) or vector(0)", "sink errors"),
            ('sum(rate(ragmon_alert_notifications_total{outcome="failed"}[$__rate_interval])) or vector(0)',
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
            ('sum by (tenant) (rate(ragmon_traces_without_caller_total{tenant=~"$tenant"}'
             f"[{RATE}])) or vector(0)", "{{tenant}} traces without caller")], unit="reqps"),
        Panel("Stale passages served", [
            (f"sum by (tenant, index, stage) (rate(ragmon_stale_passages_served_total{{{TI}}}[{RATE}]))",
             "{{tenant}}/{{index}} {{stage}}")], unit="reqps"),
        Panel("Index staleness", [('max by (index) (ragmon_index_max_staleness_seconds{index=~"$index"})',
                                   "{{index}}")], unit="s"),
        Panel("Stale documents per index", [('max by (index) (ragmon_index_stale_documents{index=~"$index"})',
                                             "{{index}}")]),
        Panel("Indexing lag, p90", [
            ('histogram_quantile(0.9, sum by (le, index) (rate(ragmon_index_lag_seconds_bucket{index=~"$index"}'
             f"[{RATE}])))", "{{index}}")], unit="s"),
        Panel("Embedding models per index", [('max by (index) (ragmon_index_embedding_models{index=~"$index"})',
                                              "{{index}}")]),
        Panel("Canary probe failures and leaks", [
            ("sum by (probe) (increase(ragmon_probe_failures_total[1h])) or vector(0)", "failures {{probe}}"),
            ("sum by (probe) (increase(ragmon_probe_leaks_total[1h])) or vector(0)", "leaks {{probe}}")]),
    ])


def labeling_queue() -> Dashboard:
    return Dashboard("ragmon-labeling", "ragmon / labeling queue",
                     "What goes into the weekly labeling batch, and what the scheduler did.", panels=[
        Panel("Samples in the store by status", [("max by (status) (ragmon_sample_queue)", "{{status}}")]),
        Panel("Sampled per stratum", [
            (f'sum by (stratum) (increase(ragmon_samples_total{{tenant=~"$tenant"}}[{RATE}]))', "{{stratum}}")]),
        Panel("Dropped samples by reason", [
            (f"sum by (reason) (increase(ragmon_samples_dropped_total[{RATE}])) or vector(0)", "{{reason}}")]),
        Panel("Scheduled jobs: hours since last success", [
            ("(time() - max by (job) (ragmon_job_last_success_timestamp_seconds)) / 3600", "{{job}}")], "table",
              "h"),
        Panel("Scheduled job runs", [("sum by (job, outcome) (increase(ragmon_job_runs_total[1h]))",
                                      "{{job}} {{outcome}}")]),
        Panel("Retention deletions", [("sum by (kind) (increase(ragmon_retention_deleted_total[1d])) or vector(0)",
                                       "{{kind}}")]),
    ], by_tenant=True)


DASHBOARDS = (overview, retrieval_quality, permissions_and_freshness, labeling_queue)


def render_dashboards() -> dict[str, str]:
    """File name -> JSON text of every dashboard (stable bytes)."""
    return {f"{d.uid}.json": json.dumps(d.to_json(), indent=2, sort_keys=True) + "\n"
            for d in (make() for make in DASHBOARDS)}


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of a rendered dashboard."""
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]
