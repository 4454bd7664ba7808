"""The scheduled jobs driven with a controllable clock: weekly pull, staleness scan, canary probes,
retention; their triggers, logging and metrics; the scheduler lock on a file."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from zoneinfo import ZoneInfo

import httpx
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from ragmon.alerts.dispatch import AlertDispatcher
from ragmon.alerts.notifiers import WebhookNotifier
from ragmon.alerts.state import AlertBook
from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.jobs import CANARY_PROBES, RETENTION, STALENESS_SCAN, WEEKLY_PULL
from ragmon.monitor.app.leader import FileLock, leader_lock
from ragmon.monitor.app.scheduler import build_scheduler, triggers
from ragmon.monitor.app.wiring import build_jobs, build_runtime
from ragmon.monitor.config.scheduling import ProbeConfig, SchedulerConfig
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.findings.store import FindingQuery
from ragmon.monitor.labeling.sample_store import NewSample, SampleStore
from ragmon.monitor.labeling.weeks import previous_week_of

BERLIN = ZoneInfo("Europe/Berlin")


class Clock:
    def __init__(self, when: datetime) -> None:
        self.now = when.timestamp()

    def __call__(self) -> float:
        return self.now


def runtime_for(tmp_path, clock, **env):
    environ = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_SCHEDULER__BATCH_DIR": str(tmp_path / "batches"), **env}
    return build_runtime(load_settings(environ=environ), clock=clock, registry=CollectorRegistry())


def sample(trace_id: str, week: str, when: float, tenant: str = "acme") -> NewSample:
    return NewSample(trace_id, tenant, week, {"random"}, "dev", "f" + trace_id, when,
                     {"trace_id": trace_id, "query": "q", "index": {"name": "handbook"}, "tenant": tenant})


class Hook:
    def __init__(self) -> None:
        self.bodies: list = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200)


def with_push(runtime, clock) -> Hook:
    hook = Hook()
    runtime.alerts = AlertDispatcher(AlertBook(runtime.settings.alerts, lambda value: value), [
        WebhookNotifier("http://hooks.test/", 5.0, 3600.0, transport=httpx.MockTransport(hook))], clock)
    return hook


def test_the_weekly_pull_writes_last_weeks_batch_and_counts_its_run(tmp_path, caplog):
    clock = Clock(datetime(2026, 11, 30, 3, 0, tzinfo=BERLIN))  # Monday of 2026-W49
    runtime = runtime_for(tmp_path, clock)
    runtime.samples.upsert([sample("t1", "2026-W48", clock.now - 86400), sample("t2", "2026-W48", clock.now - 2e5),
                            sample("t3", "2026-W49", clock.now)])
    with caplog.at_level(logging.INFO, logger="ragmon.monitor.app.jobs"):
        assert build_jobs(runtime).run(WEEKLY_PULL)
    cases = (tmp_path / "batches" / "2026-W48" / "cases.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in cases) == ["t1", "t2"]
    assert runtime.samples.counts_by_status() == {"exported": 2, "queued": 1}
    assert "job weekly-pull done" in caplog.text and "2026-W48: 2 cases" in caplog.text
    assert metric_sum(runtime.registry, "ragmon_job_runs_total", scheduled_job=WEEKLY_PULL, outcome="ok") == 1
    last_success = metric_sum(runtime.registry, "ragmon_job_last_success_timestamp_seconds", scheduled_job=WEEKLY_PULL)
    assert last_success == clock.now
    runtime.close()


def test_the_pulled_week_is_the_one_before_in_the_configured_zone():
    sunday_night_utc = datetime(2026, 11, 29, 23, 30, tzinfo=ZoneInfo("UTC")).timestamp()  # Monday 00:30 in Berlin
    assert previous_week_of(sunday_night_utc, "Europe/Berlin") == "2026-W48"
    assert previous_week_of(sunday_night_utc, "UTC") == "2026-W47"
    assert previous_week_of(datetime(2027, 1, 4, 3, tzinfo=BERLIN).timestamp(), "Europe/Berlin") == "2026-W53"


def test_a_failing_job_is_logged_and_counted_and_does_not_raise(tmp_path, caplog):
    clock = Clock(datetime(2026, 11, 30, 3, tzinfo=BERLIN))
    runtime = runtime_for(tmp_path, clock)
    (tmp_path / "batches").write_text("a file where a directory must go")
    with caplog.at_level(logging.ERROR, logger="ragmon.monitor.app.jobs"):
        assert not build_jobs(runtime).run(WEEKLY_PULL)
    assert "job weekly-pull failed" in caplog.text
    assert metric_sum(runtime.registry, "ragmon_job_runs_total", scheduled_job=WEEKLY_PULL, outcome="failed") == 1
    assert metric_sum(runtime.registry, "ragmon_job_last_success_timestamp_seconds", scheduled_job=WEEKLY_PULL) == 0
    runtime.close()


def test_retention_deletes_old_unlabeled_samples_old_dead_letters_and_old_findings(tmp_path):
    clock = Clock(datetime(2026, 11, 30, 4, tzinfo=BERLIN))
    runtime = runtime_for(tmp_path, clock, RAGMON_SCHEDULER__SAMPLE_RETENTION_DAYS="30",
                          RAGMON_SCHEDULER__DEAD_LETTER_RETENTION_DAYS="7", RAGMON_FINDINGS__RETENTION_DAYS="14")

    def abstained(trace_id: str, days_ago: float) -> None:  # a trace with one finding, stored that long ago
        at = clock.now
        clock.now = at - days_ago * 86400
        runtime.pipeline.process([RawRecord("file", json.dumps({
            "type": "trace", "trace_id": trace_id, "time": clock.now, "tenant": "acme", "index": {"name": "hr"},
            "query": "q", "answer": {"text": "-", "abstained": True}}).encode(), privilege=Privilege.TRUSTED)])
        clock.now = at

    abstained("old-finding", 20)
    abstained("new-finding", 1)
    old = SampleStore(runtime.engine, clock=lambda: clock.now - 40 * 86400)
    old.upsert([sample("old-queued", "2026-W40", 0), sample("old-labeled", "2026-W40", 0),
                sample("old-exported", "2026-W40", 0)])
    old.mark_labeled(["old-labeled"])
    old.mark_exported(["old-exported"])
    runtime.samples.upsert([sample("new", "2026-W48", 0)])
    letters = runtime.dead_letters
    real = clock.now
    clock.now = real - 10 * 86400
    runtime.pipeline.process([RawRecord("file", b"{broken")])
    clock.now = real - 86400
    runtime.pipeline.process([RawRecord("file", b"[also broken")])
    clock.now = real
    assert build_jobs(runtime).run(RETENTION)
    assert sorted(s.trace_id for s in runtime.samples.find()) == ["new", "old-exported", "old-labeled"]
    lines = [json.loads(line) for line in letters.path.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["reason"]
    assert letters.path.stat().st_mode & 0o777 == 0o600  # the rewrite kept the file private
    with letters.path.open("ab") as handle:
        handle.write(b'{"torn write\n')  # an unreadable line is kept, and retention still works
    assert build_jobs(runtime).run(RETENTION)
    assert letters.path.read_bytes().endswith(b'{"torn write\n')
    runtime.pipeline.process([RawRecord("file", b"{after the prune")])  # the sink still appends afterwards
    assert len(letters.path.read_text().splitlines()) == 3
    assert metric_sum(runtime.registry, "ragmon_retention_deleted_total", kind="samples") == 1
    assert metric_sum(runtime.registry, "ragmon_retention_deleted_total", kind="dead_letters") == 1
    assert metric_sum(runtime.registry, "ragmon_retention_deleted_total", kind="findings") == 1
    assert [row.trace_id for row in runtime.findings.find(FindingQuery())] == ["new-finding"]
    runtime.close()


def catalog_events(now: float, indexed_version: str) -> list[bytes]:
    events = [{"type": "document", "doc_id": "d1", "version": "v1", "modified_at": now - 5 * 86400},
              {"type": "index", "index": "handbook", "doc_id": "d1", "version": indexed_version,
               "indexed_at": now - 86400 if indexed_version == "v1" else now},
              {"type": "document", "doc_id": "d1", "version": "v2", "modified_at": now - 2 * 86400}]
    return [msgspec.json.encode(e) for e in events]


def test_the_staleness_scan_raises_and_resolves_the_pushed_alert(tmp_path):
    clock = Clock(datetime(2026, 11, 30, 12, tzinfo=BERLIN))
    runtime = runtime_for(tmp_path, clock)
    hook = with_push(runtime, clock)
    runtime.pipeline.process([RawRecord("file", e, privilege=Privilege.TRUSTED)
                              for e in catalog_events(clock.now, "v1")])
    jobs = build_jobs(runtime)
    assert jobs.run(STALENESS_SCAN)
    runtime.alerts.run_once()
    [alert] = hook.bodies[-1]["alerts"]
    assert alert["labels"]["alertname"] == "RagmonIndexStale" and alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["doc_ids"] == "d1" and float(alert["annotations"]["max_staleness_seconds"]) == 172800
    clock.now += 60
    runtime.pipeline.process([RawRecord("file", msgspec.json.encode(
        {"type": "index", "index": "handbook", "doc_id": "d1", "version": "v2", "indexed_at": clock.now}),
        privilege=Privilege.TRUSTED)])
    jobs.run(STALENESS_SCAN)
    runtime.alerts.run_once()
    assert hook.bodies[-1]["alerts"][0]["status"] == "resolved"
    runtime.close()


def test_a_scheduler_of_its_own_reads_the_catalog_the_collectors_write(tmp_path):
    clock = Clock(datetime(2026, 11, 30, 12, tzinfo=BERLIN))
    collector = runtime_for(tmp_path, clock)
    scheduler = runtime_for(tmp_path, clock)
    hook = with_push(scheduler, clock)
    collector.pipeline.process([RawRecord("file", e, privilege=Privilege.TRUSTED)
                                for e in catalog_events(clock.now, "v1")])
    assert build_jobs(scheduler, standalone=True).run(STALENESS_SCAN)
    scheduler.alerts.run_once()
    assert hook.bodies[-1]["alerts"][0]["labels"]["alertname"] == "RagmonIndexStale"
    collector.close()
    scheduler.close()


def leaky(query: str, identity: dict, index: str | None) -> list[str]:
    """A retrieval that shows globex's payroll to mallory, and fails for one query."""
    if query == "explode":
        raise TimeoutError("backend timed out")
    documents = ["handbook-1", "handbook-2"]
    if identity["id"] == "mallory":
        documents.append("globex-payroll-2026")
    return documents


