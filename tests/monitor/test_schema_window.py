"""Expand and contract migrations (docs/upgrades.md): code older than the schema starts when every
newer step is an expand step, and is refused, saying what to run, when one is a contract step it
does not know; every migration goes back to the schema its revision made, on SQLite and PostgreSQL,
and a step that cannot go back is named before anything changes.

The newer releases are this code's migration scripts copied with scripts added after them."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from ragmon.monitor.storage import schema_window
from ragmon.monitor.storage.store import (
    MIGRATIONS,
    IrreversibleStep,
    SchemaOutdated,
    SchemaTooNew,
    await_schema,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    prepare,
    scripts,
    upgrade,
)
from tests.databases import BOTH

HEAD = head_revision()

EXPAND = '''
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{previous}"
branch_labels = None
depends_on = None
change = "expand"
irreversible = {irreversible!r}


def upgrade() -> None:
    op.add_column("finding", sa.Column("note_{revision}", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("finding", "note_{revision}")
'''

CONTRACT = '''
from alembic import op

revision = "{revision}"
down_revision = "{previous}"
branch_labels = None
depends_on = None
change = "contract"
needs_code = "{needs_code}"
irreversible = None


def upgrade() -> None:
    op.drop_column("finding", "note_{needs_code}")


def downgrade() -> None:
    import sqlalchemy as sa
    op.add_column("finding", sa.Column("note_{needs_code}", sa.Text, nullable=True))
'''


def later_release(tmp_path: Path, name: str, *steps: tuple[str, str, dict]) -> Path:
    """This code's migrations plus ``steps`` (revision, template, fields), each after the one before."""
    location = tmp_path / name
    shutil.copytree(MIGRATIONS, location, ignore=shutil.ignore_patterns("__pycache__"))
    previous = HEAD
    for revision, template, fields in steps:
        text = template.format(revision=revision, previous=previous, **{"irreversible": None, **fields})
        (location / "versions" / f"{revision}_later.py").write_text(text)
        previous = revision
    return location


@pytest.fixture(params=BOTH)
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ragmon.db'}"
    return request.getfixturevalue("postgres").create_database(f"window_{uuid.uuid4().hex[:8]}")


def test_every_migration_says_whether_older_code_runs_on_it():
    script = scripts()
    assert schema_window.chain(script)[-1] == HEAD
    for revision in schema_window.chain(script):
        assert schema_window.declared(script, revision)[0] in schema_window.CHANGES


def test_a_migration_that_does_not_say_is_a_bug_named_at_upgrade(tmp_path):
    location = later_release(tmp_path, "later", ("9001", EXPAND, {}))
    path = location / "versions" / "9001_later.py"
    path.write_text(path.read_text().replace('change = "expand"', "change = None"))
    with pytest.raises(schema_window.MigrationDeclarationError, match="migration 9001: declares change = None"):
        upgrade(make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}"), location=location)


def test_older_code_starts_on_a_schema_newer_by_expand_steps(url, tmp_path):
    engine = make_engine(url)
    later = later_release(tmp_path, "later", ("9001", EXPAND, {}), ("9002", EXPAND, {}))
    upgrade(engine, location=later)
    assert current_revision(engine) == "9002"
    prepare(engine)  # this code's head is HEAD: it starts
    upgrade(engine)  # and its migration hook leaves the newer schema as it is
    assert current_revision(engine) == "9002"
    with engine.connect() as connection:
        assert schema_window.read(connection).oldest_code is None
        columns = {column["name"] for column in sa.inspect(connection).get_columns("finding")}
    assert {"note_9001", "note_9002"} <= columns
    engine.dispose()


def test_older_code_is_refused_by_a_contract_step_it_does_not_know(url, tmp_path):
    engine = make_engine(url)
    later = later_release(tmp_path, "later", ("9001", EXPAND, {}), ("9002", CONTRACT, {"needs_code": "9001"}))
    upgrade(engine, location=later)
    with engine.connect() as connection:
        assert schema_window.read(connection).oldest_code == "9001"
    message = f"a contract step after this code's {HEAD} needs code at revision 9001 or later"
    with pytest.raises(SchemaTooNew, match=message):
        prepare(engine)
    with pytest.raises(SchemaTooNew, match=message):
        upgrade(engine)
    slept = []
    with pytest.raises(SchemaTooNew):  # waiting would not make the code newer
        await_schema(engine, 60, sleep=slept.append)
    assert slept == []
    # the release that stopped using the dropped column runs on it
    prepare(engine, location=later_release(tmp_path, "middle", ("9001", EXPAND, {})))
    engine.dispose()


