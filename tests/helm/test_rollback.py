"""A Helm rollback (docs/upgrades.md): the chart's migration hook also runs before a rollback, in the
image of the release rolled back to. Its command, as `helm template` renders it, run by this code on
a PostgreSQL database a later release migrated: newer expand steps are left as they are and the
rollback goes on; a contract step this code does not know fails the hook, saying what to run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from ragmon.monitor.storage.store import current_revision, head_revision, make_engine, upgrade
from tests.helm.test_chart import VALUE_SETS, by_kind, render
from tests.monitor.test_schema_window import CONTRACT, EXPAND, later_release

pytestmark = pytest.mark.integration  # helm and PostgreSQL


def hook_command() -> list[str]:
    """The migration hook's command, checked to run before a rollback too."""
    job = by_kind(render(*VALUE_SETS["scaled"]))[("Job", "rag-ragmon-migrate")]
    assert "pre-rollback" in job["metadata"]["annotations"]["helm.sh/hook"].split(",")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][0] == "ragmon"
    return [sys.executable, "-m", "ragmon", *container["command"][1:]]


def run_hook(url: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}, "RAGMON_DATABASE__URL": url}
    return subprocess.run(hook_command(), env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("steps", "outcome"), [
    ([("9001", EXPAND, {}), ("9002", EXPAND, {})], "goes on"),
    ([("9001", EXPAND, {}), ("9002", CONTRACT, {"needs_code": "9001"})], "stops"),
])
def test_the_hook_of_the_release_rolled_back_to(postgres, tmp_path, steps, outcome):
    engine = make_engine(postgres.create_database(f"rollback_{uuid.uuid4().hex[:8]}"))
    upgrade(engine, location=later_release(tmp_path, "later", *steps))
    done = run_hook(engine.url.render_as_string(hide_password=False))
    if outcome == "goes on":
        assert done.returncode == 0, done.stderr
        assert f"schema 9002 is newer than this code ({head_revision()}) by expand steps only: left as it is" \
            in done.stdout
    else:
        assert done.returncode == 2, done.stdout
        assert f"a contract step after this code's {head_revision()} needs code at revision 9001" in done.stderr
    assert current_revision(engine) == "9002"
    engine.dispose()
