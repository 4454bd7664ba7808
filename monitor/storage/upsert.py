"""``INSERT ... ON CONFLICT`` on the two databases ragmon runs on, PostgreSQL and SQLite: each
dialect has its own insert construct with ``on_conflict_do_nothing`` and ``on_conflict_do_update``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def conflict_insert(connection: Connection, table: Table) -> Any:
    """An insert into ``table`` in the dialect of ``connection``, ready for an ``on_conflict_*``
    clause. Executed with a list of rows, it is one executemany of a statement compiled once and
    cached, where a multi-row VALUES of each batch's length would be compiled again every time."""
    return (postgresql if connection.dialect.name == "postgresql" else sqlite).insert(table)
