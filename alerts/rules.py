"""Every alert of docs/alerts.md, defined once: name, severity, PromQL expression, hold time, summary
and runbook. ``ragmon.alerts.render`` turns them into a Prometheus rules file (and the Helm chart's
PrometheusRule); the direct push uses the same names, severities and summaries.

Every expression aggregates ``by (namespace, job, ...)``: each ragmon deployment (a Prometheus
``job`` in a Kubernetes ``namespace``) alerts on its own, so a busy one cannot hide a silent or leaking
one, while the replicas of one deployment, scraped separately, count once. Beyond ``namespace`` and
``job`` an expression keeps what it alerts on (tenant and index, index, index and check, topic or probe): gauges every
replica exports alike (index health, the group's consumer lag) take ``max``, counters each replica
holds part of take ``sum``. The one exception is the ``absent_over_time`` clause of RagmonNoTraffic,
which fires when no deployment at all reported a trace and so has no namespace or job to name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragmon.alerts import links
from ragmon.monitor.config.alerting import AlertsConfig

CRITICAL, WARNING = "critical", "warning"
NONE = "none"  # the watchdog's: it is no incident

# the labels Prometheus gives every target: which deployment a series comes from
DEPLOYMENT = "namespace, job"
BY_TENANT = f"{DEPLOYMENT}, tenant, index"
BY_INDEX = f"{DEPLOYMENT}, index"
# how far back RagmonNoTraffic looks for a deployment's last trace: a deployment that stopped being
# scraped, or restarted and saw no trace since, still has its last timestamp in this window
NO_TRAFFIC_LOOKBACK = "1w"
WHERE = "{{ $labels.tenant }}/{{ $labels.index }}"  # in the summaries of the alerts by tenant and index

LEAK_CONTEXT = "RagmonPermissionLeakContext"
LEAK_CANDIDATES = "RagmonPermissionLeakCandidates"
INDEX_STALE = "RagmonIndexStale"
PROBE_LEAK = "RagmonProbeLeak"
BLIND_INDEX = "RagmonBlindIndex"
REVOCATION_PENDING = "RagmonRevocationPending"


@dataclass(frozen=True)
class AlertRule:
    """One alert: what ``ragmon rules render`` writes as a Prometheus alerting rule and the direct
    push sends under the same name, severity and summary."""

    name: str
    severity: str
    expr: str
    hold: str  # Prometheus "for": how long the condition holds before the alert fires
    summary: str  # may use {{ $labels.tenant }} and {{ $labels.index }}
    description: str
    findings: str | None = None  # the findings signal that names its traces (GET /api/v1/findings)

    def runbook(self, config: AlertsConfig) -> str:
        return f"{config.runbook_url}#{self.name.lower()}"

    def finding_links(self) -> dict[str, str]:
        """Where its traces are: the read API query and the command, as Go templates over the
        alert's tenant and index labels, each value quoted for the shell (``ragmon.alerts.links``)."""
        return {} if self.findings is None else links.templated(self.findings)

    def finding_links_for(self, labels: Mapping[str, str]) -> dict[str, str]:
        """:meth:`finding_links` filled with a pushed alert's ``tenant`` and ``index``: the text
        Prometheus renders for the same labels."""
        return {} if self.findings is None else links.filled(self.findings, labels["tenant"], labels["index"])


def _no_answer_ratio(offset: str = "") -> str:
    window = f"[1h]{offset}"
    answers = f'sum by ({BY_TENANT}) (rate(ragmon_answers_total{{outcome!="unknown"}}{window}))'
    # `or ... * 0`: a tenant and index that never abstained since the last restart has no abstained series
    no_answer = (f'(sum by ({BY_TENANT}) (rate(ragmon_answers_total{{outcome=~"abstained|empty_context"}}{window}))'
                 f" or {answers} * 0)")
    return f"({no_answer} / {answers})"


def _low_score_ratio(offset: str = "") -> str:
    window = f"[1h]{offset}"
    return (f"(sum by ({BY_TENANT}) (rate(ragmon_low_score_retrievals_total{window}))"
            f" / sum by ({BY_TENANT}) (rate(ragmon_retrieval_top_score_count{window})))")


