"""``ragmon backup OUT`` and ``ragmon restore IN``: everything an install keeps in one 0600 file, and
back into a fresh install (monitor/app/backup.py, monitor/app/restore.py, docs/deployment.md)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError

from ragmon.monitor.app.backup import BackupError, Manifest, make_backup
from ragmon.monitor.app.cli_context import settings_of
from ragmon.monitor.app.cli_output import USAGE, error, shown, stdout
from ragmon.monitor.app.restore import restore_backup
from ragmon.monitor.core.errors import Retryable

console = stdout()


def _summary(verb: str, where: Path, manifest: Manifest) -> None:
    rows = ", ".join(f"{name} {count}" for name, count in sorted(manifest.tables.items()))
    console.print(shown(f"{verb} {where}: schema {manifest.revision} (ragmon {manifest.ragmon}); rows: {rows}; "
                        f"files: {len(manifest.files)}"))


@click.command("backup")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def backup(ctx: click.Context, out: Path) -> None:
    """Write a backup of this install to OUT (a new file, 0600: it holds personal data): every row of
    the database in one snapshot, the generated caller key, the dead letters, the regression set and
    the weekly batches. Configured secrets are not in it."""
    settings = settings_of(ctx)
    try:
        ragmon_version = version("ragmon")
    except PackageNotFoundError:
        ragmon_version = "0+unknown"
    try:
        manifest = make_backup(settings, out, ragmon_version)
    except BackupError as problem:
        error(problem)
        ctx.exit(USAGE)
    except SQLAlchemyError as problem:
        raise Retryable(f"database unavailable: {type(problem).__name__}") from None
    _summary("wrote", out, manifest)


@click.command("restore")
@click.argument("source", metavar="IN", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def restore(ctx: click.Context, source: Path) -> None:
    """Restore the backup IN into this install, which must be fresh (no rows, none of the files) and
    configured with the caller key the backup's pseudonyms were made with. Nothing is written unless
    every check passes."""
    settings = settings_of(ctx)
    try:
        manifest = restore_backup(settings, source)
    except BackupError as problem:
        error(problem)
        ctx.exit(USAGE)
    except SQLAlchemyError as problem:
        raise Retryable(f"database unavailable: {type(problem).__name__}") from None
    _summary("restored", source, manifest)
