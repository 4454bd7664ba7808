"""``ragmon backup`` and ``ragmon restore``: everything an install keeps, in one file, and back into a
fresh install (docs/deployment.md, "Backup and restore").

A backup is a gzip'd tar archive, 0600 (it holds what ragmon keeps about people):

- ``manifest.json``: the format, the ragmon version and schema revision it was made at, the rows of
  each table and the files, and a check value of the caller key (a keyed hash of a fixed text, not
  the key), so a restore can tell whether the pseudonyms it brings back will match new traffic;
- ``tables/<table>.jsonl``: every row of ragmon's tables (monitor/storage/table_dump.py), read in one
  snapshot (SQLite: a copy made with SQLite's backup API; PostgreSQL: one repeatable-read transaction);
- ``files/``: the caller key made beside a SQLite database (``caller.key``, when no
  ``redaction.caller_key`` is configured), the dead-letter file with its rotated files and replay
  note, the regression set (``regression.cases``) and the weekly batches (``scheduler.batch_dir``).

Configured secrets (``redaction.caller_key``, ``dead_letter.encryption_key``, tokens) are not in it:
they stay where the operator keeps them, and the restored install must be given the same ones.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url

from ragmon.monitor.app.letter_replay import replay_log
from ragmon.monitor.app.wiring import caller_key
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.labeling.keyring import key_id
from ragmon.monitor.storage.store import make_engine
from ragmon.monitor.storage.table_dump import data_tables, dump_table

FORMAT = 1
_CHECK_TEXT = b"ragmon backup: caller key check"


class BackupError(Exception):
    """The backup cannot be made or restored here; the message says why."""


@dataclass
class Manifest:
    """What a backup holds (``manifest.json``)."""

    ragmon: str
    revision: str
    created_at: float
    caller_key_check: str  # the newest caller key's id (``keyring.key_id``)
    tables: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    format: int = FORMAT
    # the ids of ``redaction.previous_caller_keys``: rows made before a rotation need them (left out
    # of the manifest when there are none, so a release before keyrings reads it)
    previous_caller_key_checks: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        """What ``manifest.json`` holds."""
        data = dict(self.__dict__)
        if not data["previous_caller_key_checks"]:
            del data["previous_caller_key_checks"]
        return data


def key_check(key: str) -> str:
    """A value that tells two caller keys apart without revealing either (``keyring.key_id``)."""
    return key_id(key)


def sqlite_path(settings: Settings) -> Path | None:
    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database)
    return None


def _kept_files(settings: Settings) -> dict[str, Path]:
    """The files an install keeps beside its database, by their name in the archive."""
    files: dict[str, Path] = {}
    database = sqlite_path(settings)
    if not settings.redaction.caller_key.get_secret_value() and database is not None:
        files["files/caller.key"] = database.parent / "caller.key"
    files |= {f"files/dead-letters/{name}": path for name, path in letter_names(settings.dead_letter.path).items()}
    files["files/regression/cases.jsonl"] = settings.regression.cases
    batches = settings.scheduler.batch_dir
    if batches.is_dir():
        for path in sorted(batches.rglob("*")):
            if path.is_file():
                files[f"files/batches/{path.relative_to(batches).as_posix()}"] = path
    return {name: path for name, path in files.items() if path.is_file()}


def letter_names(letters: Path) -> dict[str, Path]:
    """The dead-letter files kept at ``letters`` by their names in a backup: ``current``, the
    rotated ``rotated.N`` and the replay note ``replayed`` (restored under this install's path)."""
    names = {"current": letters, "replayed": replay_log(letters)}
    rotated = letters.parent.glob(f"{letters.name}.*") if letters.parent.is_dir() else []
    names |= {f"rotated.{path.suffix[1:]}": path for path in rotated if path.suffix[1:].isdigit()}
    return names


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    archive.addfile(info, io.BytesIO(data))


def make_backup(settings: Settings, out: Path, version: str) -> Manifest:
    """Write the backup of the configured install to ``out`` (which must not exist)."""
    if out.exists():
        raise BackupError(f"{out}: exists; a backup is written to a new file")
    key = caller_key(settings)  # the key the stored pseudonyms were made with
    with tempfile.TemporaryDirectory(prefix="ragmon-backup-") as scratch:  # 0700
        url = settings.database.url
        source = sqlite_path(settings)
        if source is not None:  # a consistent copy, made while the writer may go on
            if not source.exists():
                raise BackupError(f"no ragmon database at {source} (database.url)")
            with sqlite3.connect(source) as live, sqlite3.connect(Path(scratch) / "copy.db") as copy:
                live.backup(copy)
            url = f"sqlite:///{Path(scratch) / 'copy.db'}"
        engine = make_engine(url)
        try:
            # PostgreSQL: every table read in one snapshot while the collectors go on writing
            options = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
            with engine.connect().execution_options(**options) as connection:
                revision = _revision(connection)
                if revision is None:
                    raise BackupError("the database holds no ragmon schema")
                manifest = Manifest(ragmon=version, revision=revision, created_at=time.time(),
                                    caller_key_check=key_check(key),
                                    previous_caller_key_checks=[
                                        key_check(previous.get_secret_value())
                                        for previous in settings.redaction.previous_caller_keys])
                for table in data_tables(connection):
                    path = Path(scratch) / f"{table.name}.jsonl"
                    with path.open("w", encoding="utf-8") as handle:
                        manifest.tables[table.name] = dump_table(connection, table, handle)
        finally:
            engine.dispose()
        files = _kept_files(settings)
        manifest.files = sorted(files)
        partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
        with os.fdopen(open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as handle:
            with tarfile.open(fileobj=handle, mode="w:gz") as archive:
                _add_bytes(archive, "manifest.json", json.dumps(manifest.as_json(), indent=1).encode())
                for name in manifest.tables:
                    archive.add(Path(scratch) / f"{name}.jsonl", arcname=f"tables/{name}.jsonl")
                for name, path in files.items():
                    archive.add(path, arcname=name)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, out)
    return manifest


def _revision(connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()