def _broken_rewrites(config: AlertsConfig) -> str:
    """The share of rewritten queries that are empty or the history, over 30 minutes, above
    ``alerts.broken_rewrite_ratio``, while the tenant and index rewrite above
    ``alerts.min_answers_per_second``. Every outcome's series is made with a tenant and index's
    first trace: no ``or ... * 0`` is needed."""
    rewritten = f"sum by ({BY_TENANT}) (rate(ragmon_rewritten_queries_total[30m]))"
    broken = f'sum by ({BY_TENANT}) (rate(ragmon_rewritten_queries_total{{outcome=~"empty|history"}}[30m]))'
    return (f"{broken} / {rewritten} > {config.broken_rewrite_ratio:g}"
            f" and {rewritten} > {config.min_answers_per_second:g}")


def _increased(selector: str, by: str, window: str = "10m") -> str:
    """Counters that grew within ``window``, including series born within it: a counter that
    appears already at 1 (the first leak after a start) has no earlier sample for ``increase``.
    A series counts as born only if the hour before the window never saw it, so a scrape gap
    does not make old counts look new."""
    return (f"sum by ({by}) (increase({selector}[{window}])) > 0"
            f" or sum by ({by}) ({selector} unless last_over_time({selector}[1h] offset {window})) > 0")


def _blind(config: AlertsConfig) -> str:
    """The share of the passages served from an index, over an hour, that a check could not judge,
    above ``alerts.blind_ratio``, while the index answers above ``alerts.min_answers_per_second``.
    A deployment that never judged one passage has its judged series at 0 (every series of a
    tenant and index is made with its first trace); ``or ... * 0`` covers a series absent anyway."""
    by = f"{BY_INDEX}, check"
    unjudged = f"sum by ({by}) (rate(ragmon_passages_unjudged_total[1h]))"
    judged = f"(sum by ({by}) (rate(ragmon_passages_judged_total[1h])) or {unjudged} * 0)"
    traffic = f"sum by ({BY_INDEX}) (rate(ragmon_answers_total[1h])) > {config.min_answers_per_second:g}"
    return (f"{unjudged} / ({unjudged} + {judged}) > {config.blind_ratio:g}"
            f" and on ({BY_INDEX}) ({traffic})")


def _traffic(config: AlertsConfig) -> str:
    return f"sum by ({BY_TENANT}) (rate(ragmon_answers_total[1h])) > {config.min_answers_per_second:g}"


def _no_traffic(config: AlertsConfig) -> str:
    """Seconds since each deployment's last trace, over a lookback rather than the present sample:
    a deployment that went unscraped, or restarted and has seen no trace since, has no current
    series, and would otherwise vanish from a ``max by`` while a busy neighbour keeps the total up.
    ``absent_over_time`` covers the case where no deployment reported a trace at all."""
    selector = 'ragmon_last_event_timestamp_seconds{type="trace"}'
    return (f"(time() - max by ({DEPLOYMENT}) (max_over_time({selector}[{NO_TRAFFIC_LOOKBACK}])))"
            f" > {config.no_traffic_minutes * 60:g}"
            f" or sum(absent_over_time({selector}[{NO_TRAFFIC_LOOKBACK}]))")


