"""The read side of the HTTP port on its own (the app under a test client): who may read, the
tenant-scoped tokens, the Host allowlist, the headers of every answer, the read port, and the
start-up rule of a non-loopback bind."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.http import build_app
from ragmon.collectors.http_access import ReadAccess
from ragmon.collectors.http_guard import CONTENT_SECURITY_POLICY, HostAllowlist
from ragmon.monitor.app.read_side import read_access
from ragmon.monitor.config.settings import ConfigError, load_settings
from ragmon.monitor.core.pipeline import BatchResult

INGEST, READ, ACME, GLOBEX = "ingest-0123456789", "read-0123456789", "acme-reader-0123", "globex-reader-012"
READ_PATHS = ("/", "/traces/t1", "/api/v1/findings", "/api/v1/traces/t1", "/api/v1/unread")


class FakeReads:
    """A read API that answers what it was asked, and which tenants it was told the reader sees."""

    def findings(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]:
        if params.get("limit") == "bad":
            raise ValueError("limit: 'bad' is not a whole number")
        return {"findings": [], "next_cursor": None, "tenants": None if tenants is None else sorted(tenants)}

    def trace(self, trace_id: str, tenants: Collection[str] | None = None) -> dict[str, Any] | None:
        if trace_id == "boom":
            raise RuntimeError("a bug")
        return {"trace_id": trace_id, "tenants": None if tenants is None else sorted(tenants)}

    def unread(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]:
        if params.get("missing") == "bad":
            raise ValueError("missing: 'bad' is not one of retrieval, caller, context")
        return {"unread": [], "next_cursor": None, "tenants": None if tenants is None else sorted(tenants)}

    def page(self) -> str:
        return "<!doctype html><title>ragmon status</title><p>status</p>"

    def trace_page(self, trace_id: str) -> str | None:
        return None if trace_id == "nobody" else f"<!doctype html><title>trace</title><p>{trace_id}</p>"


def app(**options):
    return build_app(lambda records: BatchResult(), CollectorRegistry(), lambda: True, read_api=FakeReads(),
                     **options)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_the_ingest_token_never_reads_and_the_read_token_does():
    client = TestClient(app(token=INGEST, reads=ReadAccess(READ)))
    for path in READ_PATHS:
        for headers in ({}, bearer(INGEST), bearer("nonsense")):
            answer = client.get(path, headers=headers)
            assert answer.status_code == 401, (path, headers)
            assert "the ingest token does not read" in answer.json()["error"]
            assert answer.headers["www-authenticate"] == "Bearer"
        assert client.get(path, headers=bearer(READ)).status_code == 200, path
    assert client.post("/v1/events", json=[], headers=bearer(READ)).status_code == 401  # nor the reverse


def test_a_tenant_token_reads_the_api_of_its_tenants_and_no_page():
    client = TestClient(app(token=INGEST, reads=ReadAccess(READ, {ACME: ["acme"], GLOBEX: ["globex", "initech"]})))
    assert client.get("/api/v1/findings", headers=bearer(ACME)).json()["tenants"] == ["acme"]
    assert client.get("/api/v1/traces/t1", headers=bearer(GLOBEX)).json()["tenants"] == ["globex", "initech"]
    assert client.get("/api/v1/findings", headers=bearer(READ)).json()["tenants"] is None
    assert client.get("/api/v1/unread", headers=bearer(GLOBEX)).json()["tenants"] == ["globex", "initech"]
    assert client.get("/api/v1/unread", headers=bearer(READ)).json()["tenants"] is None
    bad = client.get("/api/v1/unread", params={"missing": "bad"}, headers=bearer(ACME))
    assert bad.status_code == 400 and bad.json()["error"].startswith("missing:")
    for path in ("/", "/traces/t1"):
        refused = client.get(path, headers=bearer(ACME))
        assert refused.status_code == 403 and "need http.read_token" in refused.json()["error"]
    # tenant tokens alone: every read needs one of them, the pages are nobody's
    scoped_only = TestClient(app(reads=ReadAccess(None, {ACME: ["acme"]})))
    assert scoped_only.get("/api/v1/findings").status_code == 401
    assert scoped_only.get("/", headers=bearer(ACME)).status_code == 403


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "ragmon.internal"])
def test_off_loopback_without_a_read_token_reads_are_closed_saying_what_to_set(host):
    access = ReadAccess.for_bind(host, None, {}, unauthenticated=False)
    assert access.closed is not None and "http.read_token" in access.closed
    client = TestClient(app(token=INGEST, reads=access))
    for path in READ_PATHS:
        for headers in ({}, bearer(INGEST)):
            answer = client.get(path, headers=headers)
            assert answer.status_code == 403 and "http.read_token" in answer.json()["error"], path
    assert client.get("/metrics").status_code == 200 and client.get("/healthz").status_code == 200
    # a read token opens them; an explicitly unauthenticated port opens them to all
    assert ReadAccess.for_bind(host, READ, {}, unauthenticated=False).closed is None
    assert ReadAccess.for_bind(host, None, {ACME: ["acme"]}, unauthenticated=False).closed is None
    assert ReadAccess.for_bind(host, None, {}, unauthenticated=True).closed is None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_on_loopback_reads_without_a_read_token_are_open(host):
    access = ReadAccess.for_bind(host, None, {}, unauthenticated=False)
    assert access.closed is None and not access.guarded


def test_the_tenant_tokens_are_read_from_their_references_at_start(tmp_path, caplog):
    secret = tmp_path / "globex-token"
    secret.write_text(GLOBEX + "\n")
    settings = load_settings(environ={
        "RAGMON_HTTP__TOKEN": INGEST,
        "RAGMON_HTTP__READ_TOKENS": f'{{"env:ACME_READ_TOKEN": ["acme"], "file:{secret}": ["globex"]}}'})
    access = read_access(settings, "0.0.0.0", False, environ={"ACME_READ_TOKEN": ACME})
    client = TestClient(app(token=INGEST, reads=access))
    assert client.get("/api/v1/findings", headers=bearer(ACME)).json()["tenants"] == ["acme"]
    assert client.get("/api/v1/findings", headers=bearer(GLOBEX)).json()["tenants"] == ["globex"]
    assert client.get("/api/v1/findings", headers=bearer(INGEST)).status_code == 401
    with pytest.raises(ConfigError, match=r"^http.read_tokens: env:ACME_READ_TOKEN: the environment variable "
                                          r"ACME_READ_TOKEN is not set"):
        read_access(settings, "0.0.0.0", False, environ={})
    with pytest.raises(ConfigError, match="holds the same token as http.token"):
        read_access(settings, "0.0.0.0", False, environ={"ACME_READ_TOKEN": INGEST})
    secret.unlink()
    with pytest.raises(ConfigError, match=f"file:{secret}: cannot read the file"):
        read_access(settings, "0.0.0.0", False, environ={"ACME_READ_TOKEN": ACME})
    closed = load_settings(environ={"RAGMON_HTTP__TOKEN": INGEST})
    with caplog.at_level("WARNING"):
        assert read_access(closed, "0.0.0.0", False, environ={}).closed
    assert any("reads are closed" in r.getMessage() and "http.read_token" in r.getMessage() for r in caplog.records)


def test_a_read_token_equal_to_another_token_is_refused():
    for writer in ("RAGMON_HTTP__TOKEN", "RAGMON_HTTP__CATALOG_TOKEN", "RAGMON_HTTP__METRICS_TOKEN"):
        with pytest.raises(ConfigError, match="read_token is the same as"):
            load_settings(environ={writer: "same-token-0123", "RAGMON_HTTP__READ_TOKEN": "same-token-0123"})
    with pytest.raises(ConfigError, match="not a reference to a secret"):
        load_settings(environ={"RAGMON_HTTP__READ_TOKENS": '{"s3cret-in-yaml": ["acme"]}'})


@pytest.mark.parametrize(("host", "allowed"), [
    ("127.0.0.1:4318", True), ("localhost:4318", True), ("LOCALHOST", True), ("localhost.", True),
    ("[::1]:4318", True), ("192.0.2.7:4318", True), ("ragmon.monitoring.svc:4318", True), ("ragmon-bind", True),
    ("rebind.test:4318", False), ("127.0.0.1.rebind.test", False), ("evil@127.0.0.1", False),
    ("localhost:43x8", False), ("[::1", False), ("[::1]x", False), (":4318", False), ("", False),
    ("localhost:٤٣١٨", False)])
def test_the_host_allowlist_names_us_and_ip_addresses(host, allowed):
    assert HostAllowlist.for_bind("ragmon-bind", ["ragmon.monitoring.svc"]).allows(host) is allowed


def test_a_request_naming_another_host_gets_421_but_health_does_not():
    client = TestClient(app(hosts=HostAllowlist.for_bind("127.0.0.1")), base_url="http://rebind.test:4318")
    for path in (*READ_PATHS, "/metrics"):
        answer = client.get(path)
        assert answer.status_code == 421 and "http.allowed_hosts" in answer.json()["error"], path
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert client.post("/v1/events", json=[]).status_code == 421
    assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
    local = TestClient(app(hosts=HostAllowlist.for_bind("127.0.0.1")), base_url="http://localhost:4318")
    assert all(local.get(path).status_code == 200 for path in READ_PATHS)


def test_every_answer_carries_the_security_headers():
    client = TestClient(app(token=INGEST, reads=ReadAccess(READ)), raise_server_exceptions=False)
    answers = {
        "status page": client.get("/", headers=bearer(READ)),
        "trace page": client.get("/traces/t1", headers=bearer(READ)),
        "trace page 404": client.get("/traces/nobody", headers=bearer(READ)),
        "findings": client.get("/api/v1/findings", headers=bearer(READ)),
        "findings 400": client.get("/api/v1/findings", params={"limit": "bad"}, headers=bearer(READ)),
        "trace": client.get("/api/v1/traces/t1", headers=bearer(READ)),
        "trace 500": client.get("/api/v1/traces/boom", headers=bearer(READ)),
        "401": client.get("/api/v1/findings"),
        "no route": client.get("/nothing-here"),
        "metrics": client.get("/metrics"),
        "ingest 401": client.post("/v1/events", json=[]),
    }
    assert [a.status_code for a in answers.values()] == [200, 200, 404, 200, 400, 200, 500, 401, 404, 200, 401]
    for name, answer in answers.items():
        headers = answer.headers
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, name
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "script-src" not in CONTENT_SECURITY_POLICY
        assert headers["x-content-type-options"] == "nosniff", name
        assert headers["x-frame-options"] == "DENY", name
        assert headers["cache-control"] == "no-store", name
        assert headers["referrer-policy"] == "no-referrer", name


def test_with_a_read_port_the_read_side_answers_there_alone():
    served = app(token=INGEST, reads=ReadAccess(READ), read_port=4319)
    main = TestClient(served, base_url="http://127.0.0.1:4318")
    reads = TestClient(served, base_url="http://127.0.0.1:4319")
    for path in READ_PATHS:
        assert reads.get(path, headers=bearer(READ)).status_code == 200, path
        elsewhere = main.get(path, headers=bearer(READ))
        assert elsewhere.status_code == 404 and "http.read_port" in elsewhere.json()["error"], path
    assert main.post("/v1/events", json=[], headers=bearer(INGEST)).status_code == 200
    assert reads.post("/v1/events", json=[], headers=bearer(INGEST)).status_code == 404
    assert main.get("/metrics").status_code == 200 and reads.get("/metrics").status_code == 404
    for client in (main, reads):
        assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