PROBES = [
    {"name": "staff-sees-handbook", "query": "leave policy", "identity": {"id": "alice", "groups": ["staff"],
     "tenant": "acme"}, "must_retrieve": ["handbook-*"], "must_not_retrieve": ["globex-*"]},
    {"name": "mallory-no-globex", "query": "salaries", "identity": {"id": "mallory", "tenant": "acme"},
     "must_not_retrieve": ["globex-*"]},
    {"name": "finds-the-faq", "query": "faq", "identity": {"id": "alice", "tenant": "acme"},
     "must_retrieve": ["faq-*"]},
    {"name": "broken", "query": "explode", "identity": {"id": "alice", "tenant": "acme"}},
]


def test_probes_find_the_leak_the_miss_and_the_error_into_metrics_and_alerts(tmp_path, caplog):
    clock = Clock(datetime(2026, 11, 30, 12, tzinfo=BERLIN))
    runtime = runtime_for(tmp_path, clock, RAGMON_PROBES__CALLABLE="tests.monitor.test_jobs:leaky",
                          RAGMON_PROBES__PROBES=json.dumps(PROBES))
    hook = with_push(runtime, clock)
    jobs = build_jobs(runtime)
    with caplog.at_level(logging.INFO):
        assert jobs.run(CANARY_PROBES)
    verdicts = {r.name: r.verdict for r in jobs.probe_once()}
    assert verdicts == {"staff-sees-handbook": "ok", "mallory-no-globex": "leak", "finds-the-faq": "miss",
                        "broken": "error"}
    assert "3 failed" in caplog.text and "raised TimeoutError" in caplog.text
    assert "salaries" not in caplog.text  # probe queries stay out of the logs
    assert metric_sum(runtime.registry, "ragmon_probe_leaks_total", probe="mallory-no-globex") == 2
    assert metric_sum(runtime.registry, "ragmon_probe_failures_total") == 6
    runtime.alerts.run_once()
    [alert] = hook.bodies[-1]["alerts"]
    assert alert["labels"] == {"alertname": "RagmonProbeLeak", "severity": "critical", "probe": "mallory-no-globex"}
    assert alert["annotations"]["doc_ids"] == "globex-payroll-2026"
    runtime.close()


