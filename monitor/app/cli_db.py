"""``ragmon db upgrade|downgrade|current``: the SQL store's schema (docs/upgrades.md).

``upgrade`` is the chart's migration hook; ``downgrade`` goes back to an earlier revision of this
code before a rollback to a release that cannot run on the schema (a contract step), checking first
that every step can go back; ``current`` shows where the schema is and which code can run on it.
"""

from __future__ import annotations

import click
from sqlalchemy.exc import SQLAlchemyError

from ragmon.monitor.app.cli_context import settings_of
from ragmon.monitor.app.cli_output import USAGE, error, shown, stdout
from ragmon.monitor.config.settings import mask_url
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.storage import schema_window
from ragmon.monitor.storage.store import (
    IrreversibleStep,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    scripts,
    upgrade,
)

console = stdout()


@click.group()
def db() -> None:
    """The SQL store."""


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Apply the schema migrations to the configured database."""
    settings = settings_of(ctx)
    engine = make_engine(settings.database.url)
    try:
        before = current_revision(engine)
        upgrade(engine)
        after = current_revision(engine)
    except SQLAlchemyError as problem:  # e.g. a database still starting: a hook Job's retry may succeed
        raise Retryable(f"database unavailable: {type(problem).__name__}") from None
    finally:
        engine.dispose()
    if after != head_revision():
        console.print(shown(f"{mask_url(settings.database.url)}: schema {after} is newer than this code "
                            f"({head_revision()}) by expand steps only: left as it is"))
        return
    console.print(shown(f"{mask_url(settings.database.url)}: schema {before or 'empty'} -> {after}"))


@db.command("downgrade")
@click.argument("revision", required=False)
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str | None) -> None:
    """Undo the migrations above REVISION (one of this code's revisions, or `base`; default: the
    one before the schema's): run it with the code of the release that migrated the database,
    before rolling back to an older one. Every step is checked first: one that cannot go back is
    named, and nothing changes."""
    settings = settings_of(ctx)
    engine = make_engine(settings.database.url)
    try:
        before = current_revision(engine)
        undone = downgrade(engine, revision)
        after = current_revision(engine)
    except (ValueError, IrreversibleStep) as problem:
        error(problem)
        ctx.exit(USAGE)
    except SQLAlchemyError as problem:
        raise Retryable(f"database unavailable: {type(problem).__name__}") from None
    finally:
        engine.dispose()
    where = mask_url(settings.database.url)
    if not undone:
        console.print(shown(f"{where}: schema {before or 'empty'}: nothing to undo"))
        return
    console.print(shown(f"{where}: schema {before} -> {after or 'empty'} (undone: {', '.join(undone)})"))


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """The schema's revision, this code's head, and the oldest code head the schema admits."""
    settings = settings_of(ctx)
    engine = make_engine(settings.database.url)
    try:
        with engine.connect() as connection:
            current = current_revision(engine)
            window = schema_window.read(connection)
            state = schema_window.check(connection, scripts(), current)
    except SQLAlchemyError as problem:
        raise Retryable(f"database unavailable: {type(problem).__name__}") from None
    finally:
        engine.dispose()
    if window is None or window.revision != current:
        oldest = "not recorded"
    else:
        oldest = window.oldest_code or "any (no contract step)"
    console.print(shown(f"schema: {current or 'empty'} ({state}); this code: {head_revision()}; "
                        f"oldest code it runs with: {oldest}"))
