"""The digest of served documents (migration 0011): per index, tenant, document and version, how many
passages traffic served and when last, so that ``ragmon catalog check`` can hold what traffic names
against what the catalog knows, from any process, without keeping a trace.

It holds ids and counts only (no query, caller or text), as the catalog does, and is bounded: rows
not served for ``catalog.served_days`` are deleted, and beyond ``catalog.served_max_rows`` the least
recently served go first. Counts are gathered in memory and written every :data:`WRITE_SECONDS` by a
thread of the digest's own, never on the pipeline's (one upsert per key, adding to what other
replicas wrote); a write that fails is tried again with the next. Keys beyond :data:`MAX_PENDING`
between two writes, and ids longer than a column holds, are counted as dropped
(``ragmon_served_documents_dropped_total``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Table, case, delete, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, SQLModel

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.signals.results import LateSignals
from ragmon.monitor.storage.upsert import conflict_statement

WRITE_SECONDS = 5.0
PRUNE_SECONDS = 300.0
MAX_PENDING = 20_000  # distinct keys gathered between two writes
MAX_ID = 256  # the columns' length

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str, bool]  # index, tenant, doc id (or passage id), version ("" when none), id_only


class ServedDocument(SQLModel, table=True):
    __tablename__ = "served_document"
    index_name: str = Field(primary_key=True, max_length=256)
    tenant: str = Field(primary_key=True, max_length=256)
    doc_id: str = Field(primary_key=True, max_length=256)  # the passage's doc_id, else its own id (id_only)
    doc_version: str = Field(primary_key=True, max_length=256)  # "" when the passage named none
    id_only: bool = Field(primary_key=True)  # the passage named no document: doc_id holds its passage id
    passages: int  # passages served (distinct per trace)
    last_seen: float = Field(index=True)


_TABLE: Table = ServedDocument.__table__  # type: ignore[assignment]


def _add_counts(insert: Any) -> Any:
    """The upsert that adds a write's passage counts to the stored ones, keeping the later last sighting."""
    new = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=["index_name", "tenant", "doc_id", "doc_version", "id_only"],
        set_={"passages": _TABLE.c.passages + new.passages,
              "last_seen": case((new.last_seen > _TABLE.c.last_seen, new.last_seen), else_=_TABLE.c.last_seen)})


@dataclass(frozen=True, slots=True)
class Served:
    """One row of the digest."""

    index: str
    tenant: str
    doc_id: str
    version: str | None
    id_only: bool
    passages: int
    last_seen: float


class ServedDocuments:
    """Sink (not durable: a digest) and reader of the digest. :meth:`start` starts the writer thread
    (without it, counts are written at :meth:`shutdown` or by :meth:`write`); ``on_dropped`` is
    told of each key left out."""

    name = "served_documents"
    durable = False

    def __init__(self, engine: Engine, clock: Callable[[], float], keep_days: float, max_rows: int,
                 on_dropped: Callable[[], None] = lambda: None) -> None:
        self._engine = engine
        self._clock = clock
        self._keep_seconds = keep_days * 86400.0
        self._max_rows = max_rows
        self._pending: dict[Key, list[float]] = {}  # key -> [passages, last seen]
        self._lock = threading.Lock()
        self._pruned_at = 0.0
        self._on_dropped = on_dropped
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ServedDocuments:
        self._thread = threading.Thread(target=self._run, name="served-documents", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(WRITE_SECONDS):
            self.write(self._clock())

    def consume(self, observation: Observation) -> None:
        event = observation.event
        # a trace judged again after a catalog change (LateSignals) was counted when it was served
        if not isinstance(event, TraceEvent) or isinstance(observation.signals, LateSignals):
            return
        passages = {}  # distinct passage ids of the trace, whichever lists hold them
        for retrieval in event.retrievals:
            for passage in retrieval.passages:
                passages[passage.id] = passage
        if event.context is not None:
            for passage in event.context:
                passages[passage.id] = passage
        served: dict[tuple[str, str, bool], int] = {}
        for p in passages.values():
            document = (p.doc_id or p.id, p.doc_version or "", p.doc_id is None)
            served[document] = served.get(document, 0) + 1
        when = observation.received_at
        index, tenant = event.index.name, event.tenant
        too_long = len(index) > MAX_ID or len(tenant) > MAX_ID
        with self._lock:
            for (doc_id, version, id_only), n in served.items():
                if too_long or len(doc_id) > MAX_ID or len(version) > MAX_ID:
                    self._on_dropped()
                    continue
                key = (index, tenant, doc_id, version, id_only)
                counted = self._pending.get(key)
                if counted is None:
                    if len(self._pending) >= MAX_PENDING:
                        self._on_dropped()
                        continue
                    counted = self._pending[key] = [0, when]
                counted[0] += n
                counted[1] = max(counted[1], when)

    def flush(self, timeout: float) -> bool:
        return True  # the writer thread writes: no database work on the pipeline's thread

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self.write(self._clock())

    def write(self, now: float) -> None:
        """Add the gathered counts to the table (and prune it now and then); a failure keeps them."""
        with self._lock:
            pending, self._pending = self._pending, {}
        try:
            with self._engine.begin() as connection:
                if pending:
                    connection.execute(conflict_statement(connection, _TABLE, "counts", _add_counts), [
                        {"index_name": k[0], "tenant": k[1], "doc_id": k[2], "doc_version": k[3], "id_only": k[4],
                         "passages": int(v[0]), "last_seen": v[1]} for k, v in sorted(pending.items())])
                if now - self._pruned_at >= PRUNE_SECONDS:
                    self._prune(connection, now)
                    self._pruned_at = now
        except SQLAlchemyError as error:
            log.warning("served documents digest not written (%s); kept for the next write", type(error).__name__)
            with self._lock:
                for key, counted in pending.items():
                    if key in self._pending or len(self._pending) < MAX_PENDING:
                        mine = self._pending.setdefault(key, [0, counted[1]])
                        mine[0] += counted[0]
                        mine[1] = max(mine[1], counted[1])
                    else:
                        self._on_dropped()

    def _prune(self, connection, now: float) -> None:
        connection.execute(delete(_TABLE).where(_TABLE.c.last_seen < now - self._keep_seconds))
        rows = connection.execute(select(func.count()).select_from(_TABLE)).scalar_one()
        if rows > self._max_rows:
            cutoff = connection.execute(select(_TABLE.c.last_seen).order_by(_TABLE.c.last_seen.desc())
                                        .offset(self._max_rows).limit(1)).scalar_one()
            connection.execute(delete(_TABLE).where(_TABLE.c.last_seen <= cutoff))

    def read(self, since: float | None = None) -> list[Served]:
        """The rows served since ``since`` (default: the whole digest), most passages first."""
        query = select(_TABLE).order_by(_TABLE.c.passages.desc(), _TABLE.c.doc_id)
        if since is not None:
            query = query.where(_TABLE.c.last_seen >= since)
        with self._engine.connect() as connection:
            return [Served(r.index_name, r.tenant, r.doc_id, r.doc_version or None, r.id_only, r.passages,
                           r.last_seen) for r in connection.execute(query.limit(self._max_rows))]
