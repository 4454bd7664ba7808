"""An old pod restarting mid-rollout: the code of the commit before the newest migration, as that
commit installs it, serves on a PostgreSQL database the current code migrated (docs/upgrades.md).

The old code is taken from git (``git archive``) and laid out the way its pyproject.toml's
``package-dir`` installs it; it runs on this environment's packages with ``PYTHONPATH`` pointing at
it (``PYTHONSAFEPATH``: ``python -m`` must not put the working directory, this checkout, first)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tomllib
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from ragmon.monitor.storage.store import current_revision, head_revision, make_engine, upgrade
from tests.ragmon_process import RagmonServer

ROOT = Path(__file__).parent.parent
VERSIONS = "monitor/storage/migrations/versions"
EXAMPLES = ROOT / "monitor" / "app" / "examples" / "events.jsonl"


def git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def commit_before_newest_migration() -> str:
    """The parent of the commit that added the newest migration script (renames are additions here:
    a migration renumbered on merge is still new to the code before it), along the first parents,
    a merge commit included: the code the mainline ran before it."""
    newest = sorted(path for path in (ROOT / VERSIONS).glob("[0-9]*.py"))[-1]
    added = git("log", "--first-parent", "-m", "--no-renames", "--diff-filter=A", "--format=%H", "-1", "--",
                str(newest.relative_to(ROOT))).decode().strip()
    assert added, f"{newest.name} is not in git: commit it before running this test"
    return git("rev-parse", f"{added}^").decode().strip()


def installed_tree(commit: str, into: Path) -> Path:
    """The packages of ``commit`` laid out as its pyproject.toml's ``package-dir`` installs them."""
    mapping = tomllib.loads(git("show", f"{commit}:pyproject.toml").decode())["tool"]["setuptools"]["package-dir"]
    with tarfile.open(fileobj=io.BytesIO(git("archive", commit, *mapping.values()))) as archive:
        archive.extractall(into / "source", filter="data")
    site = into / "site"
    for package in sorted(mapping, key=lambda name: name.count(".")):  # ragmon before ragmon.monitor
        target = site.joinpath(*package.split("."))
        target.parent.mkdir(parents=True, exist_ok=True)
        (into / "source" / mapping[package]).rename(target)
    return site


@pytest.mark.integration
def test_the_code_before_the_newest_migration_serves_on_the_migrated_schema(postgres, tmp_path):
    old = commit_before_newest_migration()
    site = installed_tree(old, tmp_path / "old")
    assert (site / "ragmon" / "monitor" / "storage" / "schema_window.py").exists(), (
        f"the code before the newest migration ({old}) compares the schema exactly (it predates the schema "
        "window): a new migration must be committed on top of the window, not squashed with it")
    env = {"PYTHONPATH": str(site), "PYTHONSAFEPATH": "1"}
    asked = subprocess.run(
        [sys.executable, "-c", "import ragmon.monitor.storage.store as s; print(s.__file__); print(s.head_revision())"],
        env={**env, "PATH": "/usr/bin:/bin"}, cwd=tmp_path, capture_output=True, text=True, check=True)
    old_file, old_head = asked.stdout.split()
    assert Path(old_file).is_relative_to(site)
    assert old_head != head_revision(), "the old code already knows the newest migration"

    url = postgres.create_database(f"rollout_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    upgrade(engine)  # the new release's migration hook
    assert current_revision(engine) == head_revision()

    scratch = tmp_path / "pod"
    scratch.mkdir()
    server = RagmonServer(scratch, RAGMON_DATABASE__URL=url, RAGMON_REDACTION__CALLER_KEY="a-rollout-key-of-length",
                          **env)
    with server:
        answer = httpx.post(f"{server.url}/v1/events", content=EXAMPLES.read_bytes(), timeout=120,
                            headers={"content-type": "application/x-ndjson"})
        assert answer.status_code == 200, answer.text
        counts = answer.json()  # the bundled events hold a few bad records on purpose, answered as rejected
        assert counts["accepted"] > 0
        assert counts["accepted"] + counts["rejected"] == len(EXAMPLES.read_bytes().splitlines())
    log = server.log_path.read_text()
    assert f"newer than this code ({old_head}) by expand steps only" in log
    with engine.connect() as connection:  # what the old code stored, on the new schema
        findings = connection.execute(sa.text("select count(*) from finding")).scalar_one()
        documents = connection.execute(sa.text("select count(*) from catalog_document")).scalar_one()
    assert findings > 0 and documents > 0
    assert current_revision(engine) == head_revision()
    engine.dispose()
