"""The ``sql`` source: any SQL query that says what an index holds (docs/catalog.md, "Any SQL query").

The query returns one row per chunk (or per document) with the columns ``columns`` names: the
document id, the version indexed, when, and optionally the readers the index holds and the index
name. A vector store kept in PostgreSQL (LangChain's PGVector: ``langchain_pg_embedding`` with its
JSONB ``cmetadata``) is read by a query on the metadata's keys, e.g.::

    SELECT e.cmetadata->>'source' AS doc_id, e.cmetadata->>'doc_version' AS version,
           e.cmetadata->'acl' AS acl, e.cmetadata->>'indexed_at' AS indexed_at
    FROM langchain_pg_embedding e JOIN langchain_pg_collection c ON c.uuid = e.collection_id
    WHERE c.name = :collection

Rows fold into one index entry per document (``index_rows.fold``). A row missing a required value, or
holding one that cannot be read (a time no accepted form reads, an ACL that is no list of principals),
is refused (``bad_record``) and, when its document is known, that document keeps its last state: a
document is never read from some of its chunks only.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.index_rows import ChunkRow, fold
from ragmon.collectors.catalog_sources.sql_rows import read_rows
from ragmon.monitor.config.catalog_sources import SqlSourceConfig
from ragmon.monitor.core.acl import BadAcl, read_acl
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.times import BadTime, read_seconds


class _BadRow(ValueError):
    pass


class SqlSource:
    """A query's rows as index entries (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: SqlSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context
        self._zone = ZoneInfo(config.time_zone) if config.time_zone else None

    def read(self) -> Snapshot:
        config = self._config
        names, rows = read_rows(config, self.name, config.query, config.parameters, self._context)
        position = self._positions(names)
        snapshot = Snapshot(index_entries={})
        chunks: list[ChunkRow] = []
        for row in rows:
            try:
                chunks.append(self._chunk(row, position))
            except _BadRow as bad:
                snapshot.refuse("bad_record")
                if bad.args:
                    snapshot.unread_entries.add(bad.args[0])
        chunks = [chunk for chunk in chunks if (chunk.index, chunk.doc_id) not in snapshot.unread_entries]
        snapshot.index_entries = fold(chunks, config.max_items, snapshot)
        return snapshot

    def _positions(self, names: list[str]) -> dict[str, int]:
        """Where each configured column is in the result; a column missing fails the sync (a query that
        does not say what the configuration expects is not a list of empty rows)."""
        columns = self._config.columns
        wanted = {"doc_id": columns.doc_id, "version": columns.version, "indexed_at": columns.indexed_at,
                  "acl": columns.acl, "index": columns.index}
        positions = {}
        for part, column in wanted.items():
            if column is None:
                continue
            if column not in names:
                raise SourceError("bad_format", f"{self.name}: the query returns no column {column!r} "
                                  f"(columns.{part})")
            positions[part] = names.index(column)
        return positions

    def _chunk(self, row: Sequence[Any], position: dict[str, int]) -> ChunkRow:
        raw_id = row[position["doc_id"]]
        if not isinstance(raw_id, str) or not raw_id.strip():
            raise _BadRow
        index = self._config.index if "index" not in position else row[position["index"]]
        if not isinstance(index, str) or not index.strip():
            raise _BadRow
        key = (index, join_key(self._config.id_prefix + raw_id))
        try:
            version = _text(row[position["version"]])
            indexed_at = self._seconds(row[position["indexed_at"]])
            acl = _acl(row[position["acl"]]) if "acl" in position else None
        except (_BadRow, BadTime, BadAcl):
            raise _BadRow(key) from None
        return ChunkRow(index, key[1], version, indexed_at, acl)

    def _seconds(self, value: Any) -> float:
        if isinstance(value, decimal.Decimal):
            value = float(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            if self._zone is None:
                raise _BadRow
            value = value.replace(tzinfo=self._zone)
        if value is None or isinstance(value, bool):
            raise _BadRow
        return read_seconds(value, self._zone)


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _BadRow
    text = str(value).strip()
    if not text:
        raise _BadRow
    return text


def _acl(value: Any) -> list[str] | None:
    """A JSONB array comes as a list, a text column as a string: both by the one ACL rule."""
    if value is None:
        return None
    return list(read_acl(value))
