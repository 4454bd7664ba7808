"""The SQL store: engine creation and schema migrations (Alembic, scripts in monitor/storage/migrations).

SQLite (a file) by default, PostgreSQL in production. Tables are SQLModel classes next to the
code that owns them (e.g. ``ragmon.monitor.storage.catalog_store``); their schema changes only through migrations.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
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
from ragmon.monitor.storage import schema_window
from ragmon.monitor.storage.schema_window import SchemaOutdated, SchemaTooNew

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_POLL_SECONDS = 2.0
SCHEMA_LOG_SECONDS = 15.0  # a line while waiting this long, not one per poll

log = logging.getLogger(__name__)


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


def _config(location: Path = MIGRATIONS) -> Config:
    config = Config()
    config.set_main_option("script_location", str(location))
    return config


def _code_version() -> str:
    try:
        return version("ragmon")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def scripts(location: Path = MIGRATIONS) -> ScriptDirectory:
    """The migration scripts this code knows."""
    return ScriptDirectory.from_config(_config(location))


def upgrade(engine: Engine, revision: str = "head", location: Path = MIGRATIONS) -> None:
    """Apply the migrations up to ``revision`` and record the schema's window (see
    :mod:`ragmon.monitor.storage.schema_window`). A schema newer than this code by expand steps
    only is left as it is (the hook of an older release during a rollback); one with a contract
    step this code does not know raises :class:`SchemaTooNew`."""
    config = _config(location)
    script = scripts(location)
    schema_window.oldest_code(script, script.get_current_head())  # every declaration checked before a step runs
    with engine.begin() as connection:
        current = _revision_of(connection)
        if schema_window.check(connection, script, current) == "ahead":
            log.warning("database schema is at %s, newer than this code (%s) by expand steps only: left as it is",
                        current, script.get_current_head())
            return
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        schema_window.record(connection, script, _revision_of(connection), _code_version())


class IrreversibleStep(Exception):
    """A migration between the schema and the revision asked for cannot go back."""


def downgrade(engine: Engine, revision: str | None = None, location: Path = MIGRATIONS) -> list[str]:
    """Undo the migrations above ``revision`` (a revision of this code, or ``base``; None: the one
    before the schema's), newest first, and record the window; returns the revisions undone. Every
    step is checked before the first is undone: one that declares ``irreversible`` (why it cannot
    go back) raises :class:`IrreversibleStep` naming it, and nothing changes."""
    script = scripts(location)
    known = schema_window.chain(script)
    if revision is not None and revision != "base" and revision not in known:
        raise ValueError(f"revision {revision!r}: not one of this code's revisions ({', '.join(known)}) or base")
    config = _config(location)
    with engine.begin() as connection:
        current = _revision_of(connection)
        if current is not None and current not in known:
            raise SchemaTooNew(
                f"database schema is at {current}, which this code ({known[-1]}) does not know: downgrade with the "
                "code of the release that migrated it")
        if revision is None:
            revision = "base" if current is None or known.index(current) == 0 else known[known.index(current) - 1]
        if current is None or (revision != "base" and known.index(current) <= known.index(revision)):
            return []
        steps = known[known.index(revision) + 1 if revision != "base" else 0:known.index(current) + 1][::-1]
        for step in steps:
            why = getattr(script.get_revision(step).module, "irreversible", None)
            if why:
                raise IrreversibleStep(f"migration {step} cannot go back: {why}")
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
        schema_window.record(connection, script, _revision_of(connection), _code_version())
    return steps


def _revision_of(connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return _revision_of(connection)


def head_revision(location: Path = MIGRATIONS) -> str | None:
    return scripts(location).get_current_head()


def prepare(engine: Engine, location: Path = MIGRATIONS) -> None:
    """At start-up: migrate a SQLite file in place (embedded mode has no separate step); for other
    databases, refuse to run on an outdated schema instead of racing other replicas to migrate it.
    A schema newer than the code by expand steps only is accepted (an older pod during a rollout or
    after a rollback); one with a contract step this code does not know raises
    :class:`SchemaTooNew` (docs/upgrades.md)."""
    script = scripts(location)
    try:
        with engine.connect() as connection:
            current = _revision_of(connection)
            state = schema_window.check(connection, script, current)
    except SQLAlchemyError as error:
        raise Retryable(f"database unavailable: {type(error).__name__}") from error
    if state == "ahead":
        log.warning("database schema is at %s, newer than this code (%s) by expand steps only: running on it",
                    current, script.get_current_head())
    elif state == "behind":
        if engine.dialect.name == "sqlite":
            upgrade(engine, location=location)
            return
        raise SchemaOutdated(f"database schema is at {current or 'nothing'}, the code needs "
                             f"{script.get_current_head()}: run `ragmon db upgrade`")


def await_schema(engine: Engine, seconds: float, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
    """:func:`prepare`, waiting up to ``seconds`` for the database to come up and reach the code's
    schema (a migration Job may be running it), with a log line every ``SCHEMA_LOG_SECONDS``;
    then the last :class:`SchemaOutdated` or :class:`Retryable` is raised. A schema too new for
    this code (:class:`SchemaTooNew`) is raised at once."""
    deadline = clock() + seconds
    logged_at = None
    while True:
        try:
            prepare(engine)
        except SchemaTooNew:
            raise  # waiting does not make this code newer
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
            log.info("database schema is at %s: starting", current_revision(engine))
        return
