"""Alerting end to end with the real Prometheus and Alertmanager: `ragmon serve` fed a leaking
trace pushes the leak directly (webhook and Alertmanager), and Prometheus, scraping it with the
rendered rules, raises it again through a second Alertmanager; a stale index raises the staleness
alert and resolves it when the index catches up. Marker strings planted in the query, the passage
text and the caller id reach no payload."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from ragmon.alerts.render import render_rules
from ragmon.monitor.config.alerting import AlertsConfig
from tests.alerts.webhook_receiver import WebhookReceiver, has_alert
from tests.ragmon_process import RagmonServer
from tests.services.harness import Alertmanager, Prometheus

pytestmark = pytest.mark.integration

MARKERS = ("MARKER-QUERY-7f3a", "MARKER-PASSAGE-9c2e", "MARKER-CALLER-41bd")
ALERT_SETTINGS = {"STALE_WARNING_HOURS": "0.005", "STALE_CRITICAL_HOURS": "1",
                  "DASHBOARD_URL": "https://grafana.test/d/ragmon"}


def post(url: str, *events: dict) -> None:
    answer = httpx.post(f"{url}/v1/events", json=list(events), timeout=10)
    assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text


def catalog(now: float) -> list[dict]:
    return [{"type": "document", "doc_id": "payroll-2026", "version": "v1", "modified_at": now - 3600,
             "tenant": "acme", "acl": ["group:hr"]},
            {"type": "index", "index": "handbook", "doc_id": "payroll-2026", "version": "v1",
             "indexed_at": now - 3000, "embedding_model": "e5@1"}]


def leaking_trace(now: float) -> dict:
    passage = {"id": "payroll-2026#3", "doc_id": "payroll-2026", "doc_version": "v1", "score": 0.8,
               "text": f"Salaries {MARKERS[1]}", "acl": ["group:hr"]}
    return {"type": "trace", "trace_id": "trace-leak-1", "time": now, "tenant": "acme",
            "query": f"what does {MARKERS[0]} earn", "index": {"name": "handbook", "version": "v1"},
            "caller": {"id": MARKERS[2], "groups": ["staff"]},
            "retrievals": [{"retriever": "vector", "passages": [passage]}],
            "answer": {"text": "Here.", "citations": ["payroll-2026#3"]}}


def test_leaks_and_staleness_reach_the_receivers_by_both_paths(tmp_path):
    with WebhookReceiver() as receiver, \
            Alertmanager(webhook_url=f"{receiver.url}/am-rules") as rules_manager, \
            Alertmanager(webhook_url=f"{receiver.url}/am-direct") as direct_manager, \
            RagmonServer(tmp_path, RAGMON_ALERTS__ALERTMANAGER_URL=direct_manager.url,
                         RAGMON_ALERTS__WEBHOOK_URL=f"{receiver.url}/direct",
                         RAGMON_SCHEDULER__STALENESS_INTERVAL_SECONDS="1",  # the embedded scheduler's scan
                         # the job Prometheus scrapes it as (tests/services/harness.py); no namespace here
                         RAGMON_ALERTS__PUSH_LABELS=json.dumps({"job": "ragmon"}),
                         **{f"RAGMON_ALERTS__{k}": v for k, v in ALERT_SETTINGS.items()}) as ragmon, \
            Prometheus() as prometheus:
        rules = tmp_path / "rules.yml"
        rules.write_text(render_rules(AlertsConfig(**{k.lower(): v for k, v in ALERT_SETTINGS.items()})))
        prometheus.write_config(targets=[ragmon.url.removeprefix("http://")], rule_files=[str(rules)],
                                alertmanager=rules_manager.url.removeprefix("http://"))
        prometheus.reload()

        now = time.time()
        post(ragmon.url, *catalog(now))
        sent = time.monotonic()
        post(ragmon.url, leaking_trace(now))

        # direct push: ragmon's webhook, and the Alertmanager it pushes to (which routes it on)
        leak = has_alert("RagmonPermissionLeakContext", tenant="acme", index="handbook", severity="critical")
        arrived, body = receiver.wait_for("/direct", leak, timeout=10)
        assert arrived - sent < 5
        [alert] = body["alerts"]
        assert alert["annotations"]["trace_ids"] == "trace-leak-1"
        assert alert["annotations"]["doc_ids"] == "payroll-2026" and alert["annotations"]["count"] == "1"
        assert alert["annotations"]["dashboard_url"] == "https://grafana.test/d/ragmon"
        receiver.wait_for("/am-direct", leak, timeout=30)
        held = [a for a in direct_manager.alerts() if a["labels"]["alertname"] == "RagmonPermissionLeakContext"]
        assert held and held[0]["annotations"]["trace_ids"] == "trace-leak-1"

        # the rule path: Prometheus scrapes the counter, evaluates the rendered rule, alerts its Alertmanager
        _, routed = receiver.wait_for("/am-rules", leak, timeout=90)
        [ruled] = [a for a in routed["alerts"] if a["labels"]["alertname"] == "RagmonPermissionLeakContext"]
        assert "trace_ids" not in ruled["annotations"]  # from the rule, not from the push
        # the rule keeps the deployment's labels, the push adds them: one label set, one alert in Alertmanager
        assert ruled["labels"] == alert["labels"]
        # Prometheus renders the rule's links (Go templates) to the text the push fills in
        for link in ("findings_query", "findings_command"):
            assert ruled["annotations"][link] == alert["annotations"][link]
        assert alert["labels"]["job"] == "ragmon"

        # a stale index: the source changes, the index does not follow; then it catches up
        changed = time.time()
        post(ragmon.url, {"type": "document", "doc_id": "payroll-2026", "version": "v2", "modified_at": changed,
                          "tenant": "acme", "acl": ["group:hr"]})
        stale = has_alert("RagmonIndexStale", index="handbook", severity="warning")
        _, body = receiver.wait_for("/direct", stale, timeout=60)
        [alert] = [a for a in body["alerts"] if a["labels"]["alertname"] == "RagmonIndexStale"]
        assert alert["annotations"]["doc_ids"] == "payroll-2026"
        assert float(alert["annotations"]["max_staleness_seconds"]) >= 18
        receiver.wait_for("/am-direct", stale, timeout=30)
        post(ragmon.url, {"type": "index", "index": "handbook", "doc_id": "payroll-2026", "version": "v2",
                          "indexed_at": time.time(), "embedding_model": "e5@1"})
        resolved = has_alert("RagmonIndexStale", status="resolved", index="handbook", severity="warning")
        receiver.wait_for("/direct", resolved, timeout=30)
        deadline = time.monotonic() + 30
        while any(a["labels"]["alertname"] == "RagmonIndexStale" for a in direct_manager.alerts()
                  if a["status"]["state"] == "active"):
            assert time.monotonic() < deadline, "Alertmanager still holds the staleness alert as active"
            time.sleep(0.5)

        # privacy: nothing planted reached any payload, nor Alertmanager's store
        everything = json.dumps([body for _, _, body in receiver.received])
        everything += json.dumps(direct_manager.alerts()) + json.dumps(rules_manager.alerts())
        for marker in MARKERS:
            assert marker not in everything


def test_a_replay_of_past_traffic_pushes_no_alert(tmp_path):
    import msgspec
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main

    now = time.time()
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(msgspec.json.encode(e) for e in [*catalog(now), leaking_trace(now)]))
    with WebhookReceiver() as receiver:
        result = CliRunner().invoke(main, ["replay", str(events)], env={
            "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_ALERTS__WEBHOOK_URL": f"{receiver.url}/direct"})
        assert result.exit_code == 0, result.output
        time.sleep(1.5)  # a push would have been sent within milliseconds
        assert receiver.received == []
