"""``INSERT ... ON CONFLICT`` on the two databases ragmon runs on, PostgreSQL and SQLite: each
dialect has its own insert construct with ``on_conflict_do_nothing`` and ``on_conflict_do_update``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

_BUILT: dict[tuple[str, Table, Hashable], Any] = {}


def conflict_insert(connection: Connection, table: Table) -> Any:
    """An insert into ``table`` in the dialect of ``connection``, ready for an ``on_conflict_*``
    clause. Executed with a list of rows, it is one executemany of a statement compiled once and
    cached, where a multi-row VALUES of each batch's length would be compiled again every time."""
    return (postgresql if connection.dialect.name == "postgresql" else sqlite).insert(table)


def conflict_statement(connection: Connection, table: Table, key: Hashable, build: Callable[[Any], Any]) -> Any:
    """``build(conflict_insert(connection, table))``, built once per dialect, table and ``key`` (what names
    the statement among those of ``table``) and reused: executed with its rows as parameters.

    Statements written to on every flush are built once because each one built anew leaves its
    clause objects in reference cycles (an insert's ``excluded`` namespace copies every column of
    the table), which only the garbage collector's rare full collections free."""
    cache_key = (connection.dialect.name, table, key)
    statement = _BUILT.get(cache_key)
    if statement is None:  # two threads building it at once build the same statement
        statement = _BUILT[cache_key] = build(conflict_insert(connection, table))
    return statement
