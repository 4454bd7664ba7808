"""Persistence of the catalog: SQLModel tables, loading at start-up, and a sink that writes the
documents and index entries changed by a batch before the batch is acknowledged.

In scaled mode every replica reads the whole catalog topic and so writes the same rows, each at
its own pace. The writes are built so that this is safe and cheap: one ``INSERT ... ON CONFLICT
DO UPDATE`` per chunk of rows, in key order (two replicas lock rows in the same order: no
deadlock; a row inserted by another replica meanwhile is an update, not a duplicate-key error),
and the update applies only when the new state is further along than the row: a later
modification (a later indexing), or as late with more history. A replica behind the others never
moves a row back, and one that is level with the row does not rewrite it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Column, Engine, Table, Text, and_, cast, or_
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, select

from ragmon.monitor.core.catalog import Catalog, DocumentState, IndexedState
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.storage.upsert import conflict_insert


class CatalogDocument(SQLModel, table=True):
    __tablename__ = "catalog_document"
    doc_id: str = Field(primary_key=True, max_length=256)
    tenant: str = Field(max_length=256)
    version: str = Field(max_length=256)
    modified_at: float
    acl: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    deleted: bool = False
    history: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    history_size: int = 0  # versions in history: orders two writes of the same modification time


class CatalogIndexed(SQLModel, table=True):
    __tablename__ = "catalog_indexed"
    index_name: str = Field(primary_key=True, max_length=256)
    doc_id: str = Field(primary_key=True, max_length=256)
    version: str = Field(max_length=256)
    indexed_at: float
    embedding_model: str | None = Field(default=None, max_length=256)
    chunks: int | None = None


def load_catalog(engine: Engine, catalog: Catalog) -> None:
    """Fill ``catalog`` from the store."""
    with Session(engine) as session:
        documents = [
            DocumentState(r.doc_id, r.tenant, r.version, r.modified_at, tuple(r.acl) if r.acl is not None else None,
                          r.deleted, dict(r.history))
            for r in session.exec(select(CatalogDocument))
        ]
        indexed = [
            IndexedState(r.index_name, r.doc_id, r.version, r.indexed_at, r.embedding_model, r.chunks)
            for r in session.exec(select(CatalogIndexed))
        ]
    catalog.load(documents, indexed)


class CatalogPersistence:
    """Sink: remembers which catalog entries a batch changed and writes them on flush.

    The in-memory catalog is already current (the signal engine applies catalog events); this
    makes it survive a restart. A database error raises :class:`Retryable`, so the batch is not
    acknowledged and the changes stay pending.
    """

    name = "catalog"
    durable = True

    def __init__(self, engine: Engine, catalog: Catalog) -> None:
        self._engine = engine
        self._catalog = catalog
        self._documents: set[str] = set()
        self._indexed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def consume(self, observation: Observation) -> None:
        event = observation.event
        if isinstance(event, DocumentEvent):
            with self._lock:
                self._documents.add(event.doc_id)
        elif isinstance(event, IndexEvent):
            with self._lock:
                self._indexed.add((event.index, event.doc_id))

    def flush(self, timeout: float) -> bool:
        with self._lock:
            if not self._documents and not self._indexed:
                return True
            documents, indexed = set(self._documents), set(self._indexed)
        document_rows = [_document_row(state) for doc_id in sorted(documents)
                         if (state := self._catalog.document(doc_id)) is not None]
        indexed_rows = [_indexed_row(entry) for key in sorted(indexed)
                        if (entry := self._catalog.indexed.get(key)) is not None]
        try:
            with self._engine.begin() as connection:
                _upsert(connection, _DOCUMENTS, document_rows, ("doc_id",), _document_is_newer)
                _upsert(connection, _INDEXED, indexed_rows, ("index_name", "doc_id"), _indexed_is_newer)
        except SQLAlchemyError as error:
            raise Retryable(f"catalog store: {type(error).__name__}") from error
        with self._lock:
            self._documents -= documents
            self._indexed -= indexed
        return True

    def shutdown(self) -> None:
        pass


_DOCUMENTS: Table = CatalogDocument.__table__  # type: ignore[assignment]
_INDEXED: Table = CatalogIndexed.__table__  # type: ignore[assignment]


def _document_row(state: DocumentState) -> dict[str, Any]:
    return {"doc_id": state.doc_id, "tenant": state.tenant, "version": state.version,
            "modified_at": state.modified_at, "acl": list(state.acl) if state.acl is not None else None,
            "deleted": state.deleted, "history": dict(state.history), "history_size": len(state.history)}


def _indexed_row(entry: IndexedState) -> dict[str, Any]:
    return {"index_name": entry.index, "doc_id": entry.doc_id, "version": entry.version,
            "indexed_at": entry.indexed_at, "embedding_model": entry.embedding_model, "chunks": entry.chunks}


def _document_is_newer(row: Any, new: Any) -> Any:
    """A later modification; or as late with more history; or the same point with another
    state (the in-memory catalog lets a later event of the same time win)."""
    return or_(new.modified_at > row.modified_at,
               and_(new.modified_at == row.modified_at,
                    or_(new.history_size > row.history_size,
                        and_(new.history_size == row.history_size, _differs(row, new, "version", "deleted",
                                                                            "tenant", "acl")))))


def _indexed_is_newer(row: Any, new: Any) -> Any:
    return or_(new.indexed_at > row.indexed_at,
               and_(new.indexed_at == row.indexed_at, _differs(row, new, "version", "embedding_model", "chunks")))


def _differs(row: Any, new: Any, *names: str) -> Any:
    # JSON columns compared as text: PostgreSQL's json type has no equality
    def value(columns: Any, name: str) -> Any:
        column = columns[name]
        return cast(column, Text) if isinstance(column.type, JSON) else column

    return or_(*(value(new, name).is_distinct_from(value(row, name)) for name in names))


def _upsert(connection: Any, table: Table, rows: Sequence[dict[str, Any]], keys: tuple[str, ...],
            is_newer: Any) -> None:
    """Insert ``rows`` (already in key order), or update the existing row where ``is_newer``."""
    if not rows:
        return  # an empty executemany would run the statement once, with no values
    statement = conflict_insert(connection, table)
    new = statement.excluded
    statement = statement.on_conflict_do_update(
        index_elements=list(keys), set_={c.name: new[c.name] for c in table.columns if c.name not in keys},
        where=is_newer(table.c, new))
    connection.execute(statement, list(rows))  # the driver sends the rows in order
