"""``ragmon restore``: a backup (monitor/app/backup.py) into a fresh install.

Everything is checked before anything is written: the archive's format and names, that this code
knows the backup's schema revision, that the database holds no ragmon rows and no kept file is
already there, and that the caller key of this install is the one the backup's pseudonyms were made
with (the ``caller.key`` file a SQLite backup carries is restored for that). Then the schema is
brought to the backup's revision, the rows loaded in one transaction, the schema upgraded to this
code's head (the data steps of later migrations run on the restored rows), and the files written
0600 in 0700 directories.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from ragmon.monitor.app.backup import FORMAT, BackupError, Manifest, key_check, letter_names, sqlite_path
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.storage import schema_window
from ragmon.monitor.storage.store import current_revision, downgrade, make_engine, scripts, upgrade
from ragmon.monitor.storage.table_dump import data_tables, load_table, row_counts


def _manifest(archive: tarfile.TarFile) -> Manifest:
    try:
        data = json.load(archive.extractfile("manifest.json"))
        manifest = Manifest(**data)
    except (KeyError, TypeError, ValueError) as error:
        raise BackupError(f"not a ragmon backup (manifest.json: {error})") from None
    if manifest.format != FORMAT:
        raise BackupError(f"backup format {manifest.format}: this ragmon reads format {FORMAT}")
    members = {member.name for member in archive.getmembers() if member.isfile()}
    expected = {"manifest.json", *(f"tables/{name}.jsonl" for name in manifest.tables), *manifest.files}
    if members != expected:
        raise BackupError(f"the archive's files are not the ones its manifest lists: {sorted(members ^ expected)}")
    return manifest


def _destinations(settings: Settings, manifest: Manifest) -> dict[str, Path]:
    """Where each file of the backup goes in this install."""
    database = sqlite_path(settings)
    known = {"files/regression/cases.jsonl": settings.regression.cases,
             **{f"files/dead-letters/{name}": path for name, path in letter_names(settings.dead_letter.path).items()}}
    if database is not None:
        known["files/caller.key"] = database.parent / "caller.key"
    targets = {}
    for name in manifest.files:
        parts = PurePosixPath(name).parts
        if name in known:
            targets[name] = known[name]
        elif parts[:2] == ("files", "dead-letters") and len(parts) == 3 and parts[2].startswith("rotated.") \
                and parts[2][len("rotated."):].isdigit():
            letters = settings.dead_letter.path
            targets[name] = letters.with_name(f"{letters.name}.{parts[2][len('rotated.'):]}")
        elif parts[:2] == ("files", "batches") and len(parts) > 2 and ".." not in parts:
            targets[name] = settings.scheduler.batch_dir.joinpath(*parts[2:])
        else:
            raise BackupError(f"{name}: a file this install has no place for (caller.key goes beside a SQLite "
                              "database: this install's database.url is not one)")
    return targets


def _check_caller_key(settings: Settings, manifest: Manifest, archive: tarfile.TarFile) -> None:
    """The pseudonyms restored must be ones this install matches: every caller key the backup's
    rows may have been made with (its newest and previous keys) is in this install's keyring (the
    configured key or the ``caller.key`` the backup carries, and ``previous_caller_keys``). The
    install may have rotated further: the backup's keys among its previous ones. Nothing is written."""
    configured = settings.redaction.caller_key.get_secret_value()
    if configured:
        key = configured
    elif "files/caller.key" in manifest.files:
        key = archive.extractfile("files/caller.key").read().decode().strip()
    else:
        raise BackupError("redaction.caller_key: the backup's pseudonyms were made with a configured key; configure "
                          "this install with the same one")
    ring = {key_check(key), *(key_check(previous.get_secret_value())
                              for previous in settings.redaction.previous_caller_keys)}
    if manifest.caller_key_check not in ring:
        raise BackupError("redaction.caller_key is not the key the backup's pseudonyms were made with: the same "
                          "caller would get another pseudonym; configure the install with the same key (or, "
                          "rotated since, with it among redaction.previous_caller_keys)")
    missing = [i for i, check in enumerate(manifest.previous_caller_key_checks) if check not in ring]
    if missing:
        raise BackupError(f"redaction.previous_caller_keys: the backup's rows may have been made with its previous "
                          f"caller keys {missing} (positions in its list), which this install lacks: add them")


def restore_backup(settings: Settings, source: Path) -> Manifest:
    """Restore the backup at ``source`` into the configured install, which must be fresh."""
    try:
        archive = tarfile.open(source, "r:gz")  # noqa: SIM115 - closed by the with below
    except (tarfile.TarError, gzip.BadGzipFile, EOFError) as error:
        raise BackupError(f"not a ragmon backup (not a gzip'd tar archive: {error})") from None
    with archive:
        manifest = _manifest(archive)
        known = schema_window.chain(scripts())
        if manifest.revision not in known:
            raise BackupError(f"the backup is at schema {manifest.revision} (ragmon {manifest.ragmon}), which this "
                              f"code ({known[-1]}) does not know: restore with that release or a later one")
        targets = _destinations(settings, manifest)
        present = [str(path) for path in targets.values() if path.exists()]
        if present:
            raise BackupError(f"not a fresh install, these files exist: {', '.join(present)}")
        _check_caller_key(settings, manifest, archive)
        engine = make_engine(settings.database.url)
        try:
            _restore_rows(engine, manifest, archive, known)
        finally:
            engine.dispose()
        for name, path in targets.items():
            with archive.extractfile(name) as data, os.fdopen(
                    open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as handle:
                shutil.copyfileobj(data, handle)
    return manifest


def _restore_rows(engine, manifest: Manifest, archive: tarfile.TarFile, known: list[str]) -> None:
    current = current_revision(engine)
    if current is not None:
        if current not in known:
            raise BackupError(f"the database is at schema {current}, newer than this code: restore into a fresh one")
        with engine.connect() as connection:
            filled = {name: rows for name, rows in row_counts(connection).items() if rows}
        if filled:
            raise BackupError("not a fresh install, the database holds rows: " +
                              ", ".join(f"{name} ({rows})" for name, rows in sorted(filled.items())))
    if current is None or known.index(current) < known.index(manifest.revision):
        upgrade(engine, manifest.revision)
    elif known.index(current) > known.index(manifest.revision):
        downgrade(engine, manifest.revision)  # empty tables: nothing is lost going back
    with engine.begin() as connection:
        tables = {table.name: table for table in data_tables(connection)}
        missing = set(manifest.tables) - set(tables)
        if missing:
            raise BackupError(f"tables {sorted(missing)} of the backup are not in schema {manifest.revision}")
        for name, rows in manifest.tables.items():
            with archive.extractfile(f"tables/{name}.jsonl") as data:
                loaded = load_table(connection, tables[name], (line.decode("utf-8") for line in data))
            if loaded != rows:
                raise BackupError(f"tables/{name}.jsonl holds {loaded} rows, its manifest says {rows}")
    upgrade(engine)

