"""``ragmon backup`` and ``ragmon restore`` (docs/deployment.md): an install fed the bundled events,
backed up and restored into a fresh install, holds the same rows in every table, the same files
(dead letters, regression set, weekly batches), and gives a caller the same pseudonym, on SQLite (the
generated caller key travels in the backup) and on PostgreSQL (the configured key does not, the
fresh install is given the same one). The backup is 0600; a restore into an install that is not
fresh, or with another caller key, is refused before anything is written."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_runtime, caller_key
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.storage.store import make_engine, upgrade
from tests.databases import BOTH

EXAMPLES = Path(__file__).parent.parent / "monitor" / "app" / "examples" / "events.jsonl"
KEY = "a-configured-caller-key-for-postgresql"


def install(root: Path, url: str, key: str | None) -> dict[str, str]:
    """The RAGMON_ environment of an install whose files live under ``root``."""
    env = {"RAGMON_DATABASE__URL": url, "RAGMON_DEAD_LETTER__PATH": str(root / "letters" / "dead.jsonl"),
           "RAGMON_REGRESSION__CASES": str(root / "regression" / "cases.jsonl"),
           "RAGMON_SCHEDULER__BATCH_DIR": str(root / "batches")}
    return env | ({"RAGMON_REDACTION__CALLER_KEY": key} if key else {})


def database(kind: str, root: Path, request) -> str:
    if kind == "sqlite":
        return f"sqlite:///{root / 'ragmon.db'}"
    return request.getfixturevalue("postgres").create_database(f"backup_{uuid.uuid4().hex[:8]}")


def feed(env: dict[str, str], root: Path) -> None:
    """The bundled events through the pipeline (bad records become dead letters), a regression set
    and a weekly batch, as the install would have made them."""
    upgrade(make_engine(env["RAGMON_DATABASE__URL"]))
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    try:
        lines = [line for line in EXAMPLES.read_bytes().splitlines() if line.strip()]
        runtime.pipeline.process([RawRecord("file", line, privilege=Privilege.TRUSTED) for line in lines])
    finally:
        runtime.close()
    (root / "regression").mkdir(mode=0o700)
    (root / "regression" / "cases.jsonl").write_text('{"question": "How many days carry over?"}\n')
    (root / "batches" / "2026-W47").mkdir(mode=0o700, parents=True)
    (root / "batches" / "2026-W47" / "batch.jsonl").write_text('{"trace_id": "70000000001"}\n')


def rows(url: str) -> dict[str, list]:
    """Every row of every table but the migrations' own, in primary-key order."""
    engine = make_engine(url)
    metadata = sa.MetaData()
    with engine.connect() as connection:
        metadata.reflect(connection)
        found = {name: [tuple(row) for row in connection.execute(
            sa.select(table).order_by(*table.primary_key.columns))]
            for name, table in metadata.tables.items() if name not in ("alembic_version", "schema_window")}
    engine.dispose()
    return found


