"""The findings table (SQLModel, migrations 0005 and 0009): one compact row per rule that fired on a trace.

Rows hold ids (shown ids: ``Redactor.shown_id``), the signal, the stage and the rule in words,
already redacted: no query or passage text. Each row has a key made of what produced it, so a
retried batch or a Kafka redelivery stores it once (``INSERT … ON CONFLICT DO NOTHING``). Rows are
read newest first, by their autoincrement id, which also serves as the paging cursor. The whole
principal lists of a row (``principals``, up to 256 KiB) are never read with the rows: only
:meth:`FindingsStore.principals` reads them, for ``ragmon trace show --full``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Column, Engine, String, Table, Text, delete, func, or_, text
from sqlalchemy import select as core_select
from sqlalchemy.orm import defer
from sqlmodel import Field, Session, SQLModel, select

from ragmon.monitor.storage.keyed_rows import count_up_to, insert_new_keys, newest_first, prune_recorded_before


class FindingRow(SQLModel, table=True):
    __tablename__ = "finding"
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)  # sha256 of what produced the row: stored once
    trace_id: str = Field(max_length=256, index=True)
    time: float  # the trace's time (Unix seconds)
    recorded_at: float = Field(index=True)  # when it was stored: what retention goes by
    tenant: str = Field(max_length=256)
    index_name: str = Field(max_length=256)
    caller: str = Field(default="", max_length=64)  # the caller's pseudonym, "" when the trace had none
    signal: str = Field(max_length=32, index=True)
    stage: str | None = Field(default=None, max_length=16)
    passage_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    documents: list[list[str | None]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))  # bounded: the first few principals of each list
    # {list name: {"values": [...], "omitted": n}}, the whole lists the reason cuts short (wording.py);
    # {} on rows stored before 0009
    principals: dict[str, Any] = Field(default_factory=dict, sa_column=Column(
        JSON, nullable=False, server_default=text("'{}'")))
    # the id of the caller key its keyed ids were made with (keyring.key_id); "" before 0014
    caller_key_id: str = Field(default="", sa_column=Column(String(16), nullable=False, server_default=""))


_TABLE: Table = FindingRow.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class FindingQuery:
    """What ``GET /api/v1/findings`` and ``ragmon findings list`` select: every field optional;
    ``tenant``, ``index`` and ``trace_id`` a stored value or several (any of them: the forms one
    id a reader gives may be stored as); ``since``: Unix seconds of the trace; ``cursor``: the id
    of the last row of the previous page."""

    signal: str | None = None
    tenant: str | tuple[str, ...] | None = None
    index: str | tuple[str, ...] | None = None
    since: float | None = None
    trace_id: str | tuple[str, ...] | None = None
    limit: int = 50
    cursor: int | None = None


class FindingsStore:
    def __init__(self, engine: Engine, key_id: str = "") -> None:
        """``key_id``: the id of the caller key the rows' keyed ids are made with
        (``Redactor.key_id``), stored with each row this store writes."""
        self._engine = engine
        self._key_id = key_id

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Store rows (dicts of :class:`FindingRow` columns but ``id``); a row whose key is
        stored already is skipped. Raises :class:`Retryable` when the database is unavailable."""
        insert_new_keys(self._engine, _TABLE, [{**row, "caller_key_id": self._key_id} for row in rows],
                        "findings store")

    def find(self, query: FindingQuery) -> list[FindingRow]:
        """The rows ``query`` selects, newest first, at most ``query.limit``; without their whole
        principal lists (reading ``principals`` of such a row raises)."""
        statement = select(FindingRow).options(defer(FindingRow.principals, raiseload=True)).limit(query.limit)
        if query.signal is not None:
            statement = statement.where(FindingRow.signal == query.signal)
        statement = newest_first(statement, FindingRow,
                                            ((FindingRow.tenant, query.tenant), (FindingRow.index_name, query.index),
                                             (FindingRow.trace_id, query.trace_id)),
                                            query.since, query.cursor)
        with Session(self._engine) as session:
            return list(session.exec(statement))

    def count(self, at_most: int, trace_id: str | None = None) -> tuple[int, bool]:
        """How many rows are stored (of one trace), counted up to ``at_most``, and whether there
        are more."""
        rows = core_select(_TABLE.c.id)
        if trace_id is not None:
            rows = rows.where(_TABLE.c.trace_id == trace_id)
        return count_up_to(self._engine, rows, at_most)

    def principals(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The whole principal lists of the rows ``ids`` (see :class:`FindingRow`), by id: what
        ``ragmon trace show --full`` prints beside the bounded reasons."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        statement = core_select(_TABLE.c.id, _TABLE.c.principals).where(_TABLE.c.id.in_(wanted))
        with self._engine.connect() as connection:
            return {row.id: row.principals for row in connection.execute(statement)}

    def erase(self, callers: Sequence[str], trace_ids: Sequence[str], *, dry_run: bool = False) -> int:
        """Erasure: delete the findings of the caller with one of the pseudonyms ``callers`` (theirs
        under every caller key) and those of ``trace_ids`` (the traces of a person's erased
        samples); returns how many (would go)."""
        matches = [_TABLE.c.trace_id.in_(trace_ids[start:start + 500]) for start in range(0, len(trace_ids), 500)]
        if callers:
            matches.append(_TABLE.c.caller.in_(tuple(callers)))
        if not matches:
            return 0
        with self._engine.begin() as connection:
            if dry_run:
                counted = core_select(func.count()).select_from(_TABLE).where(or_(*matches))
                return connection.execute(counted).scalar_one()
            return connection.execute(delete(_TABLE).where(or_(*matches))).rowcount or 0

    def prune(self, before: float) -> int:
        """Delete the rows recorded before ``before`` (Unix seconds); returns how many."""
        return prune_recorded_before(self._engine, _TABLE, before)


def as_json(row: FindingRow) -> dict[str, Any]:
    """A row as the API and ``-o json`` show it."""
    return {"id": row.id, "trace_id": row.trace_id, "time": row.time, "recorded_at": row.recorded_at,
            "tenant": row.tenant, "index": row.index_name, "caller": row.caller or None, "signal": row.signal,
            "stage": row.stage, "passage_ids": row.passage_ids,
            "documents": [{"doc_id": doc_id, "version": version} for doc_id, version in row.documents],
            "reason": row.reason}
