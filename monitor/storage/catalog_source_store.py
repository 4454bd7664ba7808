"""The last snapshot of each catalog source (migration 0011): per source, the document and index events
its last complete sync applied, tombstones and removals included. A sync plans against it and
replaces it, in one transaction, only once its events were applied (``monitor/app/catalog_sync.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from sqlalchemy import Engine, Table, Text, bindparam, delete, select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, SQLModel

from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.storage.upsert import conflict_statement

DOCUMENT = ""  # the index_name of a document's row: an index name is never empty
_CHUNK = 500  # rows per statement

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(DocumentEvent | IndexEvent).decode

Documents = Mapping[str, DocumentEvent]
Entries = Mapping[tuple[str, str], IndexEvent]


class CatalogSourceItem(SQLModel, table=True):
    __tablename__ = "catalog_source_item"
    source: str = Field(primary_key=True, max_length=64)
    index_name: str = Field(primary_key=True, max_length=256)  # "" for a document
    doc_id: str = Field(primary_key=True, max_length=256)
    event: str = Field(sa_type=Text)  # the event as applied (JSON)


_TABLE: Table = CatalogSourceItem.__table__  # type: ignore[assignment]
# Rows gone from a source, deleted per index name with ``doc_id IN (...)``: SQLite answers a
# row-value ``(index_name, doc_id) IN (...)`` by reading every row of the source, once per chunk.
# Built once, its values bound when executed, as every statement run again and again
# (``upsert.conflict_statement`` says why).
_GONE = delete(_TABLE).where(_TABLE.c.source == bindparam("source"), _TABLE.c.index_name == bindparam("index_name"),
                             _TABLE.c.doc_id.in_(bindparam("doc_ids", expanding=True)))


class SourceStateStore:
    """Loads and replaces the last snapshot of each source. Database errors raise :class:`Retryable`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def load(self, source: str) -> tuple[dict[str, DocumentEvent], dict[tuple[str, str], IndexEvent]]:
        """The documents and index entries of ``source``'s last snapshot (empty before its first sync)."""
        documents: dict[str, DocumentEvent] = {}
        entries: dict[tuple[str, str], IndexEvent] = {}
        try:
            with self._engine.connect() as connection:
                rows = connection.execute(select(_TABLE.c.index_name, _TABLE.c.doc_id, _TABLE.c.event)
                                          .where(_TABLE.c.source == source))
                for index_name, doc_id, text in rows:
                    event = _decode(text)
                    if index_name == DOCUMENT and isinstance(event, DocumentEvent):
                        documents[doc_id] = event
                    elif isinstance(event, IndexEvent):
                        entries[(index_name, doc_id)] = event
        except SQLAlchemyError as error:
            raise Retryable(f"catalog source store: {type(error).__name__}") from error
        return documents, entries

    def replace(self, source: str, before: tuple[Documents, Entries],
                after: tuple[Documents | None, Entries | None]) -> None:
        """Make ``after`` the last snapshot of ``source`` (``before`` being the one stored), writing
        only the rows that changed, in one transaction. A part that is None stays as it was."""
        rows: list[dict[str, str]] = []
        gone: list[tuple[str, str]] = []
        documents, entries = after
        if documents is not None:
            _changes(before[0], documents, lambda doc_id: (DOCUMENT, doc_id), rows, gone, source)
        if entries is not None:
            _changes(before[1], entries, lambda key: key, rows, gone, source)
        if not rows and not gone:
            return
        try:
            by_index: dict[str, list[str]] = {}
            for index_name, doc_id in gone:
                by_index.setdefault(index_name, []).append(doc_id)
            with self._engine.begin() as connection:
                for index_name, doc_ids in sorted(by_index.items()):
                    for start in range(0, len(doc_ids), _CHUNK):
                        connection.execute(_GONE, {"source": source, "index_name": index_name,
                                                   "doc_ids": doc_ids[start:start + _CHUNK]})
                upsert = conflict_statement(connection, _TABLE, "events", lambda insert: insert.on_conflict_do_update(
                    index_elements=["source", "index_name", "doc_id"], set_={"event": insert.excluded.event}))
                for start in range(0, len(rows), _CHUNK):
                    connection.execute(upsert, rows[start:start + _CHUNK])
        except SQLAlchemyError as error:
            raise Retryable(f"catalog source store: {type(error).__name__}") from error

    def sources(self) -> list[str]:
        """The names of the sources with a stored snapshot."""
        with self._engine.connect() as connection:
            return [row[0] for row in connection.execute(select(_TABLE.c.source).distinct())]


def _changes(before: Mapping, after: Mapping, key_of, rows: list, gone: list, source: str) -> None:
    for key, event in after.items():
        previous = before.get(key)
        encoded = _encode(event).decode()
        if previous is None or _encode(previous).decode() != encoded:
            index_name, doc_id = key_of(key)
            rows.append({"source": source, "index_name": index_name, "doc_id": doc_id, "event": encoded})
    gone.extend(key_of(key) for key in before if key not in after)
