"""Direct push of leak and staleness alerts, with a fake clock and httpx mock transports: one alert
per tenant and index, bounded evidence, resolution, repeats, back-off, and a notifier that is down
or hangs never losing the state nor holding up the pipeline."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from ragmon.alerts.dispatch import AlertDispatcher
from ragmon.alerts.notifiers import AlertmanagerNotifier, WebhookNotifier
from ragmon.alerts.sink import AlertSink
from ragmon.alerts.state import AlertBook
from ragmon.monitor.config.alerting import AlertsConfig
from ragmon.monitor.core.model import IndexRef, TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.signals.results import AccessFindings
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

SHOWN = Redactor(RedactionConfig(caller_key="alerts-test-key-0123456789")).shown_id


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Receiver:
    """A mock HTTP target that records JSON bodies and answers with the queued statuses (then 200)."""

    def __init__(self, *statuses: int) -> None:
        self.bodies: list = []
        self.statuses = list(statuses)
        self.calls: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(time.monotonic())
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.bodies.append(json.loads(request.content))
        return httpx.Response(status)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def dispatcher(clock, *notifiers, **config) -> AlertDispatcher:
    return AlertDispatcher(AlertBook(AlertsConfig(**config), SHOWN), notifiers, clock)


def webhook(receiver: Receiver, repeat: float = 3600.0) -> WebhookNotifier:
    return WebhookNotifier("http://hooks.test/ragmon", 5.0, repeat, token="s3cret", transport=receiver.transport)


def test_leaks_in_one_tenant_and_index_are_one_alert_with_bounded_evidence():
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook))
    for n in range(15):
        d.book.leak("acme", "hr", 2, f"trace-{n}", [f"doc-{n}", "doc-0"], clock.now)
    d.book.leak("globex", "hr", 1, "trace-x", ["doc-x"], clock.now)
    d.run_once()
    d.run_once()  # nothing new: nothing sent again
    assert len(hook.bodies) == 1
    alerts = {a["labels"]["tenant"]: a for a in hook.bodies[0]["alerts"]}
    acme = alerts["acme"]
    assert acme["status"] == "firing" and acme["labels"] == {"alertname": "RagmonPermissionLeakContext",
                                                             "severity": "critical", "tenant": "acme", "index": "hr"}
    assert acme["annotations"]["count"] == "30"
    assert acme["annotations"]["trace_ids"].split(",") == [f"trace-{n}" for n in range(10)]
    assert acme["annotations"]["doc_ids"].split(",") == ["doc-0", *(f"doc-{n}" for n in range(1, 10))]
    assert acme["annotations"]["runbook_url"].endswith("#ragmonpermissionleakcontext")
    assert "acme/hr" in acme["annotations"]["summary"]


def test_a_leak_alert_resolves_after_a_quiet_period_and_is_then_forgotten():
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook), leak_resolve_minutes=15)
    d.book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    d.run_once()
    clock.now += 10 * 60
    d.book.leak("acme", "hr", 1, "t2", ["d1"], clock.now)  # still leaking: the quiet period restarts
    clock.now += 15 * 60 - 1
    d.run_once()
    assert len(hook.bodies) == 1
    clock.now += 1  # quiet for exactly leak_resolve_minutes
    d.run_once()
    [resolved] = hook.bodies[1]["alerts"]
    assert hook.bodies[1]["status"] == "resolved" and resolved["status"] == "resolved"
    assert resolved["annotations"]["count"] == "2" and resolved["endsAt"] != "0001-01-01T00:00:00Z"
    assert d.book.alerts() == []
    d.book.leak("acme", "hr", 1, "t3", ["d1"], clock.now)  # a new leak later is a new alert
    d.run_once()
    [again] = hook.bodies[2]["alerts"]
    assert again["status"] == "firing" and again["annotations"]["count"] == "1"


def test_a_leak_while_the_resolved_alert_is_still_held_fires_again_as_a_new_alert():
    """A notifier that is down keeps a resolved leak alert in the book; a new leak meanwhile is a new
    alert (its own start, firing, its own evidence), never folded into the resolved one and lost."""
    clock, down, hook = Clock(), Receiver(), Receiver()
    flaky = WebhookNotifier("http://down.test/", 5.0, 3600.0, transport=down.transport)
    flaky.name = "down"
    d = dispatcher(clock, flaky, webhook(hook), leak_resolve_minutes=1)
    first_start = clock.now
    d.book.leak("acme", "hr", 3, "t1", ["d1"], clock.now)
    d.run_once()
    down.statuses = [500, 500, 500, 500]
    clock.now += 120
    d.run_once()
    [held] = d.book.alerts()
    assert held.resolved and hook.bodies[-1]["status"] == "resolved"  # still owed to "down"
    clock.now += 1
    assert d.book.leak("acme", "hr", 1, "t2", ["d2"], clock.now) is True
    [again] = d.book.alerts()
    assert not again.resolved and again.starts_at == clock.now != first_start
    assert (again.count, again.trace_ids, again.doc_ids) == (1, ("t2",), ("d2",))
    d.run_once()
    [sent] = hook.bodies[-1]["alerts"]
    assert sent["status"] == "firing" and sent["annotations"]["trace_ids"] == "t2"


def test_a_firing_alert_is_repeated_after_the_interval_and_alertmanager_gets_it_more_often():
    clock, hook, manager = Clock(), Receiver(), Receiver()
    am = AlertmanagerNotifier("http://am.test:9093", 5.0, 60.0, transport=manager.transport)
    d = dispatcher(clock, webhook(hook, repeat=3600.0), am, leak_resolve_minutes=1000)
    d.book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    for _ in range(10):
        d.run_once()
        clock.now += 30
    assert len(hook.bodies) == 1 and len(manager.bodies) == 5
    [alert] = manager.bodies[0]
    assert alert["labels"]["alertname"] == "RagmonPermissionLeakContext"
    assert alert["endsAt"] > alert["startsAt"]  # ahead, so Alertmanager resolves it if ragmon goes away
    clock.now += 3600
    d.run_once()
    assert len(hook.bodies) == 2


def test_a_notifier_that_is_down_keeps_the_alert_and_backs_off_without_holding_up_the_other():
    clock, down, hook = Clock(), Receiver(503, 503, 503), Receiver()
    flaky = WebhookNotifier("http://down.test/", 5.0, 3600.0, transport=down.transport)
    flaky.name = "down"
    d = dispatcher(clock, flaky, webhook(hook))
    d.book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    d.run_once()
    assert len(hook.bodies) == 1 and down.bodies == []
    for _ in range(40):  # 20 s, tried again after 1, 2 and 4 s of back-off
        d.run_once()
        clock.now += 0.5
    assert len(down.bodies) == 1 and down.bodies[0]["alerts"][0]["annotations"]["trace_ids"] == "t1"
    assert len(down.calls) == 4  # three refusals, then the delivery
    assert len(hook.bodies) == 1


def test_resolution_waits_for_every_notifier_before_the_alert_is_forgotten():
    clock, down, hook = Clock(), Receiver(), Receiver()
    flaky = WebhookNotifier("http://down.test/", 5.0, 3600.0, transport=down.transport)
    flaky.name = "down"
    d = dispatcher(clock, flaky, webhook(hook), leak_resolve_minutes=1)
    d.book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    d.run_once()
    down.statuses = [500]
    clock.now += 120
    d.run_once()
    assert hook.bodies[-1]["status"] == "resolved" and len(d.book.alerts()) == 1  # still owed to "down"
    clock.now += 2
    d.run_once()
    assert down.bodies[-1]["status"] == "resolved" and d.book.alerts() == []


def test_staleness_crossings_raise_warning_then_critical_and_resolve_when_the_index_catches_up():
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook))

    def scan(health):
        clock.now += 60
        d.scan_staleness(health, clock.now)
        d.run_once()

    scan({"hr": (0.0, 0, [])})
    assert hook.bodies == []
    scan({"hr": (25 * 3600.0, 3, ["d1", "d2", "d3"])})
    [warning] = hook.bodies[-1]["alerts"]
    assert warning["labels"] == {"alertname": "RagmonIndexStale", "severity": "warning", "index": "hr"}
    assert warning["annotations"]["doc_ids"] == "d1,d2,d3" and warning["annotations"]["count"] == "3"
    assert warning["annotations"]["max_staleness_seconds"] == "90000"
    scan({"hr": (73 * 3600.0, 3, ["d1"])})
    assert [a["labels"]["severity"] for a in hook.bodies[-1]["alerts"]] == ["critical"]
    scan({"hr": (0.0, 0, [])})
    assert sorted((a["labels"]["severity"], a["status"]) for a in hook.bodies[-1]["alerts"]) == [
        ("critical", "resolved"), ("warning", "resolved")]
    assert d.book.alerts() == []
    scan({"kb": (30 * 3600.0, 1, ["x"])})
    scan({})  # an index gone from the catalog is no longer stale
    assert hook.bodies[-1]["alerts"][0]["status"] == "resolved"


def test_staleness_fires_strictly_above_each_threshold_and_every_start_or_resolution_is_news():
    clock = Clock()
    book = AlertBook(AlertsConfig(stale_warning_hours=24), SHOWN)
    assert not book.staleness({"hr": (24 * 3600.0, 1, ["d1"])}, clock.now)
    assert book.alerts() == []
    assert book.staleness({"hr": (24 * 3600.0 + 1, 1, ["d1"])}, clock.now + 60)
    [warning] = book.alerts()
    assert dict(warning.labels)["severity"] == "warning"
    assert not book.staleness({"hr": (24 * 3600.0 + 61, 1, ["d1"])}, clock.now + 120)  # the same alert
    assert not book.staleness({"hr": (72 * 3600.0, 1, ["d1"])}, clock.now + 180)  # critical is strictly above too
    assert book.staleness({"hr": (72 * 3600.0 + 1, 1, ["d1"])}, clock.now + 240)
    assert sorted(dict(a.labels)["severity"] for a in book.alerts()) == ["critical", "warning"]
    assert book.staleness({"hr": (3600.0, 1, ["d1"])}, clock.now + 300)  # both resolve: news too
    assert all(a.resolved for a in book.alerts())
    assert book.staleness({"kb": (25 * 3600.0, 1, ["x"])}, clock.now + 360)
    assert book.staleness({}, clock.now + 420)  # its index gone from the catalog: resolved, news


def test_a_probe_leak_fires_until_a_clean_run():
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook))
    assert d.book.probe("hr-payroll", "acme", ["payroll-2026"], clock.now)
    d.run_once()
    [alert] = hook.bodies[-1]["alerts"]
    assert alert["labels"] == {"alertname": "RagmonProbeLeak", "severity": "critical", "probe": "hr-payroll"}
    assert alert["annotations"]["doc_ids"] == "payroll-2026" and alert["annotations"]["tenant"] == "acme"
    assert alert["annotations"]["summary"] == ("Canary probe hr-payroll retrieved documents its test identity "
                                               "may not read")
    assert alert["annotations"]["description"] == ("A configured test identity got documents it must never see: "
                                                   "the permission filter of the RAG system leaks.")
    assert not d.book.probe("hr-payroll", "acme", ["payroll-2026"], clock.now + 300)  # still the same alert
    assert d.book.probe("hr-payroll", "acme", [], clock.now + 600)
    d.run_once()
    assert hook.bodies[-1]["alerts"][0]["status"] == "resolved"
    assert not d.book.probe("hr-payroll", "acme", [], clock.now + 900)  # clean again: nothing new to deliver


def test_a_process_that_stops_scheduling_resolves_the_alerts_only_scans_keep():
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook))
    d.scan_staleness({"hr": (30 * 3600.0, 1, ["d1"])}, clock.now)
    d.book.probe("p", "acme", ["x"], clock.now)
    d.book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    d.run_once()
    assert d.book.resolve_scanned(clock.now + 5)
    d.run_once()
    resolved = {a["labels"]["alertname"]: a["status"] for a in hook.bodies[-1]["alerts"]}
    assert resolved == {"RagmonIndexStale": "resolved", "RagmonProbeLeak": "resolved"}
    assert [a.name for a in d.book.alerts()] == ["RagmonPermissionLeakContext"]  # leaks are the collectors'
    assert not d.book.resolve_scanned(clock.now + 10)  # nothing left to resolve: nothing to deliver


def test_only_a_resolved_alert_is_forgotten():
    clock = Clock()
    book = AlertBook(AlertsConfig(), SHOWN)
    book.leak("acme", "hr", 1, "t1", ["d1"], clock.now)
    [firing] = book.alerts()
    book.forget(firing.fingerprint, clock.now + 60)  # a dispatcher's stale view: it still fires
    book.forget("0" * 16, clock.now + 60)  # one forgotten already
    assert book.alerts() == [firing]
    book.expire(clock.now + 3600)
    book.forget(firing.fingerprint, clock.now + 3600)
    assert book.alerts() == []


def test_alerts_beyond_the_bound_are_counted_not_kept(caplog):
    clock = Clock()
    d = dispatcher(clock, webhook(Receiver()), max_active=3)
    for n in range(5):
        d.book.leak(f"tenant-{n}", "hr", 1, "t", [], clock.now)
    assert len(d.book.alerts()) == 3 and d.book.dropped == 2
    assert caplog.records[0].getMessage() == ("alert RagmonPermissionLeakContext not pushed: 3 alerts already "
                                              "firing (alerts.max_active); 1 dropped so far")
    assert not d.book.probe("p", "acme", ["x"], clock.now)  # not kept: nothing to deliver
    assert not d.book.leak("tenant-9", "hr", 1, "t", [], clock.now)
    assert d.book.dropped == 4


def trace_with_leak(marker: str) -> Observation:
    event = TraceEvent(trace_id="t-leak", time=1.0, query=f"{marker} query", index=IndexRef("hr"), tenant="acme")
    signals = type("S", (), {"access": AccessFindings(candidates=2, context=1, doc_ids=["doc-filtered", "doc-secret"],
                                                      context_doc_ids=["doc-secret"])})()
    return Observation(event, "http", time.time(), signals)


def test_a_hanging_notifier_never_holds_up_the_pipeline():
    release = threading.Event()

    def hang(request):
        release.wait(10)
        return httpx.Response(200)

    notifier = WebhookNotifier("http://hang.test/", 30.0, 3600.0, transport=httpx.MockTransport(hang))
    d = AlertDispatcher(AlertBook(AlertsConfig(), SHOWN), [notifier], tick=0.05)
    d.start()
    sink = AlertSink(d)
    try:
        started = time.monotonic()
        for _ in range(200):
            sink.consume(trace_with_leak("x"))
        assert time.monotonic() - started < 2.0  # recording only; delivery hangs on its own thread
        assert d.book.alerts()[0].count == 200
    finally:
        release.set()
        sink.shutdown()


@pytest.mark.parametrize("config", [{}, {"dashboard_url": "https://grafana.test/d/ragmon"}])
def test_payloads_hold_counts_ids_and_links_and_nothing_else(config):
    clock, hook, manager = Clock(time.time()), Receiver(), Receiver()
    am = AlertmanagerNotifier("http://am.test:9093/", 5.0, 60.0, transport=manager.transport)
    d = dispatcher(clock, webhook(hook), am, **config)
    sink = AlertSink(d)
    sink.consume(trace_with_leak("MARKER-QUERY"))
    d.run_once()
    for body in (hook.bodies[0]["alerts"][0], manager.bodies[0][0]):
        assert set(body["labels"]) == {"alertname", "severity", "tenant", "index"}
        expected = {"summary", "description", "runbook_url", "count", "trace_ids", "doc_ids", "findings_query",
                    "findings_command"}
        assert set(body["annotations"]) == expected | ({"dashboard_url"} if config else set())
        assert "MARKER" not in json.dumps(body)
        tenant, index = body["labels"]["tenant"], body["labels"]["index"]
        assert body["annotations"]["findings_query"] == (
            f"/api/v1/findings?signal=permission_violation&tenant={tenant}&index={index}")
        assert body["annotations"]["doc_ids"] == "doc-secret"  # what reached the model, not what was filtered


def test_pushed_alerts_carry_the_deployment_labels_of_the_rules_alerts():
    """With alerts.push_labels naming the deployment, a pushed alert has exactly the label names of
    the alert its rule raises (the rule's grouping and severity), so Alertmanager merges the two."""
    from ragmon.alerts.rules import alert_rules
    from tests.alerts.test_rules import AGGREGATION

    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook), push_labels={"namespace": "prod", "job": "ragmon"})
    d.book.leak("acme", "hr", 1, "trace-1", ["doc-1"], clock.now)
    d.scan_staleness({"hr": (80 * 3600.0, 1, ["doc-2"])}, clock.now)
    d.book.probe("hr-payroll", "acme", ["payroll-2026"], clock.now)
    d.run_once()
    pushed = {(a["labels"]["alertname"], a["labels"]["severity"]): a["labels"] for a in hook.bodies[-1]["alerts"]}
    assert pushed[("RagmonPermissionLeakContext", "critical")] == {
        "alertname": "RagmonPermissionLeakContext", "severity": "critical", "tenant": "acme", "index": "hr",
        "namespace": "prod", "job": "ragmon"}
    assert len(pushed) == 4  # leak, staleness warning and critical, probe leak
    for rule in alert_rules(AlertsConfig()):
        if (rule.name, rule.severity) in pushed:
            grouping = {label.strip() for match in AGGREGATION.finditer(rule.expr)
                        for label in (match.group(2) or "").split(",") if label.strip()}
            assert pushed[(rule.name, rule.severity)].keys() == grouping | {"alertname", "severity"}
    # the same leak again is the same alert: the deployment labels are part of its identity
    assert not d.book.leak("acme", "hr", 1, "trace-2", ["doc-1"], clock.now + 1)


