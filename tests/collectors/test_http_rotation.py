"""Tokens rotated without downtime: every token of the HTTP port takes a current and a next value,
both accepted until the next is promoted, and the set in force is swapped while serving."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.http import build_app
from ragmon.collectors.http_access import ReadAccess, Tokens
from ragmon.collectors.http_credentials import Credentials, CredentialSwitch
from ragmon.monitor.app.read_side import read_access, tokens_of
from ragmon.monitor.app.token_reload import TokenReload, http_credentials
from ragmon.monitor.config.settings import ConfigError, load_settings
from ragmon.monitor.core.pipeline import BatchResult
from tests.collectors.test_http_read import FakeReads

OLD, NEW, STRANGER = "ingest-old-0123", "ingest-new-0123", "someone-else-01"
EVENT = {"type": "trace", "trace_id": "t1", "time": 1_796_000_000.0, "query": "q", "tenant": "acme",
         "index": {"name": "policies"}, "answer": {"text": "yes", "citations": []}, "context": []}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def served(switch: CredentialSwitch) -> TestClient:
    return TestClient(build_app(lambda records: BatchResult(accepted=len(records)), CollectorRegistry(),
                                lambda: True, read_api=FakeReads(), credentials=switch))


def test_tokens_accept_the_current_and_the_next_value_and_nothing_else():
    tokens = Tokens([OLD, NEW, None, ""])
    client = served(CredentialSwitch(Credentials(ingest=tokens, metrics=Tokens(["m-old", "m-new"]),
                                                 reads=ReadAccess(Tokens(["r-old", "r-new"])))))
    for token in (OLD, NEW):
        assert client.post("/v1/events", json=EVENT, headers=bearer(token)).status_code == 200, token
    for wrong in (STRANGER, OLD + NEW, OLD[:-1], f"{OLD} "):
        assert client.post("/v1/events", json=EVENT, headers=bearer(wrong)).status_code == 401, wrong
    assert client.post("/v1/events", json=EVENT).status_code == 401
    for token in ("m-old", "m-new"):
        assert client.get("/metrics", headers=bearer(token)).status_code == 200
    assert client.get("/metrics", headers=bearer(OLD)).status_code == 401
    for token in ("r-old", "r-new"):
        assert client.get("/api/v1/findings", headers=bearer(token)).status_code == 200
    assert client.get("/api/v1/findings", headers=bearer(NEW)).status_code == 401  # the ingest token never reads
    assert not Tokens([None, ""]).required


def test_the_next_catalog_token_writes_the_catalog_too():
    seen = []

    def process(records):
        seen.extend(record.privilege.name for record in records)
        return BatchResult(accepted=len(records))

    client = TestClient(build_app(process, CollectorRegistry(), lambda: True, token=OLD,
                                  catalog_token=Tokens(["cat-old", "cat-new"]), guard_catalog=True))
    for token in ("cat-old", "cat-new", OLD):
        assert client.post("/v1/events", json=EVENT, headers=bearer(token)).status_code == 200
    assert seen == ["CATALOG", "CATALOG", "INGEST"]


def test_a_swap_takes_effect_on_the_next_request_without_a_new_app():
    switch = CredentialSwitch(Credentials(ingest=Tokens([OLD])))
    client = served(switch)
    assert client.post("/v1/events", json=EVENT, headers=bearer(NEW)).status_code == 401
    switch.swap(Credentials(ingest=Tokens([OLD, NEW])))  # the next value added
    assert [client.post("/v1/events", json=EVENT, headers=bearer(t)).status_code for t in (OLD, NEW)] == [200, 200]
    previous = switch.swap(Credentials(ingest=Tokens([NEW])))  # promoted, the old one removed
    assert previous.ingest.required
    assert [client.post("/v1/events", json=EVENT, headers=bearer(t)).status_code for t in (OLD, NEW)] == [401, 200]


def settings_of(**http):
    return load_settings(environ={f"RAGMON_HTTP__{key.upper()}": value for key, value in http.items()})


def test_the_settings_give_each_token_its_next_value():
    settings = settings_of(token=OLD, token_next=NEW, read_token="r-old", read_token_next="r-new")
    assert tokens_of(settings, "token").required and not tokens_of(settings, "metrics_token").required
    access = read_access(settings, "0.0.0.0", False, environ={})
    assert access.guarded and access.closed is None


@pytest.mark.parametrize("name", ["token", "catalog_token", "metrics_token", "read_token"])
def test_a_next_value_without_a_current_one_is_refused_naming_it(name):
    with pytest.raises(ConfigError, match=f"{name}_next is set without {name}"):
        settings_of(**{f"{name}_next": NEW})


@pytest.mark.parametrize("other", ["token", "token_next", "catalog_token_next", "metrics_token_next"])
def test_a_next_read_token_may_not_be_another_token(other):
    given = {"token": OLD, "catalog_token": "cat-old", "metrics_token": "m-old", other: "shared-token-01"}
    with pytest.raises(ConfigError, match="read_token_next is the same as"):
        settings_of(read_token="r-old", read_token_next="shared-token-01", **given)


def test_a_tenant_read_token_may_not_be_a_next_value():
    settings = settings_of(token=OLD, token_next=NEW, read_tokens='{"env:ACME_READ": ["acme"]}')
    with pytest.raises(ConfigError, match="same token as http.token_next"):
        read_access(settings, "0.0.0.0", False, environ={"ACME_READ": NEW})


def test_a_reload_swaps_the_tokens_in_and_keeps_them_when_the_new_settings_cannot_serve(caplog):
    switch = CredentialSwitch(http_credentials(settings_of(token=OLD), "0.0.0.0", False))
    exposure = []
    loads = iter([settings_of(token=OLD, token_next=NEW), settings_of(allow_unauthenticated="false")])
    reload = TokenReload(switch, lambda: next(loads), "0.0.0.0", on_exposure=exposure.append)
    client = served(switch)
    assert reload.reload() and exposure == [False]
    assert [client.post("/v1/events", json=EVENT, headers=bearer(t)).status_code for t in (OLD, NEW)] == [200, 200]
    # no token on a non-loopback address: serving it would open the port to anyone
    assert not reload.reload() and exposure == [False]
    assert [client.post("/v1/events", json=EVENT, headers=bearer(t)).status_code for t in (OLD, NEW)] == [200, 200]
    assert "tokens not reloaded, the ones in force are kept: http.host 0.0.0.0" in caplog.text
