"""The conversation turns kept for samples' histories (SQLModel, migration 0016): one redacted
summary per chat turn (``conversation.turn_of``), written in bulk when a batch is flushed, read
when a sample of a later turn of the same conversation is first stored.

Every replica writes into the one database, so a replica sampling turn 3 finds turns 1 and 2
that another replica read. Bounded twice: per conversation, the newest ``keep`` turns
(older ones deleted as newer ones are written); and by age, ``sampling.history_retention_days``
(the scheduler's retention job). Keyed ids (the shown trace id and tenant, the conversation's and
the caller's pseudonyms) are made as a sample's are, and the rows record the caller key that made
them, for erasure and key rotation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Column, Connection, Engine, Index, String, Text, and_, bindparam, delete, func, or_
from sqlalchemy import select as core_select
from sqlmodel import Field, Session, SQLModel

from ragmon.monitor.labeling.conversation import bounded_history, is_earlier, order_key
from ragmon.monitor.storage.upsert import conflict_statement


class ConversationTurn(SQLModel, table=True):
    __tablename__ = "conversation_turn"
    __table_args__ = (Index("ix_conversation_turn_conversation", "tenant", "conversation"),)
    trace_id: str = Field(primary_key=True, max_length=256)  # shown, as the trace's sample has it
    tenant: str = Field(max_length=256)  # shown
    conversation: str = Field(max_length=64)  # the conversation's pseudonym
    caller: str = Field(default="", max_length=64)  # the caller's pseudonym; "" when the trace named none
    turn: int | None = None
    time: float
    message: str = Field(sa_column=Column(Text, nullable=False))  # redacted
    searched: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))  # redacted
    answer: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # redacted
    recorded_at: float = Field(index=True)  # what retention goes by
    caller_key_id: str = Field(default="", sa_column=Column(String(16), nullable=False, server_default=""))


_TABLE = ConversationTurn.__table__  # type: ignore[attr-defined]
_C = _TABLE.c

# The statements every flush runs are built once, their values bound when they are executed: a
# statement built per call keeps its values (here, a batch's conversation pseudonyms) in reference
# cycles among its clause objects, which only the garbage collector's rare full collections free.
# One query per tenant, ``tenant = ? AND conversation IN (...)``: SQLite answers a row-value
# ``(tenant, conversation) IN (...)`` by scanning the whole index, so every flush would read every
# turn stored.
_CROWDED = (core_select(_C.tenant, _C.conversation)
            .where(_C.tenant == bindparam("tenant"), _C.conversation.in_(bindparam("conversations", expanding=True)))
            .group_by(_C.tenant, _C.conversation).having(func.count() > bindparam("keep")))
_HISTORIES = core_select(_C.trace_id, _C.conversation, _C.turn, _C.time, _C.message, _C.searched, _C.answer).where(
    _C.tenant == bindparam("tenant"), _C.conversation.in_(bindparam("conversations", expanding=True)))


def add_turns(connection: Connection, rows: Sequence[dict[str, Any]], keep: int, now: float, key_id: str) -> None:
    """Store the turn summaries ``rows`` (a turn stored already is left as it is), then delete the
    turns of their conversations beyond the newest ``keep``, in the caller's transaction (the
    sample store's admission: one commit per flushed batch)."""
    if not rows:
        return
    # in trace id order: two replicas given the same turns (a redelivery) take their keys alike
    connection.execute(conflict_statement(connection, _TABLE, "new turns",
                                          lambda insert: insert.on_conflict_do_nothing(index_elements=["trace_id"])),
                       sorted(({**row, "recorded_at": now, "caller_key_id": key_id} for row in rows),
                              key=lambda row: row["trace_id"]))
    by_tenant: dict[str, set[str]] = {}
    for row in rows:
        by_tenant.setdefault(row["tenant"], set()).add(row["conversation"])
    crowded = [row for tenant, held in sorted(by_tenant.items()) for row in connection.execute(
        _CROWDED, {"tenant": tenant, "conversations": sorted(held), "keep": keep})]
    for tenant, conversation in crowded:  # rare: a conversation longer than ``keep`` turns
        turns = connection.execute(core_select(_C.trace_id, _C.turn, _C.time).where(
            _C.tenant == tenant, _C.conversation == conversation)).all()
        oldest = sorted(turns, key=lambda t: order_key(t.turn, t.time, t.trace_id))[:len(turns) - keep]
        connection.execute(delete(_TABLE).where(_C.trace_id.in_([t.trace_id for t in oldest])))


def histories(session: Session, tenant: str, graded: Sequence[tuple[str, str, int | None, float]],
              max_turns: int, max_bytes: int) -> dict[str, list[dict[str, Any]]]:
    """For each graded turn ``(trace_id, conversation, turn, time)`` of ``tenant``, the turns of its
    conversation before it (itself excluded), oldest first, bounded by ``max_turns`` and
    ``max_bytes`` (``conversation.bounded_history``), in the form a sample's ``history`` holds.
    One query for them all: a batch's new samples of a tenant-week are looked up together."""
    if not graded:
        return {}
    rows = session.connection().execute(
        _HISTORIES, {"tenant": tenant, "conversations": sorted({g[1] for g in graded})}).all()
    by_conversation: dict[str, list[Any]] = {}
    for row in rows:
        by_conversation.setdefault(row.conversation, []).append(row)
    out = {}
    for trace_id, conversation, turn, time in graded:
        earlier = sorted((r for r in by_conversation.get(conversation, ())
                          if r.trace_id != trace_id and is_earlier(r.turn, r.time, turn, time)),
                         key=lambda r: order_key(r.turn, r.time, r.trace_id))
        out[trace_id] = bounded_history(
            [{"turn": r.turn, "time": r.time, "trace_id": r.trace_id, "message": r.message,
              "searched": list(r.searched), "answer": r.answer} for r in earlier], max_turns, max_bytes)
    return out


def delete_turns_before(engine: Engine, before: float) -> int:
    """Retention: delete the turns recorded before ``before`` (Unix seconds); returns how many."""
    with engine.begin() as connection:
        return connection.execute(delete(_TABLE).where(_C.recorded_at < before)).rowcount or 0


def erase_turns(engine: Engine, callers: Sequence[str], conversations: Sequence[str], *, dry_run: bool = False
                ) -> int:
    """Erasure: delete the turns whose caller has one of the pseudonyms ``callers`` or whose
    conversation one of ``conversations``, and every turn of the conversations those callers held
    (the caller may have sent a turn without naming themselves). Returns how many (would) go."""
    if not callers and not conversations:
        return 0
    with engine.begin() as connection:
        held = set(conversations)
        if callers:
            held |= {(t, c) for t, c in connection.execute(core_select(_C.tenant, _C.conversation).where(
                _C.caller.in_(tuple(callers))).distinct())}
        plain = tuple(c for c in held if isinstance(c, str))
        pairs = [c for c in held if isinstance(c, tuple)]
        matches = ([_C.conversation.in_(plain)] if plain else []) + [
            and_(_C.tenant == tenant, _C.conversation == conversation) for tenant, conversation in pairs]
        if not matches:
            return 0
        count = connection.execute(core_select(func.count()).select_from(_TABLE).where(or_(*matches))).scalar_one()
        if not dry_run and count:
            connection.execute(delete(_TABLE).where(or_(*matches)))
        return count
