"""What the tables of keyed, append-only rows share (findings, unread traces): rows are stored once
by a key made of what produced them (``INSERT … ON CONFLICT DO NOTHING``), read newest first by
their autoincrement id (which is also the paging cursor), counted up to a bound, and pruned by the
time they were recorded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, Table, delete, func
from sqlalchemy import select as core_select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.storage.upsert import conflict_statement

#: A column and the stored value (or any of the stored values) a reader asks for; None: any row.
Wanted = tuple[Any, str | tuple[str, ...] | None]


def insert_new_keys(engine: Engine, table: Table, rows: Sequence[dict[str, Any]], store: str) -> None:
    """Store ``rows`` (dicts of ``table``'s columns but ``id``), skipping those whose ``key`` is
    stored already. Raises :class:`Retryable` naming ``store`` when the database is unavailable."""
    if not rows:
        return
    try:
        with engine.begin() as connection:
            connection.execute(conflict_statement(connection, table, "new keys",
                                                  lambda insert: insert.on_conflict_do_nothing(index_elements=["key"])),
                               list(rows))
    except SQLAlchemyError as error:
        raise Retryable(f"{store}: {type(error).__name__}") from error


def newest_first(statement: Any, model: Any, wanted: Iterable[Wanted], since: float | None,
                 cursor: int | None) -> Any:
    """``statement`` (a select of ``model``) narrowed to the rows every ``wanted`` column matches,
    of a trace at or after ``since`` and older than the row ``cursor``, newest first."""
    statement = statement.order_by(col(model.id).desc())
    for column, value in wanted:
        if isinstance(value, str):
            statement = statement.where(column == value)
        elif value is not None:
            statement = statement.where(col(column).in_(value))
    if since is not None:
        statement = statement.where(model.time >= since)
    if cursor is not None:
        statement = statement.where(col(model.id) < cursor)
    return statement


def count_up_to(engine: Engine, rows: Any, at_most: int) -> tuple[int, bool]:
    """How many rows the select of ids ``rows`` gives, counted up to ``at_most``, and whether there
    are more: counting stops there, so a page refreshed every few seconds never walks the table."""
    counted = core_select(func.count()).select_from(rows.limit(at_most + 1).subquery())
    with engine.connect() as connection:
        n = connection.execute(counted).scalar_one()
    return min(n, at_most), n > at_most


def prune_recorded_before(engine: Engine, table: Table, before: float) -> int:
    """Delete the rows of ``table`` recorded before ``before`` (Unix seconds); returns how many."""
    with engine.begin() as connection:
        return connection.execute(delete(table).where(table.c.recorded_at < before)).rowcount or 0
