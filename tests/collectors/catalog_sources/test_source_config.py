"""`catalog.sources` in the configuration: each kind's keys checked with errors that name them, and
`ragmon catalog sync` from the command line."""

from __future__ import annotations

import json
import math
import os

import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from ragmon.monitor.app.cli import main
from ragmon.monitor.config.catalog_sources import SOURCE_MODELS
from ragmon.monitor.config.settings import ConfigError, load_settings

MINIMAL = {"folder": {"root": "/srv/docs"}, "manifest": {"path": "/srv/manifest.jsonl"},
           "chroma": {"path": "/srv/chroma", "collections": ["docs"]},
           "qdrant": {"url": "https://qdrant.example.com", "allowed_hosts": ["qdrant.example.com"],
                      "collections": ["docs"]}}
MINIMAL.update({"record_manager": {"path": "/srv/records.db", "namespace": "chroma/docs"},
                "sql": {"path": "/srv/chunks.db", "query": "SELECT 1", "index": "docs"},
                "llamaindex_docstore": {"path": "/srv/storage", "index": "docs"},
                "lancedb": {"path": "/srv/lancedb", "collections": ["docs"]}})


def entry(kind: str, **keys) -> dict:
    return {"name": "s", "kind": kind, **MINIMAL[kind], **keys}


def float_keys(model: type[BaseModel]) -> list[str]:
    return [name for name, field in model.model_fields.items() if field.annotation is float]


SWEEP = [(model.model_fields["kind"].annotation.__args__[0], key) for model in SOURCE_MODELS
         for key in float_keys(model)]


def test_the_sweep_finds_the_floats():
    assert ("folder", "interval_seconds") in SWEEP and ("manifest", "timeout_seconds") in SWEEP


@pytest.mark.parametrize(("kind", "key"), SWEEP, ids=lambda value: str(value))
def test_no_float_of_a_source_takes_inf_or_nan(tmp_path, kind, key):
    for value in (math.inf, -math.inf, math.nan):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({"catalog": {"sources": [entry(kind, **{key: value})]}}))
        with pytest.raises(ConfigError, match=rf"catalog\.sources\.0\.{kind}\.{key}: Input should be a finite number"):
            load_settings(path, environ={})


@pytest.mark.parametrize(("sources", "message"), [
    ([entry("folder"), entry("manifest")], "source names must be unique: s given more than once"),
    ([entry("folder", name="has space")], "catalog.sources.0.folder.name: Value error, must be 1-64 characters"),
    ([entry("folder", tenant_pattern="^([^/]+)/")], "needs a named group `tenant`"),
    ([entry("folder", tenant_pattern="(")], "not a valid regular expression"),
    ([entry("folder", acl_keys={"groups": "group"})], "must end with `:`"),
    ([entry("folder", rooot="/x")], "catalog.sources.0.folder.rooot: unknown key"),
    ([{"name": "s", "kind": "pinecone"}], "catalog.sources.0: Input tag 'pinecone' found using 'kind' does not match"),
    ([entry("lancedb", collections=["../docs"])], "catalog.sources.0.lancedb.collections: Value error, '../docs' "
                                                   "is not a LanceDB table name"),
    ([entry("lancedb", collections=[".hidden"])], "is not a LanceDB table name"),
    ([entry("lancedb", doc_id_key="doc`id")], "must not hold a backtick"),
    ([entry("chroma", collections=[])], "catalog.sources.0.chroma.collections: List should have at least 1 item"),
    ([entry("chroma", url="http://localhost:8000")], "set path or url, one of them"),
    ([entry("chroma", path=None, url="https://chroma.example.com")], "the host chroma.example.com is not in "
                                                                      "allowed_hosts"),
    ([entry("chroma", acl_keys={"groups": "group"})], "must end with `:`"),
    ([entry("chroma", auth_header="Bearer abc")], "is not a reference to a secret"),
    ([entry("manifest", auth_header="Bearer abc")], "is not a reference to a secret"),
    ([entry("manifest", max_deletion_share=1.5)], "catalog.sources.0.manifest.max_deletion_share"),
])
def test_a_wrong_source_is_an_error_naming_its_key(sources, message):
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={"RAGMON_CATALOG__SOURCES": json.dumps(sources)})
    assert message in str(raised.value)
    assert "abc" not in str(raised.value)  # a secret given in place of a reference is not echoed


def invoke(tmp_path, *args, sources=None):
    environ = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
               "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")}
    if sources is not None:
        environ["RAGMON_CATALOG__SOURCES"] = json.dumps(sources)
    return CliRunner().invoke(main, ["catalog", "sync", *args], env=environ)


def test_catalog_sync_from_the_command_line(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for name in "abc":
        (root / f"{name}.md").write_text(name)
    sources = [{"name": "docs", "kind": "folder", "root": str(root)},
               {"name": "gone", "kind": "folder", "root": str(tmp_path / "nowhere")}]
    assert invoke(tmp_path).exit_code == 2  # none configured
    unknown = invoke(tmp_path, "--source", "nope", sources=sources)
    assert unknown.exit_code == 2 and "no source named nope (configured: docs, gone)" in unknown.output
    dry = invoke(tmp_path, "--source", "docs", "--dry-run", "-o", "json", sources=sources)
    assert dry.exit_code == 0 and json.loads(dry.stdout)[0]["changes"]["document"] == 3
    both = invoke(tmp_path, sources=sources)
    assert both.exit_code == 1  # one failed
    assert "docs" in both.stdout and "gone: failed: unavailable" in both.output
    for path in root.iterdir():
        path.unlink()
    held = invoke(tmp_path, "--source", "docs", "-o", "json", sources=sources)
    assert held.exit_code == 1 and json.loads(held.stdout)[0]["outcome"] == "held"
    forced = invoke(tmp_path, "--source", "docs", "--accept-deletions", "-o", "json", sources=sources)
    assert forced.exit_code == 0 and json.loads(forced.stdout)[0]["changes"]["tombstone"] == 3
