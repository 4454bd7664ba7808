"""Persistence of the catalog: SQLModel tables, loading at start-up, and a sink that writes the
documents and index entries changed by a batch before the batch is acknowledged."""

from __future__ import annotations

import threading

from sqlalchemy import JSON, Column, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, select

from ragmon.monitor.core.catalog import Catalog, DocumentState, IndexedState
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.pipeline import Observation


class CatalogDocument(SQLModel, table=True):
    __tablename__ = "catalog_document"
    doc_id: str = Field(primary_key=True, max_length=256)
    tenant: str = Field(max_length=256)
    version: str = Field(max_length=256)
    modified_at: float
    acl: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    deleted: bool = False
    history: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


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
        try:
            with Session(self._engine) as session:
                for doc_id in documents:
                    state = self._catalog.document(doc_id)
                    if state is not None:
                        session.merge(CatalogDocument(
                            doc_id=state.doc_id, tenant=state.tenant, version=state.version,
                            modified_at=state.modified_at, acl=list(state.acl) if state.acl is not None else None,
                            deleted=state.deleted, history=dict(state.history)))
                for key in indexed:
                    entry = self._catalog.indexed.get(key)
                    if entry is not None:
                        session.merge(CatalogIndexed(
                            index_name=entry.index, doc_id=entry.doc_id, version=entry.version,
                            indexed_at=entry.indexed_at, embedding_model=entry.embedding_model, chunks=entry.chunks))
                session.commit()
        except SQLAlchemyError as error:
            raise Retryable(f"catalog store: {type(error).__name__}") from error
        with self._lock:
            self._documents -= documents
            self._indexed -= indexed
        return True

    def shutdown(self) -> None:
        pass