def test_probe_config_is_checked():
    with pytest.raises(ValueError, match="letters, digits"):
        ProbeConfig(name="has spaces", query="q", identity={"id": "a"})
    from ragmon.monitor.config.settings import ConfigError
    with pytest.raises(ConfigError, match="neither url nor callable"):
        load_settings(environ={"RAGMON_PROBES__PROBES": json.dumps(PROBES[:1])})
    with pytest.raises(ConfigError, match="weekly_pull_day"):
        load_settings(environ={"RAGMON_SCHEDULER__WEEKLY_PULL_DAY": "1"})
    with pytest.raises(ConfigError, match="HH:MM"):
        load_settings(environ={"RAGMON_SCHEDULER__RETENTION_TIME": "25:00"})


def test_triggers_fire_at_the_configured_times_and_the_jobs_coalesce(tmp_path):
    config = SchedulerConfig(time_zone="Europe/Berlin", weekly_pull_day="mon", weekly_pull_time="03:00",
                             retention_time="04:30", staleness_interval_seconds=60, probe_interval_seconds=300)
    made = triggers(config, probes=True)
    wednesday = datetime(2026, 12, 2, 10, 0, tzinfo=BERLIN)
    assert made[WEEKLY_PULL].get_next_fire_time(None, wednesday) == datetime(2026, 12, 7, 3, 0, tzinfo=BERLIN)
    assert made[RETENTION].get_next_fire_time(None, wednesday) == datetime(2026, 12, 3, 4, 30, tzinfo=BERLIN)
    # across the change to summer time the pull stays at 03:00 local time
    march = datetime(2027, 3, 24, 12, tzinfo=BERLIN)
    assert made[WEEKLY_PULL].get_next_fire_time(None, march).utcoffset().total_seconds() == 7200
    assert CANARY_PROBES not in triggers(config, probes=False)
    clock = Clock(wednesday)
    runtime = runtime_for(tmp_path, clock)
    scheduler = build_scheduler(config, build_jobs(runtime), probes=True)
    scheduler.start(paused=True)  # job defaults apply once started; paused: nothing runs
    try:
        jobs = {job.id: job for job in scheduler.get_jobs()}
        assert set(jobs) == {WEEKLY_PULL, STALENESS_SCAN, RETENTION, CANARY_PROBES}
        assert all(job.coalesce and job.max_instances == 1 and job.misfire_grace_time == 3600
                   for job in jobs.values())
    finally:
        scheduler.shutdown(wait=False)
        runtime.close()


def test_one_file_lock_holder_at_a_time(tmp_path):
    first = leader_lock(f"sqlite:///{tmp_path / 'ragmon.db'}")
    second = FileLock(tmp_path / "ragmon.db.scheduler.lock")
    assert first.try_acquire() and first.still_held()
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire() and not first.try_acquire()
    second.release()