@pytest.mark.parametrize("labels", [{"alertname": "x"}, {"tenant": "x"}, {"__name__": "x"}, {"bad-name": "x"},
                                    {"job": ""}])
def test_push_labels_refuse_what_an_alert_sets_itself_and_invalid_names(labels):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="push_labels"):
        AlertsConfig(push_labels=labels)


def test_every_id_a_sender_chose_is_pushed_by_its_shown_id():
    """Tenant, index, trace and document ids holding an e-mail address or a key are pushed by their
    shown ids (labels, evidence, summary, links), each applied once; ids that only redact alike
    stay apart, and the same private index scanned again is the same alert."""
    clock, hook = Clock(), Receiver()
    d = dispatcher(clock, webhook(hook))
    tenant, index = "jane.doe@example.com", "hr AKIAIOSFODNN7EXAMPLE"
    trace, doc = "trace of jane.doe@example.com", "doc AKIAIOSFODNN7EXAMPLE"
    d.book.leak(tenant, index, 1, trace, [doc], clock.now)
    d.book.leak("collide-alice@example.com", index, 1, "t-2", ["d-2"], clock.now)
    d.book.leak("collide-bob@example.org", index, 1, "t-3", ["d-3"], clock.now)
    d.scan_staleness({index: (30 * 3600.0, 1, [doc])}, clock.now)
    d.book.probe("hr-payroll", tenant, [doc, *(f"d-{n}" for n in range(11))], clock.now)
    d.run_once()
    sent = hook.bodies[-1]["alerts"]
    assert SHOWN(tenant) != tenant and SHOWN(index) != index and SHOWN(trace) != trace and SHOWN(doc) != doc
    leaks = {a["labels"]["tenant"]: a for a in sent if a["labels"]["alertname"] == "RagmonPermissionLeakContext"}
    assert set(leaks) == {SHOWN(tenant), SHOWN("collide-alice@example.com"), SHOWN("collide-bob@example.org")}
    leak = leaks[SHOWN(tenant)]
    assert leak["labels"]["index"] == SHOWN(index)
    assert leak["annotations"]["trace_ids"] == SHOWN(trace) and leak["annotations"]["doc_ids"] == SHOWN(doc)
    assert leak["annotations"]["summary"].endswith(f" in {SHOWN(tenant)}/{SHOWN(index)}")
    assert leak["annotations"]["findings_command"] == (
        f"ragmon findings list --signal permission_violation --tenant '{SHOWN(tenant)}' --index '{SHOWN(index)}' "
        "--since 2h")
    [stale] = [a for a in sent if a["labels"]["alertname"] == "RagmonIndexStale"]
    assert stale["labels"]["index"] == SHOWN(index) and stale["annotations"]["doc_ids"] == SHOWN(doc)
    assert SHOWN(index) in stale["annotations"]["summary"]
    [probe] = [a for a in sent if a["labels"]["alertname"] == "RagmonProbeLeak"]
    assert probe["annotations"]["tenant"] == SHOWN(tenant) and probe["annotations"]["count"] == "12"
    assert probe["annotations"]["doc_ids"].split(",") == [SHOWN(doc), *(f"d-{n}" for n in range(9))]
    for private in ("jane", "example.", "AKIA", "alice", "bob"):
        assert private not in json.dumps(hook.bodies)
    clock.now += 60
    d.scan_staleness({index: (30 * 3600.0 + 60, 1, [doc])}, clock.now)
    assert not d.book.leak(tenant, index, 1, "t-4", [], clock.now)
    d.run_once()
    assert not any(a.resolved for a in d.book.alerts())