def test_a_contract_step_must_name_earlier_code(tmp_path):
    later = later_release(tmp_path, "later", ("9001", EXPAND, {}), ("9002", CONTRACT, {"needs_code": "9002"}))
    with pytest.raises(schema_window.MigrationDeclarationError, match="an earlier revision; it says '9002'"):
        upgrade(make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}"), location=later)


def shape(engine: sa.Engine) -> dict:
    """The tables, columns, indexes and unique constraints the schema holds (not the window's row)."""
    inspector = sa.inspect(engine)
    return {table: ({column["name"] for column in inspector.get_columns(table)},
                    {index["name"] for index in inspector.get_indexes(table)},
                    {tuple(unique["column_names"]) for unique in inspector.get_unique_constraints(table)})
            for table in inspector.get_table_names()}


def test_every_migration_goes_back_to_the_schema_its_revision_made(url, tmp_path, request):
    revisions = schema_window.chain(scripts())
    made = {}
    for revision in revisions:  # each revision's schema, made by upgrading a fresh database to it
        fresh_url = (f"sqlite:///{tmp_path / f'{revision}.db'}" if url.startswith("sqlite") else
                     request.getfixturevalue("postgres").create_database(f"up_{revision}_{uuid.uuid4().hex[:8]}"))
        fresh = make_engine(fresh_url)
        upgrade(fresh, revision)
        made[revision] = shape(fresh)
        fresh.dispose()
    engine = make_engine(url)
    upgrade(engine)
    for revision in reversed(revisions[:-1]):
        assert downgrade(engine) == [revisions[revisions.index(revision) + 1]]
        assert current_revision(engine) == revision
        assert shape(engine) == made[revision], f"going back to {revision}"
        with engine.connect() as connection:
            window = schema_window.read(connection)
        assert window is None or window.revision == revision
    assert downgrade(engine, "base") == [revisions[0]]
    assert set(shape(engine)) <= {"alembic_version"}
    upgrade(engine)
    assert current_revision(engine) == HEAD
    engine.dispose()


def test_a_step_that_cannot_go_back_is_named_and_nothing_changes(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    later = later_release(tmp_path, "later", ("9001", EXPAND, {}),
                          ("9002", EXPAND, {"irreversible": "the notes were moved into the reason"}))
    upgrade(engine, location=later)
    with pytest.raises(IrreversibleStep, match="migration 9002 cannot go back: the notes were moved into the reason"):
        downgrade(engine, HEAD, location=later)
    assert current_revision(engine) == "9002"
    assert downgrade(engine, "9002", location=later) == []
    with pytest.raises(SchemaTooNew, match="downgrade with the code of the release that migrated it"):
        downgrade(engine, HEAD)


def test_db_commands_downgrade_and_show_the_window(tmp_path):
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    runner = CliRunner()
    upgraded = runner.invoke(main, ["db", "upgrade"], env=env)
    assert upgraded.exit_code == 0, upgraded.output
    assert f"schema empty -> {HEAD}" in upgraded.output
    revisions = schema_window.chain(scripts())
    shown = runner.invoke(main, ["db", "current"], env=env)
    assert shown.exit_code == 0, shown.output
    assert f"schema: {HEAD} (current); this code: {HEAD}; oldest code it runs with: any" in shown.output
    back = runner.invoke(main, ["db", "downgrade", revisions[-3]], env=env)
    assert back.exit_code == 0, back.output
    assert f"schema {HEAD} -> {revisions[-3]} (undone: {revisions[-1]}, {revisions[-2]})" in back.output
    wrong = runner.invoke(main, ["db", "downgrade", "12ab"], env=env)
    assert wrong.exit_code == 2
    assert "revision '12ab': not one of this code's revisions" in wrong.output
    behind = runner.invoke(main, ["db", "current"], env=env)
    assert f"schema: {revisions[-3]} (behind)" in behind.output


def test_postgresql_behind_the_code_still_waits_for_the_migration(postgres):
    engine = make_engine(postgres.create_database(f"behind_{uuid.uuid4().hex[:8]}"))
    upgrade(engine, "0009")
    with pytest.raises(SchemaOutdated, match="run `ragmon db upgrade`") as raised:
        prepare(engine)
    assert not isinstance(raised.value, SchemaTooNew)
    engine.dispose()
