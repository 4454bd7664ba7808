"""The ``alerts`` config section: thresholds of the alert rules (docs/alerts.md) and where leak and
staleness alerts are pushed directly."""

from __future__ import annotations

import re

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, field_validator, model_validator

from ragmon.monitor.config.section import ConfigSection, HttpUrlText

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# labels a pushed alert sets itself; Prometheus keeps names starting with __ for itself
OWN_LABELS = frozenset({"alertname", "severity", "tenant", "index", "probe"})


class AlertsConfig(ConfigSection):
    """Alert thresholds (used by ``ragmon rules render`` and by the direct push) and the push targets."""

    runbook_url: HttpUrlText = Field("https://github.com/ragmon/ragmon/blob/main/docs/alerts.md",
                             description="Runbooks page; each alert links to its own section (#alertname).")
    dashboard_url: HttpUrlText | None = Field(None, description="Grafana dashboard linked from every alert.")
    stale_warning_hours: PositiveFloat = Field(24.0, description="Index staleness that raises a warning.")
    stale_critical_hours: PositiveFloat = Field(72.0, description="Index staleness that raises a critical alert.")
    revocation_grace_minutes: PositiveFloat = Field(
        60.0, description="Age of the oldest revocation pending in an index (its source ACL narrower than the "
        "index's) beyond which RagmonRevocationPending fires: above the time the indexer needs to take a source "
        "change in.")
    stale_served_ratio: PositiveFloat = Field(
        0.05, description="Stale passages reaching the model per answer, over 30 minutes, that raises an alert.")
    no_answer_spike_factor: PositiveFloat = Field(
        2.0, description="No-answer ratio over the last hour, as a multiple of the same hour last week, that alerts.")
    no_answer_min_ratio: float = Field(0.1, gt=0, lt=1, description="No-answer ratio below which no spike alerts.")
    no_answer_baseline_min_ratio: float = Field(
        0.01, gt=0, lt=1, description="Last week's no-answer ratio above which a drop to exactly zero alerts.")
    min_answers_per_second: PositiveFloat = Field(
        0.02, description="Answers per second (per tenant and index, over an hour) under which the no-answer "
        "alerts stay quiet; also the rewritten queries per second (over 30 minutes) under which RagmonRewriteBroken "
        "does.")
    low_score_surge_factor: PositiveFloat = Field(
        2.0, description="Low-top-score ratio as a multiple of the same hour last week that alerts.")
    low_score_min_ratio: float = Field(0.2, gt=0, lt=1, description="Low-top-score ratio below which no surge alerts.")
    broken_rewrite_ratio: float = Field(
        0.2, gt=0, lt=1, description="Share of the rewritten queries of a tenant and index over 30 minutes that are "
        "empty or the chat history word for word (the condense step is broken) above which RagmonRewriteBroken fires.")
    blind_ratio: float = Field(
        0.5, gt=0, lt=1, description="Share of the passages served from an index over an hour that a check "
        "(access, freshness) could not judge above which RagmonBlindIndex fires, while the index answers above "
        "`min_answers_per_second`.")
    no_traffic_minutes: PositiveFloat = Field(15.0, description="Minutes without a trace event before the monitor "
                                              "counts as blind.")
    rejected_ratio: float = Field(0.05, gt=0, lt=1, description="Share of rejected input over 10 minutes that alerts.")
    consumer_lag_messages: PositiveInt = Field(100_000, description="Kafka consumer lag that alerts.")

    alertmanager_url: HttpUrlText | None = Field(None, description="Alertmanager to push leak and staleness alerts to "
                                         "(its /api/v2/alerts), e.g. http://alertmanager:9093.")
    webhook_url: HttpUrlText | None = Field(
        None, description="Webhook to push leak and staleness alerts to (JSON POST).")
    webhook_token: SecretStr | None = Field(None, description="Bearer token sent to the webhook, if set.")
    timeout_seconds: PositiveFloat = Field(5.0, description="Timeout of each push request.")
    repeat_minutes: PositiveFloat = Field(240.0, description="A still-firing alert is sent to the webhook again "
                                          "after this long.")
    alertmanager_resend_seconds: PositiveFloat = Field(
        60.0, description="How often a firing alert is sent to Alertmanager again (it expires without).")
    leak_resolve_minutes: PositiveFloat = Field(
        15.0, description="A pushed leak alert resolves after this long without a new leak in its tenant and index.")
    max_active: PositiveInt = Field(1000, description="Pushed alerts tracked at most; more are counted and dropped.")
    push_labels: dict[str, str] = Field(
        {}, description="Labels added to every pushed alert, so it matches the rules' alert of this deployment and "
        "Alertmanager merges the two: `namespace` and `job` as Prometheus labels this deployment's targets (the Helm "
        "chart sets both), and any external labels your Prometheus adds to its alerts.")

    @field_validator("push_labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str]) -> dict[str, str]:
        for name, value in labels.items():
            if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"{name!r} is not a Prometheus label name")
            if name in OWN_LABELS:
                raise ValueError(f"{name!r} is set by each alert itself")
            if not value:
                raise ValueError(f"{name!r} has an empty value (Alertmanager drops empty labels)")
        return labels

    @model_validator(mode="after")
    def _critical_after_warning(self) -> AlertsConfig:
        if self.stale_critical_hours <= self.stale_warning_hours:
            raise ValueError("stale_critical_hours must be greater than stale_warning_hours")
        return self
