"""Reading rows for a catalog source from a SQL database: a SQLite file or a database URL (PostgreSQL),
read-only, within a time and a row bound (docs/catalog.md, "Index entries kept in SQL").

The record manager source and the ``sql`` source read through :func:`read_rows`, which either returns
every row of the query or raises :class:`~ragmon.collectors.catalog_sources.base.SourceError`:

- read-only: a SQLite file is opened with ``mode=ro`` (nothing is created, a missing file fails); on
  PostgreSQL the transaction is ``READ ONLY``, so a query that writes fails;
- time: PostgreSQL's ``statement_timeout`` for the transaction; SQLite is interrupted from its progress
  handler once the deadline passed; the connection itself within the same time;
- rows: ``max_rows`` at most; a query returning more fails the sync, because rows cut short would read
  as deletions.

The password comes by reference and is given to the driver apart from the URL, so no message, log
line or error shown holds it: a failure names the database's dialect and the driver's error class.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import sqlalchemy
from sqlalchemy.engine import URL, make_url

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.monitor.config.catalog_sources import SqlDatabase

_SQLITE_STEPS = 1000  # SQLite virtual-machine steps between two looks at the clock


def read_rows(database: SqlDatabase, source: str, query: str | sqlalchemy.TextClause,
              parameters: Mapping[str, Any], context: SourceContext) -> tuple[list[str], list[Sequence[Any]]]:
    """The column names and every row of ``query`` on ``database`` (see the module's bounds);
    ``source`` names the source in messages. Raises :class:`SourceError`."""
    url = _url(database, source, context)
    statement = sqlalchemy.text(query) if isinstance(query, str) else query
    limit = database.max_rows
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_connect_args(url, database))
    try:
        with engine.connect() as connection:
            deadline = time.monotonic() + database.timeout_seconds
            if url.get_backend_name() == "sqlite":
                _sqlite_deadline(connection, deadline)
            elif url.get_backend_name() == "postgresql":
                milliseconds = max(1, int(database.timeout_seconds * 1000))
                connection.exec_driver_sql("SET TRANSACTION READ ONLY")
                connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
            result = connection.execute(statement, dict(parameters))
            columns = list(result.keys())
            rows = result.fetchmany(limit + 1)
            connection.rollback()
    except sqlalchemy.exc.OperationalError as error:
        raise _failure(error, url, source) from None
    except sqlalchemy.exc.SQLAlchemyError as error:
        raise SourceError("bad_format", f"{source}: the query failed on {url.get_backend_name()}: "
                          f"{_driver_error(error)}") from None
    finally:
        engine.dispose()
    if len(rows) > limit:
        raise SourceError("too_large", f"{source}: the query returns more than max_rows ({limit}) rows")
    return columns, rows


def _url(database: SqlDatabase, source: str, context: SourceContext) -> URL:
    if database.path is not None:
        # mode=ro: read-only, and a missing file is an error instead of a new empty database
        return URL.create("sqlite", database=f"file:{quote(str(database.path))}", query={"mode": "ro", "uri": "true"})
    assert database.url is not None
    try:
        url = make_url(database.url)
    except sqlalchemy.exc.ArgumentError:
        raise SourceError("bad_format", f"{source}: url is not a database URL") from None
    if database.password is not None:
        url = url.set(password=context.secret(source, "password", database.password))
    return url


def _connect_args(url: URL, database: SqlDatabase) -> dict[str, Any]:
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": database.timeout_seconds}}
    if url.get_backend_name() == "postgresql":
        return {"connect_args": {"connect_timeout": max(1, int(database.timeout_seconds))}}
    return {}


def _sqlite_deadline(connection: sqlalchemy.Connection, deadline: float) -> None:
    """Interrupt a SQLite query once ``deadline`` (monotonic) passed: a non-zero answer of the progress
    handler aborts the statement."""
    raw = connection.connection.driver_connection
    raw.set_progress_handler(lambda: int(time.monotonic() > deadline), _SQLITE_STEPS)  # type: ignore[union-attr]


def _failure(error: sqlalchemy.exc.OperationalError, url: URL, source: str) -> SourceError:
    text = str(error.orig).lower()
    if "interrupted" in text or "statement timeout" in text or "canceling statement" in text:
        return SourceError("timeout", f"{source}: the query ran longer than timeout_seconds")
    return SourceError("unavailable", f"{source}: cannot read the {url.get_backend_name()} database: "
                       f"{_driver_error(error)}")


def _driver_error(error: sqlalchemy.exc.SQLAlchemyError) -> str:
    """The driver's error class and first line, without the statement or its parameters (SQLAlchemy
    appends both), nor the URL (which holds no password: that is given apart)."""
    original = getattr(error, "orig", None) or error
    first = str(original).strip().splitlines()[0] if str(original).strip() else ""
    return f"{type(original).__name__}: {first}"[:300]
