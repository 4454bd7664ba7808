"""Reading a Chroma server (``chroma run``) through its HTTP API v2.

Three requests of the API are used, as chromadb 1.5 serves them:

- ``GET /api/v2/tenants/{tenant}/databases/{database}/collections/{name}``: the collection, its ``id``;
- ``POST …/collections/{id}/get`` with ``{"limit", "offset", "include": ["metadatas"]}``: a page of
  chunks, ``{"ids": [...], "metadatas": [...]}`` in the server's own order;
- ``GET …/collections/{id}/count``: how many chunks it holds.

Bounded like the manifest's download (``json_api``): only a URL of ``allowed_hosts`` (https, or http
on a loopback address), no redirect followed, the whole read within ``timeout_seconds`` and
``max_bytes``, at most ``max_chunks`` chunks a collection. The ``Authorization`` value comes by
reference and is never in a message. Pages are read by offset: a chunk added or deleted meanwhile
may shift a page, so a chunk id seen twice is taken once, and the count the server gives at the end
must match what was read, else the sync fails (and the next one reads a store at rest).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from ragmon.collectors.catalog_sources.base import SourceError
from ragmon.collectors.catalog_sources.json_api import JsonApi, NotFound
from ragmon.monitor.config.catalog_sources import ChromaSourceConfig


class ChromaServer:
    """One read of a Chroma server: ``with ChromaServer(config, authorization) as server: server.chunks(...)``."""

    def __init__(self, config: ChromaSourceConfig, authorization: str | None,
                 transport: httpx.BaseTransport | None = None) -> None:
        assert config.url is not None
        self._config = config
        base = (f"{config.url.rstrip('/')}/api/v2/tenants/{quote(config.chroma_tenant, safe='')}"
                f"/databases/{quote(config.chroma_database, safe='')}/collections")
        self._api = JsonApi(base, allowed_hosts=config.allowed_hosts,
                            headers={"Authorization": authorization} if authorization else {},
                            timeout=config.timeout_seconds, max_bytes=config.max_bytes, transport=transport)

    def __enter__(self) -> ChromaServer:
        return self

    def __exit__(self, *_: object) -> None:
        self._api.__exit__()

    def chunks(self, collection: str, keys: list[str]) -> list[dict[str, Any]]:
        """The metadata of every chunk of ``collection`` (keys beyond ``keys`` dropped)."""
        described = self._call("GET", f"/{quote(collection, safe='')}", None, collection)
        if not isinstance(described, dict) or not isinstance(described.get("id"), str):
            raise SourceError("bad_format", f"collection {collection!r}: the server's answer names no id")
        path = f"/{quote(described['id'], safe='')}"
        limit, chunks, seen = self._config.page_size, [], set()
        offset = 0
        while True:
            page = self._call("POST", f"{path}/get", {"limit": limit, "offset": offset, "include": ["metadatas"]},
                              collection)
            ids, metadatas = _page(page, collection)
            for chunk_id, metadata in zip(ids, metadatas, strict=True):
                if chunk_id not in seen:
                    seen.add(chunk_id)
                    chunks.append({key: metadata[key] for key in keys if key in metadata} if metadata else {})
            if len(seen) > self._config.max_chunks:
                raise SourceError("too_large", f"collection {collection!r} holds more than max_chunks "
                                  f"({self._config.max_chunks}) chunks")
            if len(ids) < limit:
                break
            offset += limit
        count = self._call("GET", f"{path}/count", None, collection)
        if count != len(seen):
            raise SourceError("unavailable", f"collection {collection!r} changed while it was read ({len(seen)} "
                              f"chunks read, {count} held); the next sync reads it again")
        return chunks

    def _call(self, method: str, path: str, body: dict | None, collection: str) -> Any:
        try:
            return self._api.call(method, path, body)
        except NotFound:
            raise SourceError("unavailable", f"collection {collection!r} not found in Chroma's "
                              f"{self._config.chroma_tenant}/{self._config.chroma_database}") from None


def _page(page: Any, collection: str) -> tuple[list[str], list[dict[str, Any] | None]]:
    ids = page.get("ids") if isinstance(page, dict) else None
    metadatas = page.get("metadatas") if isinstance(page, dict) else None
    if (not isinstance(ids, list) or not isinstance(metadatas, list) or len(ids) != len(metadatas)
            or not all(isinstance(i, str) for i in ids)
            or not all(m is None or isinstance(m, dict) for m in metadatas)):
        raise SourceError("bad_format", f"collection {collection!r}: a page that is not Chroma's "
                          "{ids, metadatas}")
    return ids, metadatas
