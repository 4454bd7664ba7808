"""The Qdrant source: what a Qdrant server holds of each document, as index entries (docs/catalog.md,
"A Qdrant server").

Each configured collection is read whole through Qdrant's REST API, as qdrant-client 1.20 asks it:

- ``POST /collections/{name}/points/scroll`` with ``{"limit", "offset", "with_payload": true,
  "with_vector": false}``: ``{"result": {"points": [{"id", "payload"}], "next_page_offset"}}``, pages
  following ``next_page_offset`` until it is null;
- ``POST /collections/{name}/points/count`` with ``{"exact": true}``: ``{"result": {"count"}}``, which
  must match the points read (else the collection was written meanwhile, and the sync fails).

A point's metadata is its payload, or the object under ``metadata_key`` in it (LangChain's
``QdrantVectorStore`` nests it under ``metadata``); its points fold into one entry per document
(``chunk_fold``). Bounded by ``json_api`` (allowed hosts, no redirect, one deadline and byte limit);
the API key is sent as ``api-key`` and never in a message. Qdrant's local mode is refused by the
configuration: it keeps points as Python pickles, and loading a pickle runs code.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.chunk_fold import ChunkKeys, fold_collections
from ragmon.collectors.catalog_sources.json_api import JsonApi, NotFound
from ragmon.monitor.config.catalog_sources import QdrantSourceConfig


class QdrantSource:
    """A Qdrant server as index entries (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: QdrantSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context
        self._keys = ChunkKeys.of(config)

    def read(self) -> Snapshot:
        config = self._config
        with JsonApi(config.url, allowed_hosts=config.allowed_hosts, headers=self._headers(),
                     timeout=config.timeout_seconds, max_bytes=config.max_bytes,
                     transport=self._context.http_transport) as api:  # type: ignore[arg-type]
            return fold_collections(config, self._keys, lambda name: self._points(api, name), self._context.clock())

    def _headers(self) -> dict[str, str]:
        key = self._context.secret(self._config.name, "api_key", self._config.api_key)
        return {} if key is None else {"api-key": key}

    def _points(self, api: JsonApi, collection: str) -> list[dict[str, Any]]:
        """The metadata of every point of ``collection``, in the server's order (by point id)."""
        config = self._config
        path = f"/collections/{quote(collection, safe='')}/points"
        chunks: list[dict[str, Any]] = []
        seen: set[str] = set()
        offset: Any = None
        while True:
            result = self._result(api, f"{path}/scroll", {"limit": config.page_size, "offset": offset,
                                                          "with_payload": True, "with_vector": False}, collection)
            points, offset = result.get("points"), result.get("next_page_offset")
            if not isinstance(points, list) or not all(isinstance(p, dict) and "id" in p for p in points):
                raise SourceError("bad_format", f"collection {collection!r}: a scroll page that is not Qdrant's "
                                  "{points, next_page_offset}")
            for point in points:
                if str(point["id"]) not in seen:
                    seen.add(str(point["id"]))
                    chunks.append(self._metadata(point.get("payload")))
            if len(seen) > config.max_chunks:
                raise SourceError("too_large", f"collection {collection!r} holds more than max_chunks "
                                  f"({config.max_chunks}) points")
            if offset is None:
                break
        count = self._result(api, f"{path}/count", {"exact": True}, collection).get("count")
        if count != len(seen):
            raise SourceError("unavailable", f"collection {collection!r} changed while it was read ({len(seen)} "
                              f"points read, {count} held); the next sync reads it again")
        return chunks

    def _metadata(self, payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            return {}
        if self._config.metadata_key is None:
            return payload
        nested = payload.get(self._config.metadata_key)
        return nested if isinstance(nested, dict) else {}

    def _result(self, api: JsonApi, path: str, body: dict, collection: str) -> dict[str, Any]:
        try:
            answer = api.call("POST", path, body)
        except NotFound:
            raise SourceError("unavailable", f"collection {collection!r} not found on the Qdrant server") from None
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict):
            raise SourceError("bad_format", f"collection {collection!r}: an answer without Qdrant's result")
        return result
