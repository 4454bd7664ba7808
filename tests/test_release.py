"""A version per release (docs/upgrades.md): pyproject.toml, the chart's version and appVersion, and
the newest section of CHANGELOG.md name the same version; the changelog lists every migration with
the kind it declares (and, for a contract step, the revision it needs), once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from ragmon.monitor.storage import schema_window
from ragmon.monitor.storage.store import scripts

ROOT = Path(__file__).parent.parent
_SECTION = re.compile(r"^## (\S+)", re.MULTILINE)
_MIGRATION = re.compile(r"^- (\d{4}) .*\((expand|contract \(needs (\d{4})\))\)$", re.MULTILINE)


def test_the_version_is_the_same_everywhere_a_release_names_it():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "helm" / "ragmon" / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version)
    sections = _SECTION.findall((ROOT / "CHANGELOG.md").read_text())
    assert sections and sections[0] == version, "the newest CHANGELOG.md section names another version"


def test_the_changelog_says_what_every_migration_needs():
    script = scripts()
    listed = _MIGRATION.findall((ROOT / "CHANGELOG.md").read_text())
    revisions = [revision for revision, _, _ in listed]
    assert len(revisions) == len(set(revisions)), "a migration is listed twice"
    assert sorted(revisions) == sorted(schema_window.chain(script))
    for revision, kind, needs in listed:
        change, needs_code = schema_window.declared(script, revision)
        assert (kind.split()[0], needs or None) == (change, needs_code), revision
