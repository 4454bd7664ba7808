"""Every alert of docs/alerts.md, defined once: name, severity, PromQL expression, hold time, summary
and runbook. ``ragmon.alerts.render`` turns them into a Prometheus rules file (and the Helm chart's
PrometheusRule); the direct push uses the same names, severities and summaries.

Expressions aggregate ``by (tenant, index)`` or ``by (index)`` so that several ragmon replicas
scraped separately count once: gauges every replica exports alike (index health) take ``max``,
shares each replica holds part of (consumer lag of its partitions) take ``sum``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmon.monitor.config.alerting import AlertsConfig

CRITICAL, WARNING = "critical", "warning"

LEAK_CONTEXT = "RagmonPermissionLeakContext"
LEAK_CANDIDATES = "RagmonPermissionLeakCandidates"
INDEX_STALE = "RagmonIndexStale"
PROBE_LEAK = "RagmonProbeLeak"


@dataclass(frozen=True)
class AlertRule:
    name: str
    severity: str
    expr: str
    hold: str  # Prometheus "for": how long the condition holds before the alert fires
    summary: str  # may use {{ $labels.tenant }} and {{ $labels.index }}
    description: str

    def runbook(self, config: AlertsConfig) -> str:
        return f"{config.runbook_url}#{self.name.lower()}"


def _no_answer_ratio(offset: str = "") -> str:
    window = f"[1h]{offset}"
    answers = f'sum by (tenant, index) (rate(ragmon_answers_total{{outcome!="unknown"}}{window}))'
    # `or ... * 0`: a tenant and index that never abstained since the last restart has no abstained series
    no_answer = (f'(sum by (tenant, index) (rate(ragmon_answers_total{{outcome=~"abstained|empty_context"}}{window}))'
                 f" or {answers} * 0)")
    return f"({no_answer} / {answers})"


def _low_score_ratio(offset: str = "") -> str:
    window = f"[1h]{offset}"
    return (f"(sum by (tenant, index) (rate(ragmon_low_score_retrievals_total{window}))"
            f" / sum by (tenant, index) (rate(ragmon_retrieval_top_score_count{window})))")


def _increased(selector: str, by: str, window: str = "10m") -> str:
    """Counters that grew within ``window``, including series born within it: a counter that
    appears already at 1 (the first leak after a start) has no earlier sample for ``increase``.
    A series counts as born only if the hour before the window never saw it, so a scrape gap
    does not make old counts look new."""
    return (f"sum by ({by}) (increase({selector}[{window}])) > 0"
            f" or sum by ({by}) ({selector} unless last_over_time({selector}[1h] offset {window})) > 0")


def _traffic(config: AlertsConfig) -> str:
    return f"sum by (tenant, index) (rate(ragmon_answers_total[1h])) > {config.min_answers_per_second:g}"


def alert_rules(config: AlertsConfig) -> list[AlertRule]:
    """The rules with the configured thresholds, in a fixed order."""
    warn_s = config.stale_warning_hours * 3600
    crit_s = config.stale_critical_hours * 3600
    where = "{{ $labels.tenant }}/{{ $labels.index }}"
    return [
        AlertRule(LEAK_CONTEXT, CRITICAL,
                  _increased('ragmon_permission_violations_total{stage="context"}', "tenant, index"),
                  "0m", f"Passages the caller may not read reached the model in {where}",
                  "A passage whose ACL excludes the caller, or of another tenant, was in the final context of an "
                  "answer: the model may have disclosed it."),
        AlertRule(LEAK_CANDIDATES, WARNING,
                  _increased('ragmon_permission_violations_total{stage="candidates"}', "tenant, index"),
                  "0m", f"Retrieval returned passages the caller may not read in {where}",
                  "A retriever returned passages the caller may not read; they were filtered before the model, "
                  "but the index or its permission filter is wrong."),
        AlertRule(INDEX_STALE, WARNING,
                  f"max by (index) (ragmon_index_max_staleness_seconds) > {warn_s:g}", "5m",
                  "Index {{ $labels.index }} is more than " + f"{config.stale_warning_hours:g} h behind its sources",
                  "A source document changed and the index still serves the older version."),
        AlertRule(INDEX_STALE, CRITICAL,
                  f"max by (index) (ragmon_index_max_staleness_seconds) > {crit_s:g}", "5m",
                  "Index {{ $labels.index }} is more than " + f"{config.stale_critical_hours:g} h behind its sources",
                  "A source document changed and the index still serves the older version."),
        AlertRule("RagmonStalePassagesServed", WARNING,
                  f'sum by (tenant, index) (rate(ragmon_stale_passages_served_total{{stage="context"}}[30m]))'
                  f" / sum by (tenant, index) (rate(ragmon_answers_total[30m])) > {config.stale_served_ratio:g}",
                  "15m", f"Outdated passages are reaching the model in {where}",
                  "Answers are built on document versions the source has replaced."),
        AlertRule("RagmonNoAnswerSpike", WARNING,
                  f"{_no_answer_ratio()} > {config.no_answer_spike_factor:g} * {_no_answer_ratio(' offset 1w')}"
                  f" and {_no_answer_ratio()} > {config.no_answer_min_ratio:g} and {_traffic(config)}",
                  "15m", f"The no-answer rate in {where} is well above the same hour last week",
                  "The system abstains, or answers from an empty context, far more often than a week ago."),
        AlertRule("RagmonNoAnswerDroppedToZero", WARNING,
                  f"{_no_answer_ratio()} == 0 and {_no_answer_ratio(' offset 1w')}"
                  f" > {config.no_answer_baseline_min_ratio:g} and {_traffic(config)}",
                  "30m", f"The system in {where} no longer abstains at all, under traffic",
                  "A week ago it abstained now and then; now never. Abstention detection or the refusal flag may "
                  "be broken, or the model answers what it cannot know."),
        AlertRule("RagmonLowTopScoreSurge", WARNING,
                  f"{_low_score_ratio()} > {config.low_score_surge_factor:g} * {_low_score_ratio(' offset 1w')}"
                  f" and {_low_score_ratio()} > {config.low_score_min_ratio:g}",
                  "15m", f"Far more queries than last week get only weak matches in {where}",
                  "The share of retrievals whose best score is under the low-score threshold surged."),
        AlertRule("RagmonMixedEmbeddingModels", WARNING,
                  "max by (index) (ragmon_index_embedding_models) > 1", "30m",
                  "Index {{ $labels.index }} holds vectors of more than one embedding model",
                  "Scores from different embedding models are not comparable; a re-embedding is unfinished."),
        AlertRule("RagmonNoTraffic", CRITICAL,
                  f'(time() - max(ragmon_last_event_timestamp_seconds{{type="trace"}}))'
                  f" > {config.no_traffic_minutes * 60:g}"
                  ' or sum(absent(ragmon_last_event_timestamp_seconds{type="trace"}))',
                  "5m", "ragmon has seen no trace for a while: the monitor is blind",
                  "No trace event arrived, or ragmon is not scraped: leaks and staleness go unseen."),
        AlertRule("RagmonRejectedInputRatio", WARNING,
                  "sum(rate(ragmon_rejected_events_total[10m])) / (sum(rate(ragmon_events_total[10m]))"
                  f" + sum(rate(ragmon_rejected_events_total[10m]))) > {config.rejected_ratio:g}",
                  "10m", "A large share of the input is rejected",
                  "Rejected records are in the dead-letter sink with their reason; a producer likely changed."),
        AlertRule("RagmonConsumerLag", WARNING,
                  f"max by (topic) (ragmon_consumer_group_lag_messages) > {config.consumer_lag_messages}", "10m",
                  "ragmon is behind on topic {{ $labels.topic }}",
                  "The consumer group lags (every partition counts, also those of a replica that died): "
                  "signals and alerts arrive late."),
        AlertRule(PROBE_LEAK, CRITICAL,
                  _increased("ragmon_probe_leaks_total", "probe", "15m"), "0m",
                  "Canary probe {{ $labels.probe }} retrieved documents its test identity may not read",
                  "A configured test identity got documents it must never see: the permission filter of "
                  "the RAG system leaks."),
        AlertRule("RagmonProbeFailure", WARNING,
                  _increased("ragmon_probe_failures_total", "probe", "15m"), "0m",
                  "Canary permission probe {{ $labels.probe }} failed",
                  "A probe leaked, missed a document it must retrieve, or could not reach the retrieval."),
    ]