def alert_rules(config: AlertsConfig) -> list[AlertRule]:
    """The rules with the configured thresholds, in a fixed order."""
    warn_s = config.stale_warning_hours * 3600
    crit_s = config.stale_critical_hours * 3600
    where = WHERE
    return [
        AlertRule(LEAK_CONTEXT, CRITICAL,
                  _increased('ragmon_permission_violations_total{stage="context"}', BY_TENANT),
                  "0m", f"Passages the caller may not read reached the model in {where}",
                  "A passage whose ACL excludes the caller, or of another tenant, was in the final context of an "
                  "answer: the model may have disclosed it.", findings="permission_violation"),
        AlertRule(LEAK_CANDIDATES, WARNING,
                  _increased('ragmon_permission_violations_total{stage="candidates"}', BY_TENANT),
                  "0m", f"Retrieval returned passages the caller may not read in {where}",
                  "A retriever returned passages the caller may not read; they were filtered before the model, "
                  "but the index or its permission filter is wrong.", findings="permission_violation"),
        AlertRule(INDEX_STALE, WARNING,
                  f"max by ({BY_INDEX}) (ragmon_index_max_staleness_seconds) > {warn_s:g}", "5m",
                  "Index {{ $labels.index }} is more than " + f"{config.stale_warning_hours:g} h behind its sources",
                  "A source document changed and the index still serves the older version."),
        AlertRule(INDEX_STALE, CRITICAL,
                  f"max by ({BY_INDEX}) (ragmon_index_max_staleness_seconds) > {crit_s:g}", "5m",
                  "Index {{ $labels.index }} is more than " + f"{config.stale_critical_hours:g} h behind its sources",
                  "A source document changed and the index still serves the older version."),
        AlertRule(REVOCATION_PENDING, CRITICAL,
                  f'max by ({BY_TENANT}) (ragmon_index_drift_oldest_seconds{{kind="acl_narrower"}})'
                  f" > {config.revocation_grace_minutes * 60:g}", "5m",
                  f"A revocation has been waiting in the index for over {config.revocation_grace_minutes:g} minutes"
                  f" in {where}",
                  "A document's ACL at the source is narrower than the ACL its chunks carry in the index: someone "
                  "the source no longer allows can still retrieve it (no traffic needed to see it)."),
        AlertRule("RagmonStalePassagesServed", WARNING,
                  f'sum by ({BY_TENANT}) (rate(ragmon_stale_passages_served_total{{stage="context"}}[30m]))'
                  f" / sum by ({BY_TENANT}) (rate(ragmon_answers_total[30m])) > {config.stale_served_ratio:g}",
                  "15m", f"Outdated passages are reaching the model in {where}",
                  "Answers are built on document versions the source has replaced.", findings="stale_passage"),
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
                  "The share of retrievals whose best score is under the low-score threshold surged.",
                  findings="low_score"),
        AlertRule("RagmonRewriteBroken", WARNING, _broken_rewrites(config), "15m",
                  f"The chat in {where} searches empty queries or its history instead of rewritten questions",
                  "Many of the queries its condense step wrote hold no word or repeat the earlier turns word for "
                  "word: follow-up questions are searched with nothing of what they ask."),
        AlertRule("RagmonMixedEmbeddingModels", WARNING,
                  f"max by ({BY_INDEX}) (ragmon_index_embedding_models) > 1", "30m",
                  "Index {{ $labels.index }} holds vectors of more than one embedding model",
                  "Scores from different embedding models are not comparable; a re-embedding is unfinished."),
        AlertRule(BLIND_INDEX, WARNING, _blind(config), "15m",
                  "Index {{ $labels.index }} is mostly not judged for {{ $labels.check }}",
                  "Most passages served from the index over the last hour could not be judged by this check (the "
                  "catalog does not know their documents, or knows no ACL or no served version of them): its leak "
                  "or staleness counts of zero say nothing."),
        AlertRule("RagmonNoTraffic", CRITICAL,
                  _no_traffic(config),
                  "5m", "ragmon has seen no trace for a while: the monitor is blind",
                  "No trace event arrived, or ragmon is not scraped: leaks and staleness go unseen."),
        AlertRule("RagmonRejectedInputRatio", WARNING,
                  f"sum by ({DEPLOYMENT}) (rate(ragmon_rejected_events_total[10m]))"
                  f" / (sum by ({DEPLOYMENT}) (rate(ragmon_events_total[10m]))"
                  f" + sum by ({DEPLOYMENT}) (rate(ragmon_rejected_events_total[10m]))) > {config.rejected_ratio:g}",
                  "10m", "A large share of the input is rejected",
                  "Rejected records are in the dead-letter sink with their reason; a producer likely changed."),
        AlertRule("RagmonConsumerLag", WARNING,
                  f"max by ({DEPLOYMENT}, topic) (ragmon_consumer_group_lag_messages)"
                  f" > {config.consumer_lag_messages}", "10m",
                  "ragmon is behind on topic {{ $labels.topic }}",
                  "The consumer group lags (every partition counts, also those of a replica that died): "
                  "signals and alerts arrive late."),
        AlertRule(PROBE_LEAK, CRITICAL,
                  _increased("ragmon_probe_leaks_total", f"{DEPLOYMENT}, probe", "15m"), "0m",
                  "Canary probe {{ $labels.probe }} retrieved documents its test identity may not read",
                  "A configured test identity got documents it must never see: the permission filter of "
                  "the RAG system leaks."),
        AlertRule("RagmonProbeFailure", WARNING,
                  _increased("ragmon_probe_failures_total", f"{DEPLOYMENT}, probe", "15m"), "0m",
                  "Canary permission probe {{ $labels.probe }} failed",
                  "A probe leaked, missed a document it must retrieve, or could not reach the retrieval."),
        *self_alerts(config),
    ]


