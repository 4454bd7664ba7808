"""LangChain's indexing record manager as index entries (docs/catalog.md, "LangChain's record manager").

``langchain_classic.indexes.index()`` with a ``SQLRecordManager`` keeps one row per chunk written to
the vector store, in table ``upsertion_record`` (langchain-classic 1.0)::

    uuid VARCHAR PRIMARY KEY, key VARCHAR, namespace VARCHAR NOT NULL, group_id VARCHAR, updated_at FLOAT
    UNIQUE (key, namespace)

- ``namespace``: the record manager's, one per vector store collection: the source reads one;
- ``group_id``: the chunk's source document (the value of ``index()``'s ``source_id_key``), the
  document id by the join rule (after ``id_prefix``); a row without one (``source_id_key`` unset)
  names no document and is refused (``bad_record``);
- ``key``: the chunk's hash (the id the vector store holds it under), the version (see below);
- ``updated_at``: Unix seconds, by the database's clock, when ``index()`` last wrote or confirmed
  the chunk: the entry's ``indexed_at`` is the newest of its version's records.

The version: with ``version_pattern``, the group ``version`` of each key (an ``index()`` run with a
``key_encoder`` that puts the document's own version in the key), the oldest record's while records of
an earlier version are left (``index_rows``); a key it does
not match refuses the document (``bad_record``, it keeps its last state). Without it, LangChain's own
hashes: the key of a document's one record, or ``sha256:`` and the SHA-256 of its keys, sorted, one
per line, which changes whenever a chunk does. The record manager keeps no ACL: entries carry none.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict

import sqlalchemy

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.index_rows import ChunkRow, fold
from ragmon.collectors.catalog_sources.sql_rows import read_rows
from ragmon.monitor.config.catalog_sources import RecordManagerSourceConfig
from ragmon.monitor.core.doc_ids import join_key

_RECORDS = sqlalchemy.text(
    "SELECT group_id, \"key\", updated_at FROM upsertion_record WHERE namespace = :namespace")


class RecordManagerSource:
    """A ``SQLRecordManager``'s table as index entries
    (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: RecordManagerSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context
        self._index = config.index or config.namespace
        self._pattern = re.compile(config.version_pattern) if config.version_pattern else None

    def read(self) -> Snapshot:
        columns, rows = read_rows(self._config, self.name, _RECORDS, {"namespace": self._config.namespace},
                                  self._context)
        if columns != ["group_id", "key", "updated_at"]:  # pragma: no cover - the SELECT names them
            raise SourceError("bad_format", f"{self.name}: unexpected columns")
        snapshot = Snapshot(index_entries={})
        records: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for group_id, key, updated_at in rows:
            if not isinstance(group_id, str) or not group_id.strip() or not isinstance(key, str) or not key:
                snapshot.refuse("bad_record")
                continue
            doc_id = join_key(self._config.id_prefix + group_id)
            seconds = _seconds(updated_at)
            if seconds is None:
                snapshot.refuse("bad_record")
                snapshot.unread_entries.add((self._index, doc_id))
                continue
            records[doc_id].append((key, seconds))
        chunks: list[ChunkRow] = []
        for doc_id, held in records.items():
            if (self._index, doc_id) in snapshot.unread_entries:
                continue
            versions = self._versions(held)
            if versions is None:
                snapshot.refuse("bad_record")
                snapshot.unread_entries.add((self._index, doc_id))
                continue
            chunks += [ChunkRow(self._index, doc_id, version, seconds)
                       for version, (_, seconds) in zip(versions, held, strict=True)]
        snapshot.index_entries = fold(chunks, self._config.max_items, snapshot)
        return snapshot

    def _versions(self, held: list[tuple[str, float]]) -> list[str] | None:
        """The version of each of a document's records (None: a key the pattern does not match)."""
        if self._pattern is None:
            keys = sorted(key for key, _ in held)
            version = keys[0] if len(keys) == 1 else "sha256:" + hashlib.sha256(
                "\n".join(keys).encode()).hexdigest()
            return [version] * len(held)
        versions = []
        for key, _ in held:
            match = self._pattern.search(key)
            if match is None or not match["version"]:
                return None
            versions.append(match["version"])
        return versions


def _seconds(value: object) -> float | None:
    """``updated_at``: a FLOAT column (Unix seconds); PostgreSQL may hand a Decimal."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
