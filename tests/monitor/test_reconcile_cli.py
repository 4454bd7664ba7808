"""`ragmon catalog reconcile` on a stored catalog, with no traffic and no running serve: the
figures per tenant and index, the findings named with their rule, the filters, and exit 1 while a
revocation is pending or when nothing was held to reconcile."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from ragmon.monitor.app.cli import main


def replay(runner: CliRunner, env: dict, tmp_path, *events: dict) -> None:
    (tmp_path / "catalog.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    replayed = runner.invoke(main, ["replay", str(tmp_path / "catalog.jsonl")], env=env)
    assert replayed.exit_code == 0, replayed.output


def test_reconcile_reports_the_stored_catalog_and_exits_1_while_a_revocation_is_pending(tmp_path):
    now = time.time()
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")}
    runner = CliRunner()
    replay(runner, env, tmp_path,
           {"type": "document", "doc_id": "memo", "tenant": "acme", "version": "v1", "modified_at": now - 600,
            "acl": ["group:board"]},
           {"type": "index", "index": "kb", "doc_id": "memo", "version": "v1", "indexed_at": now - 3600,
            "acl": ["group:board", "group:staff"]},
           {"type": "document", "doc_id": "faq", "tenant": "acme", "version": "v2", "modified_at": now - 1800,
            "acl": ["*"]},
           {"type": "index", "index": "kb", "doc_id": "faq", "version": "v1", "indexed_at": now - 3600, "acl": ["*"]},
           {"type": "document", "doc_id": "old", "tenant": "acme", "version": "v1", "modified_at": now - 900,
            "deleted": True},
           {"type": "index", "index": "kb", "doc_id": "old", "version": "v1", "indexed_at": now - 3600})
    listed = runner.invoke(main, ["catalog", "reconcile", "-o", "json"], env=env)
    assert listed.exit_code == 1, listed.output
    report = json.loads(listed.stdout)
    [row] = report["indexes"]
    assert (row["tenant"], row["index"], row["entries"]) == ("acme", "kb", 3)
    assert row["documents"] == {"stale": 1, "deleted": 1, "acl_narrower": 1, "acl_wider": 0}
    assert row["not_judged"] == {"unknown_document": 0, "source_acl_unknown": 0, "index_acl_unknown": 0}
    assert 590 <= row["oldest_seconds"]["acl_narrower"] < 700
    assert sorted((f["kind"], f["doc_id"]) for f in report["findings"]) == [
        ("acl_narrower", "memo"), ("deleted", "old"), ("stale", "faq")]
    only = runner.invoke(main, ["catalog", "reconcile", "--kind", "stale", "-o", "json"], env=env)
    assert [f["doc_id"] for f in json.loads(only.stdout)["findings"]] == ["faq"]
    table = runner.invoke(main, ["catalog", "reconcile", "--index", "kb"], env=env)
    assert "acme/kb: acl_narrower: memo" in table.output and "group:staff" in table.output
    elsewhere = runner.invoke(main, ["catalog", "reconcile", "--index", "elsewhere"], env=env)
    assert elsewhere.exit_code == 1 and "no index entries in the catalog for this tenant and index" in \
        " ".join(elsewhere.output.split())

    # the index takes the narrowed ACL in: nothing pending, exit 0
    replay(runner, env, tmp_path, {"type": "index", "index": "kb", "doc_id": "memo", "version": "v1",
                                   "indexed_at": now, "acl": ["group:board"]})
    again = runner.invoke(main, ["catalog", "reconcile", "-o", "json"], env=env)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["indexes"][0]["documents"]["acl_narrower"] == 0


def test_a_catalog_without_index_entries_is_not_reported_as_level(tmp_path):
    """Documents but no index entry (no index-entry source, or one that failed): nothing is reconciled,
    which the command says and exits 1 for, instead of an empty table read as a clean index."""
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")}
    runner = CliRunner()
    replay(runner, env, tmp_path, {"type": "document", "doc_id": "memo", "tenant": "acme", "version": "v1",
                                   "modified_at": time.time() - 600, "acl": ["group:board"]})
    listed = runner.invoke(main, ["catalog", "reconcile"], env=env)
    assert listed.exit_code == 1
    assert "no index entries in the catalog: nothing was reconciled" in " ".join(listed.output.split())