# the lag a consumer group may grow to before growth alone is worth an alert: below it, a few
# messages in flight while traffic rises are no sign of trouble
LAG_GROWTH_FLOOR = 1000


def self_alerts(config: AlertsConfig) -> list[AlertRule]:
    """Alerts on ragmon itself: a monitor nobody watches fails silently. Each uses metrics every
    ragmon process exports (docs/metrics.md); RagmonWatchdog always fires, for a dead man's switch."""
    lag = f"max by ({DEPLOYMENT}, topic) (ragmon_consumer_group_lag_messages)"
    return [
        AlertRule("RagmonJobFailed", WARNING,
                  _increased('ragmon_job_runs_total{outcome="failed"}', f"{DEPLOYMENT}, scheduled_job", "1h"), "0m",
                  "Scheduled job {{ $labels.scheduled_job }} failed",
                  "A scheduled job (retention, the weekly pull, staleness scans, probes, baselines) ended with an "
                  "error within the last hour; its work is not done until a run succeeds."),
        AlertRule("RagmonNoSchedulerLeader", CRITICAL,
                  f"max by ({DEPLOYMENT}) (max_over_time(ragmon_scheduler_leader[1d])) == 1"
                  f" unless max by ({DEPLOYMENT}) (ragmon_scheduler_leader) == 1", "10m",
                  "No ragmon process holds the scheduler lock",
                  "A deployment that had a scheduler leader in the last day has none now: staleness scans, "
                  "retention, the weekly pull and the probes do not run, and staleness alerts cannot fire."),
        AlertRule("RagmonAlertPushFailing", WARNING,
                  f"{_notifications('failed')} > 0 unless {_notifications('sent')} > 0", "5m",
                  "ragmon cannot deliver its alerts to {{ $labels.notifier }}",
                  "Every push of leak and staleness alerts to this notifier failed for 15 minutes; they are "
                  "kept and retried, but nobody is told."),
        AlertRule("RagmonSinkErrors", WARNING,
                  f"sum by ({DEPLOYMENT}, sink) (rate(ragmon_sink_errors_total[10m])) > 0", "10m",
                  "ragmon's {{ $labels.sink }} sink keeps failing",
                  "A sink (prometheus, findings, samples, alerts) has failed on observations for 20 minutes: "
                  "what it records is missing, while the other sinks still get everything."),
        AlertRule("RagmonIndexSilent", WARNING,
                  f"sum by ({BY_TENANT}) (rate(ragmon_answers_total[1h] offset 1h))"
                  f" > {config.min_answers_per_second:g}"
                  f" unless sum by ({BY_TENANT}) (increase(ragmon_answers_total[30m])) > 0", "15m",
                  f"No trace from {WHERE} for 45 minutes, after steady traffic",
                  "An index that had traffic an hour ago has sent no trace since: the application stopped "
                  "emitting, its exporter or the topic broke, or ragmon rejects everything it sends."),
        AlertRule("RagmonDeadLettersDropped", WARNING,
                  _increased("ragmon_dead_letters_dropped_total", DEPLOYMENT, "1h"), "0m",
                  "Dead letters were deleted before anyone replayed them",
                  "The oldest rotated dead-letter file was deleted (dead_letter.keep_files): the records it held "
                  "can no longer be replayed."),
        AlertRule("RagmonConsumerLagGrowing", WARNING,
                  f"{lag} > {LAG_GROWTH_FLOOR} and deriv(({lag})[30m:1m]) > 0", "30m",
                  "ragmon falls further behind on topic {{ $labels.topic }}",
                  "The consumer group's lag has grown for an hour: ragmon consumes slower than producers write, "
                  "and will not catch up without more replicas or less work per trace."),
        AlertRule("RagmonWatchdog", NONE,
                  f"max by ({DEPLOYMENT}) (ragmon_build_info) == 1", "0m",
                  "ragmon's alerting pipeline works (always firing)",
                  "Fires as long as ragmon is scraped and Prometheus evaluates its rules and reaches Alertmanager. "
                  "Route it to a dead man's switch that pages when it stops arriving."),
    ]


def _notifications(outcome: str) -> str:
    return (f"sum by ({DEPLOYMENT}, notifier)"
            f' (increase(ragmon_alert_notifications_total{{outcome="{outcome}"}}[15m]))')
