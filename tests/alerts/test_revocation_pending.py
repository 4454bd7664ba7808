"""A revocation waiting in an index, seen without any traffic: a real `ragmon serve` given only
catalog events (the source narrowed a document's ACL, the index still carries the wider one) shows
the pending revocation in its gauges, on its status page and in `ragmon catalog reconcile`, and the
real Prometheus, scraping it with the rendered rules, raises RagmonRevocationPending through a real
Alertmanager. Then the index takes the narrowed ACL in and the gauge goes back to zero. Expected
values come from the events as sent."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from ragmon.alerts.render import render_rules
from ragmon.alerts.rules import REVOCATION_PENDING
from ragmon.monitor.config.alerting import AlertsConfig
from tests.alerts.webhook_receiver import WebhookReceiver, has_alert
from tests.ragmon_process import RagmonServer, scraped
from tests.services.harness import Alertmanager, Prometheus

pytestmark = pytest.mark.integration

WAIT_SECONDS = 90  # a liveness bound on a loaded machine: the reconciliation is at most 30 s old


def catalog(now: float) -> list[dict]:
    """The board minutes: the source allows group:board since two hours; the index's chunks still
    carry group:staff as well (indexed before the change reached it). The handbook is level on both
    sides; the memo's index entry says nothing of its ACL."""
    return [
        {"type": "document", "doc_id": "board-minutes", "tenant": "acme", "version": "v1", "modified_at": now - 7200,
         "acl": ["group:board"]},
        {"type": "index", "index": "handbook", "doc_id": "board-minutes", "version": "v1", "indexed_at": now - 7000,
         "acl": ["group:board", "group:staff"]},
        {"type": "document", "doc_id": "handbook", "tenant": "acme", "version": "v1", "modified_at": now - 7200,
         "acl": ["group:staff"]},
        {"type": "index", "index": "handbook", "doc_id": "handbook", "version": "v1", "indexed_at": now - 7000,
         "acl": "group:staff"},
        {"type": "document", "doc_id": "memo", "tenant": "acme", "version": "v1", "modified_at": now - 7200,
         "acl": ["group:staff"]},
        {"type": "index", "index": "handbook", "doc_id": "memo", "version": "v1", "indexed_at": now - 7000},
    ]


def rules_held_for_no_time(config: AlertsConfig) -> str:
    """The rendered rules, RagmonRevocationPending's 5 minute hold left out so the test need not
    wait it (promtool's cases in rule_cases.yml test the hold); its expression is the real one."""
    rendered = yaml.safe_load(render_rules(config))
    for rule in rendered["groups"][0]["rules"]:
        if rule["alert"] == REVOCATION_PENDING:
            rule["for"] = "0s"
    return yaml.safe_dump(rendered, sort_keys=False)


def wait_for(url: str, name: str, value: float, **labels: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while (seen := scraped(url, name, **labels)) != value:
        assert time.monotonic() < deadline, f"{name}{labels} = {seen}, not {value}"
        time.sleep(0.5)


def test_a_pending_revocation_is_seen_without_traffic_and_raises_its_alert(tmp_path):
    where = {"tenant": "acme", "index": "handbook"}
    with WebhookReceiver() as receiver, \
            Alertmanager(webhook_url=f"{receiver.url}/am-rules") as manager, \
            RagmonServer(tmp_path) as ragmon, \
            Prometheus() as prometheus:
        rules = tmp_path / "rules.yml"
        rules.write_text(rules_held_for_no_time(AlertsConfig()))
        prometheus.write_config(targets=[ragmon.url.removeprefix("http://")], rule_files=[str(rules)],
                                alertmanager=manager.url.removeprefix("http://"))
        prometheus.reload()

        now = time.time()
        posted = httpx.post(f"{ragmon.url}/v1/events", json=catalog(now), timeout=10)
        assert posted.status_code == 200 and posted.json()["rejected"] == 0, posted.text

        # the gauges, with no trace sent at all
        wait_for(ragmon.url, "ragmon_index_entries", 3, **where)
        assert scraped(ragmon.url, "ragmon_index_drift_documents", kind="acl_narrower", **where) == 1
        age = scraped(ragmon.url, "ragmon_index_drift_oldest_seconds", kind="acl_narrower", **where)
        assert 7000 <= age < 7000 + WAIT_SECONDS + 60  # from the indexing, the later of the two statements
        for kind in ("stale", "deleted", "acl_wider"):
            assert scraped(ragmon.url, "ragmon_index_drift_documents", kind=kind, **where) == 0
        assert scraped(ragmon.url, "ragmon_index_drift_unjudged_documents", reason="index_acl_unknown", **where) == 1
        assert scraped(ragmon.url, "ragmon_events_total", type="trace") == 0

        # the status page names the document and the rule
        page = httpx.get(f"{ragmon.url}/", timeout=10).text
        assert "revocations pending" in page and "board-minutes" in page
        assert "revocation pending: the index still lets read group:staff, whom the source no longer allows" in page

        # `ragmon catalog reconcile` on the same database: the finding, exit 1
        reconciled = subprocess.run([sys.executable, "-m", "ragmon", "catalog", "reconcile", "-o", "json"],
                                    env=dict(ragmon.env), capture_output=True, text=True, timeout=120)
        assert reconciled.returncode == 1, reconciled.stdout + reconciled.stderr
        findings = json.loads(reconciled.stdout)["findings"]
        assert [(f["tenant"], f["index"], f["kind"], f["doc_id"]) for f in findings] == [
            ("acme", "handbook", "acl_narrower", "board-minutes")]
        assert "group:staff" in findings[0]["rule"]

        # the rule path: Prometheus scrapes the gauge and its Alertmanager gets the alert
        pending = has_alert(REVOCATION_PENDING, severity="critical", job="ragmon", **where)
        _, body = receiver.wait_for("/am-rules", pending, timeout=WAIT_SECONDS)
        [alert] = [a for a in body["alerts"] if a["labels"]["alertname"] == REVOCATION_PENDING]
        assert alert["annotations"]["runbook_url"].endswith("#ragmonrevocationpending")

        # the index takes the narrowed ACL in: nothing is pending any more
        caught_up = {"type": "index", "index": "handbook", "doc_id": "board-minutes", "version": "v1",
                     "indexed_at": time.time(), "acl": ["group:board"]}
        assert httpx.post(f"{ragmon.url}/v1/events", json=[caught_up], timeout=10).json()["rejected"] == 0
        wait_for(ragmon.url, "ragmon_index_drift_documents", 0, kind="acl_narrower", **where)
        assert scraped(ragmon.url, "ragmon_index_drift_oldest_seconds", kind="acl_narrower", **where) == 0
