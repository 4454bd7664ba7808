"""The read side of a real `ragmon serve` (docs/deployment.md, "The read side"): the ingest token
never reads, tenant read tokens see their tenants only, a non-loopback bind without a read token
keeps reads closed, numbers are read strictly, every answer carries the security headers and
names one of our hosts, the read port keeps reads apart, answers are bounded in bytes, and a
trace or tenant stored by its shown id is found by its raw id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlmodel import Session

from ragmon.collectors.http_guard import CONTENT_SECURITY_POLICY
from ragmon.monitor.app.cli import main
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from ragmon.monitor.labeling.sample_store import Sample
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url
from tests.ragmon_process import RagmonServer
from tests.services.harness import free_port
from tests.test_findings import _events

INGEST, READ, ACME_READ = "ingest-token-0123456789", "read-token-0123456789", "acme-read-token-0123456789"
READ_PATHS = ("/", "/traces/leak-1", "/api/v1/findings", "/api/v1/traces/leak-1")
KEY = "a-caller-key-of-thirty-two-chars"
ALICE, BOB = "collide-alice@example.com", "collide-bob@example.org"  # both redact to collide-[EMAIL]


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def post(server: RagmonServer, events: list[dict]) -> None:
    answer = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(e) for e in events),
                        headers={"content-type": "application/x-ndjson", **bearer(INGEST)})
    assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text


def globex_leak(now: float) -> dict:
    passage = {"id": "board#1", "doc_id": "board", "doc_version": "v1", "score": 0.9, "acl": ["group:board"]}
    return {"type": "trace", "trace_id": "globex-leak", "time": now - 3, "tenant": "globex",
            "caller": {"id": "carol", "groups": ["staff"]}, "index": {"name": "hr"}, "query": "board pay",
            "retrievals": [{"retriever": "vector", "passages": [passage]}], "context": [passage],
            "answer": {"text": "...", "citations": []}}


def test_the_ingest_token_reads_nothing_and_a_tenant_token_reads_its_tenant(tmp_path):
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ, ACME_READ_TOKEN=ACME_READ,
                      RAGMON_HTTP__READ_TOKENS='{"env:ACME_READ_TOKEN": ["acme"]}') as server:
        post(server, [*_events(time.time()), globex_leak(time.time())])
        for path in READ_PATHS:
            for headers in ({}, bearer(INGEST)):
                answer = httpx.get(f"{server.url}{path}", headers=headers)
                assert answer.status_code == 401 and "ingest token does not read" in answer.text, (path, headers)
        everything = httpx.get(f"{server.url}/api/v1/findings", headers=bearer(READ)).json()["findings"]
        assert {f["tenant"] for f in everything} == {"acme", "globex"}
        acme = httpx.get(f"{server.url}/api/v1/findings", headers=bearer(ACME_READ)).json()["findings"]
        assert acme and {f["tenant"] for f in acme} == {"acme"}
        assert [f["id"] for f in acme] == [f["id"] for f in everything if f["tenant"] == "acme"]
        asked_for_globex = httpx.get(f"{server.url}/api/v1/findings", params={"tenant": "globex"},
                                     headers=bearer(ACME_READ))
        assert asked_for_globex.status_code == 200 and asked_for_globex.json()["findings"] == []
        assert httpx.get(f"{server.url}/api/v1/traces/leak-1", headers=bearer(ACME_READ)).status_code == 200
        assert httpx.get(f"{server.url}/api/v1/traces/globex-leak", headers=bearer(ACME_READ)).status_code == 404
        assert httpx.get(f"{server.url}/api/v1/traces/globex-leak", headers=bearer(READ)).status_code == 200
        for page in ("/", "/traces/leak-1"):
            scoped = httpx.get(f"{server.url}{page}", headers=bearer(ACME_READ))
            assert scoped.status_code == 403 and "http.read_token" in scoped.json()["error"]
            assert httpx.get(f"{server.url}{page}", headers=bearer(READ)).status_code == 200


def test_a_wildcard_bind_with_an_ingest_token_and_no_read_token_keeps_reads_closed(tmp_path):
    """`serve --host 0.0.0.0` in a network namespace of its own (loopback only, as in
    tests/test_image.py), read from 127.0.0.1 inside it."""
    seen = in_network_namespace(tmp_path, {"RAGMON_HTTP__HOST": "0.0.0.0", "RAGMON_HTTP__TOKEN": INGEST})
    assert seen["ingest"] == 200
    for path in READ_PATHS:
        for who in ("nobody", "ingest"):
            status, body = seen["reads"][path][who]
            assert status == 403 and "reads are closed" in body and "http.read_token" in body, (path, who, body)
    assert "WARNING" in seen["log"] and "reads are closed: http.host 0.0.0.0" in seen["log"], seen["log"]
    assert "set http.read_token (RAGMON_HTTP__READ_TOKEN)" in seen["log"]
    assert "/api/v1/findings, /api/v1/traces/{id}, /api/v1/unread (closed: see the warning above)" in seen["log"]


def test_a_wildcard_bind_opened_on_purpose_warns_that_reads_are_open_too(tmp_path):
    seen = in_network_namespace(tmp_path, {"RAGMON_HTTP__HOST": "0.0.0.0",
                                           "RAGMON_HTTP__ALLOW_UNAUTHENTICATED": "true"})
    assert seen["ingest"] == 200
    assert all(seen["reads"][path]["nobody"][0] == 200 for path in READ_PATHS), seen["reads"]
    assert ("anyone who can reach the port can send events and read every tenant's findings, traces and the status "
            "page (set http.read_token to guard reads)") in seen["log"], seen["log"]


def in_network_namespace(scratch: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, __file__,
         json.dumps({"scratch": str(scratch), "env": env})],
        capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _reads_inside(scratch: Path, env: dict[str, str]) -> dict:
    """In the namespace: serve on the wildcard address, then ingest and every read path, from 127.0.0.1."""
    server = RagmonServer(scratch, **env).start()
    try:
        answer = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(e) for e in _events(time.time())),
                            headers={"content-type": "application/x-ndjson", **bearer(INGEST)})
        reads = {path: {who: (a.status_code, a.text) for who, headers in (("nobody", {}), ("ingest", bearer(INGEST)))
                        for a in [httpx.get(f"{server.url}{path}", headers=headers)]} for path in READ_PATHS}
    finally:
        server.stop()
    return {"ingest": answer.status_code, "reads": reads, "log": server.log_path.read_text(errors="replace")}


def test_numbers_are_read_strictly(tmp_path):
    with RagmonServer(tmp_path, RAGMON_HTTP__READ_TOKEN=READ) as server:
        for params, named in (({"cursor": "99999999999999999999"}, "cursor"), ({"limit": "١٢"}, "limit"),
                              ({"cursor": "５"}, "cursor"), ({"since": "nan"}, "since"), ({"since": "inf"}, "since"),
                              ({"since": "9" * 400}, "since")):
            refused = httpx.get(f"{server.url}/api/v1/findings", params=params, headers=bearer(READ))
            assert refused.status_code == 400, (params, refused.text)
            assert refused.json()["error"].startswith(f"{named}: "), refused.text


def test_every_answer_carries_the_security_headers_and_names_one_of_our_hosts(tmp_path):
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ) as server:
        post(server, _events(time.time()))
        url, read = server.url, bearer(READ)
        answers = [httpx.get(f"{url}/", headers=read), httpx.get(f"{url}/traces/leak-1", headers=read),
                   httpx.get(f"{url}/traces/nobody", headers=read), httpx.get(f"{url}/api/v1/findings", headers=read),
                   httpx.get(f"{url}/api/v1/traces/leak-1", headers=read),
                   httpx.get(f"{url}/api/v1/traces/nobody", headers=read),
                   httpx.get(f"{url}/api/v1/findings", params={"signal": "leak"}, headers=read),
                   httpx.get(f"{url}/api/v1/findings"),
                   httpx.get(f"{url}/api/v1/findings", headers={"host": f"rebind.test:{server.port}", **read}),
                   httpx.get(f"{url}/", headers={"host": f"localhost:{server.port}", **read})]
        assert [a.status_code for a in answers] == [200, 200, 404, 200, 200, 404, 400, 401, 421, 200]
        assert "http.allowed_hosts" in answers[8].json()["error"]
        for answer in answers:
            assert answer.headers.get("content-security-policy") == CONTENT_SECURITY_POLICY, answer.request.url
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["cache-control"] == "no-store"
            assert answer.headers["referrer-policy"] == "no-referrer"
        # probes and scrapes address a pod by its IP; health answers whatever the Host
        assert httpx.get(f"{url}/healthz", headers={"host": "rebind.test"}).status_code == 200
        assert httpx.get(f"{url}/metrics", headers={"host": f"10.244.1.7:{server.port}"}).status_code == 200


def test_a_host_listed_in_allowed_hosts_is_answered(tmp_path):
    with RagmonServer(tmp_path, RAGMON_HTTP__ALLOWED_HOSTS='["ragmon.monitoring.svc"]') as server:
        for host, status in (("ragmon.monitoring.svc", 200), ("ragmon.monitoring.svc.", 200), ("ragmon", 421)):
            answer = httpx.get(f"{server.url}/api/v1/findings", headers={"host": f"{host}:{server.port}"})
            assert answer.status_code == status, host


def test_a_read_port_serves_the_read_side_alone(tmp_path):
    read_port = free_port()
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ,
                      RAGMON_HTTP__READ_PORT=str(read_port)) as server:
        post(server, _events(time.time()))
        reads = f"http://127.0.0.1:{read_port}"
        for path in READ_PATHS:
            assert httpx.get(f"{reads}{path}", headers=bearer(READ)).status_code == 200, path
            assert httpx.get(f"{server.url}{path}", headers=bearer(READ)).status_code == 404, path
        assert httpx.get(f"{reads}/metrics").status_code == 404
        assert httpx.get(f"{server.url}/metrics").status_code == 200
        sent = httpx.post(f"{reads}/v1/events", json=[], headers=bearer(INGEST))
        assert sent.status_code == 404
        assert httpx.get(f"{reads}/readyz").status_code == 200
    assert f"reads on port {read_port}: GET / (status)" in server.log_path.read_text()


def seed(database: Path, findings: list[dict], samples: list[Sample]) -> None:
    """Rows as the writers store them, into the database a running serve uses."""
    engine = make_engine(f"sqlite:///{database}")
    FindingsStore(engine).add(findings)
    with Session(engine) as session:
        session.add_all(samples)
        session.commit()
    engine.dispose()


def finding(n: int, trace_id: str, tenant: str, reason: str = "catalog ACL [group:payroll] excludes the caller",
            index: str = "hr") -> dict:
    return {"key": f"{trace_id}-{n}", "trace_id": trace_id, "time": time.time() - 60, "recorded_at": time.time(),
            "tenant": tenant, "index_name": index, "caller": "", "signal": "permission_violation", "stage": "context",
            "passage_ids": [f"p{n}"], "documents": [["payroll", "v2"]], "reason": reason}


def sample(trace_id: str, tenant: str) -> Sample:
    return Sample(trace_id=trace_id, tenant=tenant, week="2026-W48", strata=["permission_violation"], split="dev",
                  fingerprint="f" * 16, trace_time=time.time(), created_at=time.time(), updated_at=time.time(),
                  payload={"trace_id": trace_id, "tenant": tenant, "query": "[EMAIL] asks"})


def test_a_findings_answer_and_a_trace_answer_are_bounded_in_bytes_and_page_on(tmp_path):
    big = "[group:g" + "x" * 100_000 + "]"  # a caller of many long groups, as stored before reasons were bounded
    with RagmonServer(tmp_path, RAGMON_HTTP__READ_TOKEN=READ) as server:
        seed(tmp_path / "ragmon.db", [finding(n, "wide", "acme", reason=big) for n in range(40)], [])
        first = httpx.get(f"{server.url}/api/v1/findings", params={"limit": 100}, headers=bearer(READ))
        assert first.status_code == 200 and len(first.content) <= 1024 * 1024 + 110_000, len(first.content)
        assert first.json()["next_cursor"] is not None
        assert collected(server, first.json(), {"limit": 100}) == list(range(40, 0, -1))
        trace = httpx.get(f"{server.url}/api/v1/traces/wide", headers=bearer(READ))
        assert trace.status_code == 200 and len(trace.content) <= 1024 * 1024 + 110_000, len(trace.content)
        view = trace.json()
        assert view["findings_next_cursor"] == view["findings"][-1]["id"]
        rest = {"findings": view["findings"], "next_cursor": view["findings_next_cursor"]}
        assert collected(server, rest, {"trace_id": "wide"}) == list(range(40, 0, -1))


def collected(server: RagmonServer, page: dict, params: dict) -> list[int]:
    """The ids of ``page`` and of every page after it."""
    ids = []
    while True:
        ids += [f["id"] for f in page["findings"]]
        if page["next_cursor"] is None:
            return ids
        page = httpx.get(f"{server.url}/api/v1/findings", params={**params, "cursor": page["next_cursor"]},
                         headers=bearer(READ)).json()


def test_a_trace_and_a_tenant_stored_by_their_shown_ids_are_found_by_their_raw_ids(tmp_path):
    shown = Redactor(RedactionConfig(caller_key=KEY)).shown_id
    alice, bob, tenant = shown(ALICE), shown(BOB), shown("ops@acme.example")
    assert alice != bob and "@" not in alice + bob + tenant
    with RagmonServer(tmp_path, RAGMON_HTTP__READ_TOKEN=READ, RAGMON_REDACTION__CALLER_KEY=KEY) as server:
        seed(tmp_path / "ragmon.db", [finding(1, alice, tenant), finding(2, bob, "globex")],
             [sample(alice, tenant), sample(bob, "globex")])
        for given in (ALICE, alice):  # the raw id, and the shown id copied from an answer
            view = httpx.get(f"{server.url}/api/v1/traces/{given}", headers=bearer(READ))
            assert view.status_code == 200, view.text
            assert view.json()["trace_id"] == alice and [f["trace_id"] for f in view.json()["findings"]] == [alice]
            assert view.json()["sample"]["trace"]["trace_id"] == alice
            page = httpx.get(f"{server.url}/traces/{given}", headers=bearer(READ))
            assert page.status_code == 200 and ALICE not in page.text
        assert httpx.get(f"{server.url}/api/v1/traces/{BOB}", headers=bearer(READ)).json()["trace_id"] == bob
        for given in ("ops@acme.example", tenant):
            rows = httpx.get(f"{server.url}/api/v1/findings", params={"tenant": given}, headers=bearer(READ)).json()
            assert [f["trace_id"] for f in rows["findings"]] == [alice], given
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}", "RAGMON_REDACTION__CALLER_KEY": KEY}
    shown_trace = CliRunner().invoke(main, ["trace", "show", ALICE, "-o", "json"], env=env)
    assert shown_trace.exit_code == 0, shown_trace.output
    assert json.loads(shown_trace.stdout)["trace_id"] == alice
    listed = CliRunner().invoke(main, ["findings", "list", "--tenant", "ops@acme.example", "-o", "json"], env=env)
    assert [f["trace_id"] for f in json.loads(listed.stdout)["findings"]] == [alice]


def test_a_tenant_token_given_for_a_private_tenant_name_reads_it_as_stored(tmp_path):
    shown = Redactor(RedactionConfig(caller_key=KEY)).shown_id
    alice, tenant = shown(ALICE), shown("ops@acme.example")
    with RagmonServer(tmp_path, RAGMON_HTTP__READ_TOKEN=READ, RAGMON_REDACTION__CALLER_KEY=KEY,
                      RAGMON_HTTP__READ_TOKENS='{"env:ACME_READ_TOKEN": ["ops@acme.example"]}',
                      ACME_READ_TOKEN=ACME_READ) as server:
        seed(tmp_path / "ragmon.db", [finding(1, alice, tenant), finding(2, shown(BOB), "globex")],
             [sample(alice, tenant), sample(shown(BOB), "globex")])
        scoped = httpx.get(f"{server.url}/api/v1/findings", headers=bearer(ACME_READ)).json()["findings"]
        assert [f["trace_id"] for f in scoped] == [alice]
        assert httpx.get(f"{server.url}/api/v1/traces/{BOB}", headers=bearer(ACME_READ)).status_code == 404
        assert httpx.get(f"{server.url}/api/v1/traces/{ALICE}", headers=bearer(ACME_READ)).status_code == 200


@pytest.fixture(autouse=True)
def _no_outer_settings(monkeypatch):
    for name in [n for n in os.environ if n.startswith("RAGMON_")]:
        monkeypatch.delenv(name)


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(json.dumps(_reads_inside(Path(spec["scratch"]), spec["env"])))


@pytest.fixture(params=BOTH)
def database_url(request, tmp_path) -> str:
    return migrated_url(request, tmp_path, "read_side")


def test_a_nul_character_in_an_id_looked_up_is_a_bad_request_on_either_database(tmp_path, database_url):
    """PostgreSQL refuses a NUL in a text parameter (psycopg's DataError, once a 500): every look-up
    by id answers 400 naming the parameter instead."""
    with RagmonServer(tmp_path, RAGMON_HTTP__READ_TOKEN=READ, RAGMON_DATABASE__URL=database_url,
                      RAGMON_REDACTION__CALLER_KEY="read-side-nul-key-0123") as server:
        for path, params, named in (("/api/v1/findings", {"tenant": "\x00"}, "tenant"),
                                    ("/api/v1/findings", {"index": "a\x00b"}, "index"),
                                    ("/api/v1/findings", {"trace_id": "\x00"}, "trace_id"),
                                    ("/api/v1/traces/a%00b", {}, "trace_id")):
            answer = httpx.get(f"{server.url}{path}", params=params, headers=bearer(READ))
            assert answer.status_code == 400, (path, params, answer.text)
            assert answer.json()["error"] == f"{named}: holds a NUL character"
        page = httpx.get(f"{server.url}/traces/a%00b", headers=bearer(READ))
        assert page.status_code == 400 and "NUL" in page.text
