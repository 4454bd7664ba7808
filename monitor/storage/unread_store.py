"""The unread-traces table (SQLModel, migration 0012): one row per OTLP trace ragmon could not read,
or read without a caller or without a context, with a bounded, redacted digest of its spans
(``collectors/unread``): scope names and versions, span names and kinds, attribute keys, never a
value. Written by the OTLP receiver of every replica into the one database, so every replica and
``ragmon otlp unread`` read the same rows; deleted by the scheduler's ``retention`` job after
``otlp.unread_retention_days``.

Each row has a key made of the trace's shown id and what it lacked, so a trace assembled twice
(spans arriving after its delivery) is stored once. Rows are read newest first, by their
autoincrement id, which also serves as the paging cursor. ``tenant`` is the shown tenant the trace
named, "" when it named none (such rows are read only by a reader of every tenant).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Column, Engine, String, Table, Text
from sqlalchemy import select as core_select
from sqlmodel import Field, Session, SQLModel, select

from ragmon.monitor.storage.keyed_rows import count_up_to, insert_new_keys, newest_first, prune_recorded_before


class UnreadRow(SQLModel, table=True):
    __tablename__ = "unread_trace"
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)  # sha256 of the shown trace id and what was missing
    trace_id: str = Field(max_length=256)
    time: float  # the root span's start (Unix seconds)
    recorded_at: float = Field(index=True)  # when it was stored: what retention goes by
    tenant: str = Field(default="", max_length=256)  # shown; "" when the trace named none
    scope: str = Field(max_length=256, index=True)  # the trace's instrumentation scope, shown
    missing: str = Field(max_length=16)  # retrieval, caller or context
    dialect: str = Field(default="", max_length=32)  # the closest dialect; "" for none
    lacked: str = Field(sa_column=Column(Text, nullable=False))  # in words, at most 1,024 characters
    spans: int
    digest: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))  # at most 16 KiB
    # the id of the caller key its keyed ids were made with (keyring.key_id); "" before 0014
    caller_key_id: str = Field(default="", sa_column=Column(String(16), nullable=False, server_default=""))


_TABLE: Table = UnreadRow.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class UnreadQuery:
    """What ``GET /api/v1/unread`` and ``ragmon otlp unread`` select: every field optional;
    ``scope`` and ``tenant`` a stored value or several (any of them: the forms one name a reader
    gives may be stored as); ``since``: Unix seconds of the trace; ``cursor``: the id of the last
    row of the previous page."""

    scope: str | tuple[str, ...] | None = None
    missing: str | None = None
    tenant: str | tuple[str, ...] | None = None
    since: float | None = None
    limit: int = 50
    cursor: int | None = None


class UnreadStore:
    def __init__(self, engine: Engine, key_id: str = "") -> None:
        """``key_id``: the id of the caller key the rows' keyed ids are made with
        (``Redactor.key_id``), stored with each row this store writes."""
        self._engine = engine
        self._key_id = key_id

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Store rows (dicts of :class:`UnreadRow` columns but ``id``); a row whose key is stored
        already is skipped. Raises :class:`Retryable` when the database is unavailable."""
        insert_new_keys(self._engine, _TABLE, [{**row, "caller_key_id": self._key_id} for row in rows],
                        "unread store")

    def find(self, query: UnreadQuery) -> list[UnreadRow]:
        """The rows ``query`` selects, newest first, at most ``query.limit``."""
        statement = select(UnreadRow).limit(query.limit)
        if query.missing is not None:
            statement = statement.where(UnreadRow.missing == query.missing)
        statement = newest_first(statement, UnreadRow,
                                            ((UnreadRow.scope, query.scope), (UnreadRow.tenant, query.tenant)),
                                            query.since, query.cursor)
        with Session(self._engine) as session:
            return list(session.exec(statement))

    def count(self, at_most: int) -> tuple[int, bool]:
        """How many rows are stored, counted up to ``at_most``, and whether there are more."""
        return count_up_to(self._engine, core_select(_TABLE.c.id), at_most)

    def prune(self, before: float) -> int:
        """Delete the rows recorded before ``before`` (Unix seconds); returns how many."""
        return prune_recorded_before(self._engine, _TABLE, before)


def as_json(row: UnreadRow) -> dict[str, Any]:
    """A row as the API and ``-o json`` show it."""
    return {"id": row.id, "trace_id": row.trace_id, "time": row.time, "recorded_at": row.recorded_at,
            "tenant": row.tenant or None, "scope": row.scope, "missing": row.missing,
            "closest_dialect": row.dialect or None, "lacked": row.lacked, "spans": row.spans, "digest": row.digest}
