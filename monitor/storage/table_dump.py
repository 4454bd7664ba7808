"""Every row of ragmon's tables as JSON lines, and back: the database part of ``ragmon backup`` and
``ragmon restore`` (monitor/app/backup.py), the same on SQLite and PostgreSQL.

Tables and columns are read from the database (reflection), not from the models, so a backup holds
what the schema at its revision holds. Bytes are written as base64 (``{"b64": ...}``); everything
else is a JSON value already (numbers, strings, booleans, the JSON columns). The migration tables
(``alembic_version``, ``schema_window``) are not rows of ragmon's: the revision travels in the
backup's manifest, and the restored database gets both from its own migrations.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ragmon.monitor.storage.schema_window import TABLE as WINDOW_TABLE

NOT_DATA = frozenset({"alembic_version", WINDOW_TABLE})
CHUNK = 1000


def data_tables(connection: Connection) -> list[sa.Table]:
    """ragmon's tables in the database, by name."""
    metadata = sa.MetaData()
    metadata.reflect(connection)
    return [table for name, table in sorted(metadata.tables.items()) if name not in NOT_DATA]


def _encoder(table: sa.Table):
    binary = {column.name for column in table.columns if isinstance(column.type, sa.LargeBinary)}

    def encode(row: sa.Row) -> dict[str, Any]:
        values = dict(row._mapping)
        for name in binary:
            if values[name] is not None:
                values[name] = {"b64": base64.b64encode(bytes(values[name])).decode("ascii")}
        return values
    return encode


def dump_table(connection: Connection, table: sa.Table, out: IO[str]) -> int:
    """Write every row of ``table`` as a JSON line, in primary-key order; returns how many."""
    encode = _encoder(table)
    rows = connection.execution_options(yield_per=CHUNK).execute(
        sa.select(table).order_by(*table.primary_key.columns))
    count = 0
    for row in rows:
        out.write(json.dumps(encode(row), ensure_ascii=False, allow_nan=False) + "\n")
        count += 1
    return count


def _decoded(table: sa.Table, lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    binary = {column.name for column in table.columns if isinstance(column.type, sa.LargeBinary)}
    known = set(table.columns.keys())
    for number, line in enumerate(lines, start=1):
        values = json.loads(line)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"table {table.name}, row {number}: columns {sorted(unknown)} are not in the schema")
        for name in binary & set(values):
            if values[name] is not None:
                values[name] = base64.b64decode(values[name]["b64"])
        yield values


def load_table(connection: Connection, table: sa.Table, lines: Iterable[str]) -> int:
    """Insert the rows of ``lines`` (as :func:`dump_table` wrote them) into ``table``, in chunks;
    returns how many."""
    count = 0
    chunk: list[dict[str, Any]] = []
    for values in _decoded(table, lines):
        chunk.append(values)
        if len(chunk) == CHUNK:
            connection.execute(table.insert(), chunk)
            count += len(chunk)
            chunk = []
    if chunk:
        connection.execute(table.insert(), chunk)
        count += len(chunk)
    if connection.dialect.name == "postgresql":
        _advance_sequences(connection, table)
    return count


def _advance_sequences(connection: Connection, table: sa.Table) -> None:
    """An id column filled by a sequence gets its sequence past the restored ids, so the next row
    inserted does not take one of them."""
    for column in table.primary_key.columns:
        if not isinstance(column.type, sa.Integer):
            continue
        sequence = connection.execute(sa.text("SELECT pg_get_serial_sequence(:table, :column)"),
                                      {"table": table.name, "column": column.name}).scalar()
        if sequence is not None:
            connection.execute(sa.text(
                f"SELECT setval(:sequence, COALESCE(MAX({column.name}), 1), MAX({column.name}) IS NOT NULL) "
                f"FROM {table.name}"), {"sequence": sequence})


def row_counts(connection: Connection) -> dict[str, int]:
    """How many rows each of ragmon's tables holds."""
    return {table.name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in data_tables(connection)}
