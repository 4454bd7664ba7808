"""A LlamaIndex document store persisted as JSON as index entries (docs/catalog.md, "A LlamaIndex
docstore").

``SimpleDocumentStore.persist()`` (llama-index-core 0.14) writes ``docstore.json``: one JSON object
whose collections are named ``<namespace>/<collection>`` (namespace ``docstore`` by default):

- ``docstore/ref_doc_info``: per source document id (``ref_doc_id``), ``{"node_ids": [...],
  "metadata": {...}}``, the document's metadata (``file_path`` from ``SimpleDirectoryReader``);
- ``docstore/metadata``: per document (and per node) id, ``{"doc_hash": ...}``: the hash LlamaIndex
  compares to decide whether a document changed (``Document.hash``);
- ``docstore/data``: the nodes themselves (text included), not read here.

Each source document is one index entry: its id (the metadata's ``doc_id_key``, or the ``ref_doc_id``)
by the join rule, its version (``doc_hash``, or the metadata's ``version_key``), its chunks (its
nodes), its readers (the metadata's ``acl_key``, by the one ACL rule) and when it was indexed (the
metadata's ``indexed_at_key``, else the file's modification time: when the store was last persisted).
A document whose values cannot be read is refused (``bad_record``) and keeps its last state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.index_rows import ChunkRow, fold
from ragmon.monitor.config.catalog_sources import DocstoreSourceConfig
from ragmon.monitor.core.acl import BadAcl, read_acl
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.times import BadTime, read_seconds

FILE_NAME = "docstore.json"  # llama_index.core.storage.docstore.types.DEFAULT_PERSIST_FNAME


class _BadDocument(ValueError):
    pass


class DocstoreSource:
    """A persisted ``docstore.json`` as index entries
    (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: DocstoreSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context

    def read(self) -> Snapshot:
        store, modified = self._load()
        namespace = self._config.namespace
        documents = store.get(f"{namespace}/ref_doc_info")
        hashes = store.get(f"{namespace}/metadata", {})
        if not isinstance(documents, dict) or not isinstance(hashes, dict):
            raise SourceError("bad_format", f"{self.name}: no {namespace}/ref_doc_info in {FILE_NAME} (is the "
                              "namespace right?)")
        snapshot = Snapshot(index_entries={})
        chunks: list[ChunkRow] = []
        for ref_doc_id, info in documents.items():
            doc_id = self._doc_id(ref_doc_id, info)
            try:
                if doc_id is None:
                    raise _BadDocument
                chunks += self._chunks(doc_id, ref_doc_id, info, hashes.get(ref_doc_id), modified)
            except (_BadDocument, BadTime, BadAcl):
                snapshot.refuse("bad_record")
                if doc_id is not None:
                    snapshot.unread_entries.add((self._config.index, doc_id))
        snapshot.index_entries = fold(chunks, self._config.max_items, snapshot)
        return snapshot

    def _load(self) -> tuple[dict[str, Any], float]:
        path = self._config.path
        if path.is_dir():
            path = path / FILE_NAME
        limit = self._config.max_bytes
        try:
            with open(path, "rb") as handle:
                modified = os.fstat(handle.fileno()).st_mtime
                data = handle.read(limit + 1)
        except OSError as error:
            raise SourceError("unavailable", f"{Path(path)}: {error.strerror or error}") from None
        if len(data) > limit:
            raise SourceError("too_large", f"{path}: more than {limit} bytes")
        try:
            store = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise SourceError("bad_format", f"{path}: not a JSON document store") from None
        if not isinstance(store, dict):
            raise SourceError("bad_format", f"{path}: not a JSON document store")
        return store, modified

    def _doc_id(self, ref_doc_id: str, info: Any) -> str | None:
        key = self._config.doc_id_key
        raw = ref_doc_id if key is None else _metadata(info).get(key)
        if not isinstance(raw, str) or not raw.strip():
            return None
        return join_key(self._config.id_prefix + raw)

    def _chunks(self, doc_id: str, ref_doc_id: str, info: Any, hashed: Any, modified: float) -> list[ChunkRow]:
        config = self._config
        metadata = _metadata(info)
        nodes = info.get("node_ids") if isinstance(info, dict) else None
        if not isinstance(nodes, list) or not nodes:
            raise _BadDocument
        if config.version_key is None:
            version = hashed.get("doc_hash") if isinstance(hashed, dict) else None
        else:
            version = metadata.get(config.version_key)
        if not isinstance(version, str | int) or isinstance(version, bool) or not str(version).strip():
            raise _BadDocument
        indexed_at = modified if config.indexed_at_key is None else _seconds(metadata.get(config.indexed_at_key))
        acl_value = metadata.get(config.acl_key) if config.acl_key else None
        acl = None if acl_value is None else list(read_acl(acl_value))
        return [ChunkRow(config.index, doc_id, str(version).strip(), indexed_at, acl) for _ in nodes]


def _metadata(info: Any) -> dict[str, Any]:
    metadata = info.get("metadata") if isinstance(info, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _seconds(value: Any) -> float:
    if value is None or isinstance(value, bool):
        raise _BadDocument
    return read_seconds(value)
