"""Reading a Chroma server within bounds: the token by reference (sent, never in a message), no redirect
followed, the byte and time limits, a collection missing or written while read failing the sync. The
server's answers here are shaped as chromadb 1.5.9's (tests/clients/test_chroma_catalog.py reads a real
`chroma run`)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.chroma import ChromaSource
from ragmon.monitor.config.catalog_sources import ChromaSourceConfig

TOKEN = "Bearer chroma-t0ken-5e1f"
BASE = "/api/v2/tenants/default_tenant/databases/default_database/collections"
CHUNKS = [(f"a#{n}", {"doc_id": "a", "doc_version": "v1", "acl": "group:staff", "text": "x" * 10}) for n in range(5)]


def server(chunks=CHUNKS, count=None, seen=None, status=200, delay=0.0):
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        time.sleep(delay)
        if status != 200:
            return httpx.Response(status, headers={"location": "https://elsewhere.example.com/"})
        if request.url.path == f"{BASE}/policies":
            return httpx.Response(200, json={"id": "c-1", "name": "policies"})
        if request.url.path == f"{BASE}/c-1/get":
            asked = json.loads(request.content)
            page = chunks[asked["offset"]: asked["offset"] + asked["limit"]]
            return httpx.Response(200, json={"ids": [i for i, _ in page], "metadatas": [m for _, m in page]})
        if request.url.path == f"{BASE}/c-1/count":
            return httpx.Response(200, json=len(chunks) if count is None else count)
        return httpx.Response(404, json={"error": "NotFoundError"})
    return httpx.MockTransport(handle)


def read(transport, environ=None, **options):
    options = {"collections": ["policies"], "page_size": 2, **options}
    config = ChromaSourceConfig(name="index", kind="chroma", url="https://chroma.example.com:8000",
                                allowed_hosts=["chroma.example.com"], **options)
    return ChromaSource(config, SourceContext(time.time, environ or {}, transport)).read()


def test_pages_of_chunks_with_the_token_by_reference():
    seen: list[httpx.Request] = []
    snapshot = read(server(seen=seen), {"CHROMA_AUTH": TOKEN}, auth_header="env:CHROMA_AUTH")
    [entry] = snapshot.index_entries.values()
    assert (entry.doc_id, entry.version, entry.chunks, entry.acl) == ("a", "v1", 5, ["group:staff"])
    assert [r.url.path.rsplit("/", 1)[-1] for r in seen] == ["policies", "get", "get", "get", "count"]
    assert all(r.headers["authorization"] == TOKEN for r in seen)
    asked = [json.loads(r.content) for r in seen if r.url.path.endswith("/get")]
    assert [(a["offset"], a["limit"], a["include"]) for a in asked] == [(0, 2, ["metadatas"]), (2, 2, ["metadatas"]),
                                                                        (4, 2, ["metadatas"])]


@pytest.mark.parametrize(("transport", "options", "reason", "message"), [
    (server(status=302), {}, "unavailable", "HTTP 302"),  # a redirect is never followed
    (server(status=401), {}, "unavailable", "HTTP 401"),
    (server(count=6), {}, "unavailable", "changed while it was read (5 chunks read, 6 held)"),
    (server(), {"max_bytes": 300}, "too_large", "answers of more than 300 bytes"),
    (server(), {"max_chunks": 3}, "too_large", "more than max_chunks (3)"),
    (server(delay=0.3), {"timeout_seconds": 0.5}, "timeout", "not read within 0.5 s"),
    (server(), {"collections": ["nope"]}, "unavailable", "collection 'nope' not found"),
    (server(), {"auth_header": "env:MISSING"}, "unavailable", "MISSING"),
])
def test_a_server_read_that_cannot_be_whole_fails_the_sync(transport, options, reason, message):
    with pytest.raises(SourceError) as raised:
        read(transport, {"CHROMA_AUTH": TOKEN}, **options)
    assert raised.value.reason == reason and message in str(raised.value)
    assert TOKEN not in str(raised.value)
