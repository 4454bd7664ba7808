"""The Qdrant source over the REST API: scroll pages followed by next_page_offset, the metadata nested as
LangChain nests it or flat as LlamaIndex keeps it, the API key by reference, a collection written while
read or missing failing the sync, and local mode (pickles) refused by the configuration. Answers are
shaped as qdrant-client 1.20's models give them (ScrollResult, Record, CountResult); no Qdrant server
can be run here."""

from __future__ import annotations

import json

import httpx
import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.qdrant import QdrantSource
from ragmon.monitor.config.catalog_sources import QdrantSourceConfig
from ragmon.monitor.config.settings import ConfigError, load_settings

KEY = "qdrant-k3y-77aa"
URL = "https://qdrant.example.com:6333"


def points(nested: bool) -> list[dict]:
    def payload(metadata: dict) -> dict:
        return {"page_content": "text", "metadata": metadata} if nested else {"_node_content": "{}", **metadata}
    return ([{"id": n, "payload": payload({"doc_id": "a.md", "doc_version": "v1", "acl": ["group:staff"],
                                           "indexed_at": 1_700_000_000 + n})} for n in range(3)]
            + [{"id": "5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
                "payload": payload({"doc_id": "b.md", "doc_version": "v2", "acl": "group:hr"})}])


def server(held: list[dict], count: int | None = None, seen: list | None = None) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if not request.url.path.startswith("/collections/policies/"):
            return httpx.Response(404, json={"status": {"error": "Not found: Collection `nope` doesn't exist!"}})
        asked = json.loads(request.content)
        if request.url.path.endswith("/points/count"):
            return httpx.Response(200, json={"result": {"count": len(held) if count is None else count},
                                             "status": "ok", "time": 0.001})
        start = 0 if asked["offset"] is None else next(i for i, p in enumerate(held) if p["id"] == asked["offset"])
        page = held[start: start + asked["limit"]]
        following = held[start + asked["limit"]]["id"] if start + asked["limit"] < len(held) else None
        return httpx.Response(200, json={"result": {"points": page, "next_page_offset": following},
                                         "status": "ok", "time": 0.002})
    return httpx.MockTransport(handle)


def read(transport, **options):
    options = {"collections": ["policies"], "page_size": 2, "allowed_hosts": ["qdrant.example.com"], **options}
    config = QdrantSourceConfig(name="index", kind="qdrant", url=URL, **options)
    return QdrantSource(config, SourceContext(lambda: 1_800_000_000.0, {"QDRANT_KEY": KEY}, transport)).read()


@pytest.mark.parametrize("nested", [True, False], ids=["langchain-nested", "llamaindex-flat"])
def test_scroll_pages_fold_into_one_entry_per_document(nested):
    seen: list[httpx.Request] = []
    snapshot = read(server(points(nested), seen=seen), api_key="env:QDRANT_KEY",
                    metadata_key="metadata" if nested else None)
    got = {doc_id: (e.version, e.chunks, e.acl, e.indexed_at) for (_, doc_id), e in snapshot.index_entries.items()}
    assert got == {"a.md": ("v1", 3, ["group:staff"], 1_700_000_002.0),
                   "b.md": ("v2", 1, ["group:hr"], 1_800_000_000.0)}  # no time: the sync's
    bodies = [json.loads(r.content) for r in seen]
    assert [b.get("offset", "count") for b in bodies] == [None, 2, "count"]
    assert all(b["with_payload"] is True and b["with_vector"] is False for b in bodies[:2])
    assert all(r.headers["api-key"] == KEY for r in seen)


@pytest.mark.parametrize(("transport", "options", "message"), [
    (server(points(True), count=5), {}, "changed while it was read (4 points read, 5 held)"),
    (server(points(True)), {"collections": ["nope"]}, "collection 'nope' not found on the Qdrant server"),
    (server(points(True)), {"max_chunks": 2}, "more than max_chunks (2) points"),
    (server(points(True)), {"api_key": "env:MISSING"}, "MISSING"),
])
def test_a_collection_not_read_whole_fails_the_sync(transport, options, message):
    with pytest.raises(SourceError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        read(transport, **{"api_key": "env:QDRANT_KEY", **options})
    assert KEY not in str(raised.value)


def test_local_mode_is_refused_by_the_configuration():
    sources = [{"name": "q", "kind": "qdrant", "url": "http://localhost:6333", "allowed_hosts": ["localhost"],
                "collections": ["docs"], "path": "/srv/qdrant"}]
    with pytest.raises(ConfigError, match="Qdrant's local mode is not read .its points are Python pickles"):
        load_settings(environ={"RAGMON_CATALOG__SOURCES": json.dumps(sources)})
    with pytest.raises(ConfigError, match="the host qdrant.example.com is not in allowed_hosts"):
        load_settings(environ={"RAGMON_CATALOG__SOURCES": json.dumps(
            [{**sources[0], "path": None, "url": URL, "allowed_hosts": []}])})
