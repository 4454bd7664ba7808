"""The SQL store: engine creation and schema migrations (Alembic, scripts in monitor/storage/migrations).

SQLite (a file) by default, PostgreSQL in production. Tables are SQLModel classes next to the
code that owns them (e.g. ``ragmon.monitor.storage.catalog_store``); their schema changes only through migrations.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.private_files import open_private

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_POLL_SECONDS = 2.0
SCHEMA_LOG_SECONDS = 15.0  # a line while waiting this long, not one per poll

log = logging.getLogger(__name__)


class SchemaOutdated(Exception):
    """The database schema is behind the code; run ``ragmon db upgrade``."""


def make_engine(url: str) -> Engine:
    """An engine for ``url``; for SQLite, the file's directory is created and WAL is enabled
    (readers do not block the writer)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            # created (or tightened) 0600 before SQLite opens it; its WAL files take its mode
            os.close(open_private(Path(parsed.database), os.O_RDWR | os.O_CREAT))
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(connection, _record) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply the migrations up to ``revision``."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def prepare(engine: Engine) -> None:
    """At start-up: migrate a SQLite file in place (embedded mode has no separate step); for other
    databases, refuse to run on an outdated schema instead of racing other replicas to migrate it."""
    if engine.dialect.name == "sqlite":
        upgrade(engine)
        return
    try:
        current = current_revision(engine)
    except SQLAlchemyError as error:
        raise Retryable(f"database unavailable: {type(error).__name__}") from error
    if current != head_revision():
        raise SchemaOutdated(
            f"database schema is at {current or 'nothing'}, the code needs {head_revision()}: run `ragmon db upgrade`"
        )


def await_schema(engine: Engine, seconds: float, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
    """:func:`prepare`, waiting up to ``seconds`` for the database to come up and reach the code's
    schema (a migration Job may be running it), with a log line every ``SCHEMA_LOG_SECONDS``;
    then the last :class:`SchemaOutdated` or :class:`Retryable` is raised."""
    deadline = clock() + seconds
    logged_at = None
    while True:
        try:
            prepare(engine)
        except (SchemaOutdated, Retryable) as error:
            now = clock()
            if now >= deadline:
                raise
            if logged_at is None or now - logged_at >= SCHEMA_LOG_SECONDS:
                log.warning("waiting for the database: %s (%.0f s left)", error, deadline - now)
                logged_at = now
            sleep(min(SCHEMA_POLL_SECONDS, deadline - now))
            continue
        if logged_at is not None:
            log.info("database schema is at %s: starting", head_revision())
        return