def kept_files(root: Path) -> dict[str, bytes]:
    """The files an install keeps, but the empty lock the dead-letter writer and its rewriters share."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if (path.is_file() and path.parent != root or path.name == "caller.key") and path.suffix != ".lock"}


def caller_of(line: str) -> tuple[str | None, str | None]:
    """(trace id, caller id) of an event line; Nones for the bundled bad records and other events."""
    try:
        event = json.loads(line)
        return event["trace_id"], event["caller"]["id"]
    except (ValueError, KeyError, TypeError):
        return None, None


@pytest.fixture(params=BOTH)
def kind(request) -> str:
    return request.param


def test_a_backup_restores_into_a_fresh_install_with_everything_equal(kind, tmp_path, request):
    runner = CliRunner()
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    key = KEY if kind == "postgresql" else None  # SQLite: the key made beside the database
    old_env = install(old, database(kind, old, request), key)
    feed(old_env, old)
    before = rows(old_env["RAGMON_DATABASE__URL"])
    assert all(before[table] for table in ("sample", "finding", "catalog_document", "catalog_indexed"))
    assert (old / "letters" / "dead.jsonl").stat().st_size > 0

    backup = tmp_path / "backups" / "ragmon.tar.gz"
    made = runner.invoke(main, ["backup", str(backup)], env=old_env)
    assert made.exit_code == 0, made.output
    assert f"finding {len(before['finding'])}" in made.output
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    again = runner.invoke(main, ["backup", str(backup)], env=old_env)
    assert again.exit_code == 2 and "exists; a backup is written to a new file" in again.output

    new_env = install(new, database(kind, new, request), key)
    restored = runner.invoke(main, ["restore", str(backup)], env=new_env)
    assert restored.exit_code == 0, restored.output
    assert rows(new_env["RAGMON_DATABASE__URL"]) == before
    assert kept_files(new) == kept_files(old) and kept_files(old)
    for path in new.rglob("*"):
        if path.is_file() and path.name != "ragmon.db" and not path.name.startswith("ragmon.db-"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    # the same caller gets the same pseudonym: what new traffic will be matched by
    callers = dict(caller_of(line) for line in EXAMPLES.read_text().splitlines())
    settings = load_settings(environ=new_env)
    redactor = Redactor(settings.redaction.model_copy(update={"caller_key": SecretStr(caller_key(settings))}))
    finding = sa.table("finding", sa.column("trace_id"), sa.column("caller"))
    engine = make_engine(new_env["RAGMON_DATABASE__URL"])
    with engine.connect() as connection:
        pairs = connection.execute(sa.select(finding.c.trace_id, finding.c.caller).where(finding.c.caller != "")).all()
    engine.dispose()
    assert pairs
    for trace_id, pseudonym in pairs:
        assert redactor.pseudonymize_caller(callers[trace_id]) == pseudonym

    if kind == "postgresql":  # the next finding's id comes after the restored ones
        engine = make_engine(new_env["RAGMON_DATABASE__URL"])
        with engine.connect() as connection:
            following = connection.execute(sa.text("select nextval(pg_get_serial_sequence('finding', 'id'))")).scalar()
        engine.dispose()
        assert following > max(row[0] for row in before["finding"])

    # the restored install is not fresh any more: a second restore is refused, nothing written
    twice = runner.invoke(main, ["restore", str(backup)], env=new_env)
    assert twice.exit_code == 2 and "not a fresh install" in twice.output


def test_a_restore_with_another_caller_key_is_refused_before_anything_is_written(tmp_path):
    runner = CliRunner()
    old_env = install(tmp_path / "old", f"sqlite:///{tmp_path / 'old' / 'ragmon.db'}", KEY)
    (tmp_path / "old").mkdir()
    feed(old_env, tmp_path / "old")
    backup = tmp_path / "ragmon.tar.gz"
    assert runner.invoke(main, ["backup", str(backup)], env=old_env).exit_code == 0
    new_env = install(tmp_path / "new", f"sqlite:///{tmp_path / 'new' / 'ragmon.db'}", KEY + "-rotated")
    refused = runner.invoke(main, ["restore", str(backup)], env=new_env)
    assert refused.exit_code == 2
    assert "redaction.caller_key is not the key the backup's pseudonyms were made with" in refused.output
    assert not (tmp_path / "new").exists()


def test_an_archive_that_is_not_a_ragmon_backup_is_named(tmp_path):
    import tarfile

    bogus = tmp_path / "bogus.tar.gz"
    with tarfile.open(bogus, "w:gz") as archive:
        archive.add(EXAMPLES, arcname="events.jsonl")
    env = install(tmp_path / "new", f"sqlite:///{tmp_path / 'new' / 'ragmon.db'}", KEY)
    refused = CliRunner().invoke(main, ["restore", str(bogus)], env=env)
    assert refused.exit_code == 2 and "not a ragmon backup (manifest.json" in refused.output
    refused = CliRunner().invoke(main, ["restore", str(EXAMPLES)], env=env)
    assert refused.exit_code == 2 and "not a ragmon backup (not a gzip'd tar archive" in refused.output
