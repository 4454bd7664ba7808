"""The scheduler against real parts: two `ragmon scheduler` processes on the real PostgreSQL, of
which only the lock holder runs jobs, and the other takes over when it is killed; canary probes
against a retrieval HTTP server written for the test that leaks one tenant's document."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.leader import PostgresLock
from ragmon.monitor.storage.store import make_engine, upgrade
from tests.alerts.webhook_receiver import WebhookReceiver, has_alert
from tests.ragmon_process import RagmonServer
from tests.ragmon_process import scraped as metric

pytestmark = pytest.mark.integration


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.2)


def test_only_one_scheduler_runs_jobs_and_the_other_takes_over(postgres, tmp_path):
    url = postgres.create_database(f"sched_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))
    env = {"RAGMON_DATABASE__URL": url, "RAGMON_REDACTION__CALLER_KEY": "k" * 32,
           "RAGMON_SCHEDULER__STALENESS_INTERVAL_SECONDS": "0.5", "RAGMON_SCHEDULER__LOCK_POLL_SECONDS": "0.5"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = RagmonServer(tmp_path / "a", "scheduler", **env).start()
    second = RagmonServer(tmp_path / "b", "scheduler", **env).start()
    try:
        servers = (first, second)
        wait_until(lambda: sum(metric(s.url, "ragmon_scheduler_leader") for s in servers) == 1, 30, "one leader")
        leader, standby = sorted(servers, key=lambda s: -metric(s.url, "ragmon_scheduler_leader"))
        runs = lambda s: metric(s.url, "ragmon_job_runs_total", scheduled_job="staleness-scan")  # noqa: E731
        wait_until(lambda: runs(leader) >= 3, 30, "jobs running on the leader")
        time.sleep(2)
        assert runs(standby) == 0 and metric(standby.url, "ragmon_scheduler_leader") == 0
        assert "standing by" in standby.log_path.read_text()

        leader.process.send_signal(signal.SIGKILL)  # no goodbye: the lock goes with its connection
        leader.process.wait(10)
        killed_at = time.monotonic()
        wait_until(lambda: metric(standby.url, "ragmon_scheduler_leader") == 1, 30, "taken over")
        took = time.monotonic() - killed_at
        wait_until(lambda: runs(standby) >= 3, 30, "jobs running on the new leader")
        assert took < 10
        print(f"\ntakeover {took:.1f} s after SIGKILL (lock poll 0.5 s)")
    finally:
        first.stop()
        second.stop()


def test_the_postgres_lock_is_lost_with_its_connection(postgres):
    url = postgres.create_database(f"lock_{uuid.uuid4().hex[:8]}")
    one, two = PostgresLock(url), PostgresLock(url)
    assert one.try_acquire() and not two.try_acquire()
    with make_engine(url).connect() as admin:  # an administrator (or a failover) ends the session
        from sqlalchemy import text
        admin.execute(text("select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' "
                           "and pid <> pg_backend_pid()"))
        admin.commit()
    assert not one.still_held()
    assert two.try_acquire()
    two.release()
    assert one.try_acquire()
    one.release()


class Retrieval:
    """A retrieval endpoint for the probes: acme's handbook for everyone in acme, and, by a bug in
    its permission filter, globex's payroll for the identity `mallory`. /slow never answers in
    time; /fail answers 500; /garbage answers with HTML."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("authorization")})
                if self.path == "/slow":
                    time.sleep(3)
                if self.path == "/fail":
                    self.send_response(500)
                    self.end_headers()
                    return
                if self.path == "/garbage":
                    payload = b"<html>oops</html>"
                else:
                    passages = [{"doc_id": "acme-handbook-1", "score": 0.9}, {"doc_id": "acme-handbook-2"}]
                    if body["identity"]["id"] == "mallory":
                        passages.insert(1, {"doc_id": "globex-payroll-2026", "score": 0.8})
                    payload = json.dumps({"passages": passages[: body["top_k"]]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


PROBES = [
    {"name": "alice-sees-handbook", "query": "leave policy", "identity": {"id": "alice", "groups": ["staff"],
     "tenant": "acme"}, "must_retrieve": ["acme-handbook-*"], "must_not_retrieve": ["globex-*"]},
    {"name": "mallory-no-globex", "query": "salaries", "identity": {"id": "mallory", "groups": ["staff"],
     "tenant": "acme"}, "must_retrieve": ["acme-*"], "must_not_retrieve": ["globex-*"]},
]


@pytest.fixture
def retrieval():
    server = Retrieval()
    yield server
    server.close()


def probe_env(url: str, **more: str) -> dict[str, str]:
    return {"RAGMON_PROBES__URL": url, "RAGMON_PROBES__PROBES": json.dumps(PROBES),
            "RAGMON_PROBES__AUTH_HEADER": "Bearer probe-token", "RAGMON_PROBES__TIMEOUT_SECONDS": "1", **more}


def test_probe_run_finds_the_leak_against_a_real_endpoint(retrieval):
    result = CliRunner().invoke(main, ["probe", "run", "-o", "json"], env=probe_env(f"{retrieval.url}/retrieve"))
    assert result.exit_code == 1, result.output
    verdicts = {r["name"]: r for r in json.loads(result.stdout)}
    assert verdicts["alice-sees-handbook"]["verdict"] == "ok"
    assert verdicts["mallory-no-globex"]["verdict"] == "leak"
    assert verdicts["mallory-no-globex"]["leaked"] == ["globex-payroll-2026"]
    assert retrieval.requests[0]["auth"] == "Bearer probe-token"
    assert retrieval.requests[1]["body"]["identity"] == {"id": "mallory", "groups": ["staff"], "tenant": "acme"}
    table = CliRunner().invoke(main, ["probe", "run"], env=probe_env(f"{retrieval.url}/retrieve"))
    assert table.exit_code == 1 and "must not see" in table.output and "mallory-no-globex" in table.output


@pytest.mark.parametrize("path, message", [
    ("/slow", "did not answer within 1.0 s"),
    ("/fail", "answered HTTP 500"),
    ("/garbage", "not JSON"),
])
def test_a_slow_or_failing_endpoint_is_a_clear_probe_error(retrieval, path, message):
    started = time.monotonic()
    result = CliRunner().invoke(main, ["probe", "run", "-o", "json"], env=probe_env(f"{retrieval.url}{path}"))
    assert result.exit_code == 1, result.output
    results = json.loads(result.stdout)
    assert [r["verdict"] for r in results] == ["error", "error"]
    assert all(message in r["error"] for r in results)
    assert time.monotonic() - started < 10


def test_the_embedded_scheduler_probes_alerts_and_counts_the_leak(tmp_path, retrieval):
    with WebhookReceiver() as receiver, RagmonServer(
            tmp_path, **probe_env(f"{retrieval.url}/retrieve", RAGMON_SCHEDULER__PROBE_INTERVAL_SECONDS="1",
                                  RAGMON_ALERTS__WEBHOOK_URL=f"{receiver.url}/hook")) as ragmon:
        _, body = receiver.wait_for("/hook", has_alert("RagmonProbeLeak", probe="mallory-no-globex"), timeout=30)
        [alert] = [a for a in body["alerts"] if a["labels"]["alertname"] == "RagmonProbeLeak"]
        assert alert["labels"] == {"alertname": "RagmonProbeLeak", "severity": "critical", "probe": "mallory-no-globex"}
        assert alert["annotations"]["doc_ids"] == "globex-payroll-2026" and alert["annotations"]["tenant"] == "acme"
        assert "salaries" not in json.dumps(body)
        wait_until(lambda: metric(ragmon.url, "ragmon_probe_leaks_total", probe="mallory-no-globex") >= 1, 10,
                   "the leak counted")
        assert metric(ragmon.url, "ragmon_probe_failures_total", probe="alice-sees-handbook") == 0
        assert metric(ragmon.url, "ragmon_job_last_success_timestamp_seconds", scheduled_job="canary-probes") > 0
        assert metric(ragmon.url, "ragmon_scheduler_leader") == 1
