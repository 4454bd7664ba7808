"""Persistence of the catalog: SQLModel tables, loading at start-up, and a sink that writes the
documents and index entries changed by a batch before the batch is acknowledged.

Every write takes the next value of the one-row ``catalog_revision`` table in its transaction and
stamps the rows it changes with it (migration 0013): a process reads the rows another one wrote
since a revision (:func:`changes_since`), which is how a running ``serve`` follows ``ragmon
replay`` of catalog events into the same database (``monitor/storage/catalog_refresh.py``). The
counter's row lock orders the writers: a revision is taken and committed before the next one is
given out, so a reader that saw revision N has seen every row stamped N or less.

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

from sqlalchemy import JSON, BigInteger, Column, Engine, Table, Text, and_, cast, or_
from sqlalchemy import select as core_select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, select

from ragmon.monitor.core.catalog import Catalog, DocumentState, IndexedState
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.storage.upsert import conflict_statement


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
    revision: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, index=True, server_default="0"))


class CatalogIndexed(SQLModel, table=True):
    __tablename__ = "catalog_indexed"
    index_name: str = Field(primary_key=True, max_length=256)
    doc_id: str = Field(primary_key=True, max_length=256)
    version: str = Field(max_length=256)
    indexed_at: float
    embedding_model: str | None = Field(default=None, max_length=256)
    chunks: int | None = None
    # who the index lets read the document's chunks (migration 0015); None: unknown
    acl: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    revision: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, index=True, server_default="0"))


class CatalogRevision(SQLModel, table=True):
    """One row: the last revision given to a write of catalog rows."""

    __tablename__ = "catalog_revision"
    id: int = Field(primary_key=True)
    value: int = Field(sa_column=Column(BigInteger, nullable=False))


def load_catalog(engine: Engine, catalog: Catalog) -> int:
    """Fill ``catalog`` from the store; return the revision it reflects (every row stamped with it
    or less), from which :func:`changes_since` goes on."""
    revision, documents, indexed = changes_since(engine, None)
    catalog.load(documents, indexed)
    return revision


def changes_since(engine: Engine, revision: int | None) -> tuple[int, list[DocumentState], list[IndexedState]]:
    """The store's revision, and the documents and index entries written after ``revision`` (all
    of them for None). The revision is read first, in the same transaction: rows stamped after it
    may be returned too, and are returned again by the next call (merging them is idempotent)."""
    with Session(engine) as session:
        current = session.execute(core_select(_REVISION.c.value)).scalar_one_or_none() or 0  # no write yet: 0
        if revision is not None and current <= revision:
            return current, [], []
        documents_query, indexed_query = select(CatalogDocument), select(CatalogIndexed)
        if revision is not None:
            documents_query = documents_query.where(_DOCUMENTS.c.revision > revision)
            indexed_query = indexed_query.where(_INDEXED.c.revision > revision)
        documents = [
            DocumentState(r.doc_id, r.tenant, r.version, r.modified_at, tuple(r.acl) if r.acl is not None else None,
                          r.deleted, dict(r.history))
            for r in session.exec(documents_query)
        ]
        indexed = [
            IndexedState(r.index_name, r.doc_id, r.version, r.indexed_at, r.embedding_model, r.chunks,
                         tuple(r.acl) if r.acl is not None else None)
            for r in session.exec(indexed_query)
        ]
    return current, documents, indexed


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
                revision = next_revision(connection)
                _upsert(connection, _DOCUMENTS, [{**row, "revision": revision} for row in document_rows], ("doc_id",),
                        _document_is_newer)
                _upsert(connection, _INDEXED, [{**row, "revision": revision} for row in indexed_rows],
                        ("index_name", "doc_id"), _indexed_is_newer)
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
_REVISION: Table = CatalogRevision.__table__  # type: ignore[assignment]


def next_revision(connection: Any) -> int:
    """Take the next catalog revision in ``connection``'s transaction (the counter's one row made by
    the first write); its row stays locked until the transaction ends, so revisions are committed
    in the order they are given out."""
    statement = conflict_statement(connection, _REVISION, "next", lambda insert: (
        insert.values(id=1, value=1).on_conflict_do_update(index_elements=["id"], set_={"value": _REVISION.c.value + 1})
        .returning(_REVISION.c.value)))
    return connection.execute(statement).scalar_one()


def _document_row(state: DocumentState) -> dict[str, Any]:
    return {"doc_id": state.doc_id, "tenant": state.tenant, "version": state.version,
            "modified_at": state.modified_at, "acl": list(state.acl) if state.acl is not None else None,
            "deleted": state.deleted, "history": dict(state.history), "history_size": len(state.history)}


def _indexed_row(entry: IndexedState) -> dict[str, Any]:
    return {"index_name": entry.index, "doc_id": entry.doc_id, "version": entry.version,
            "indexed_at": entry.indexed_at, "embedding_model": entry.embedding_model, "chunks": entry.chunks,
            "acl": list(entry.acl) if entry.acl is not None else None}


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
               and_(new.indexed_at == row.indexed_at, _differs(row, new, "version", "embedding_model", "chunks",
                                                                           "acl")))


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
    statement = conflict_statement(connection, table, ("newer rows", keys, is_newer), lambda insert: (
        insert.on_conflict_do_update(
            index_elements=list(keys),
            set_={c.name: insert.excluded[c.name] for c in table.columns if c.name not in keys},
            where=is_newer(table.c, insert.excluded))))
    connection.execute(statement, list(rows))  # the driver sends the rows in order
