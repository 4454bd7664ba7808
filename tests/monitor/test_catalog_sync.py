"""Syncing catalog sources through the real runtime (pipeline, catalog, SQLite store): idempotence, counts
per source, the deletion guard, and a sync that fails half-way changing nothing."""

from __future__ import annotations

import json
import logging
import os
import sqlite3

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import event as sql_event
from sqlalchemy import text
from sqlalchemy.engine import Engine

from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.wiring import build_catalog_sync, build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.storage.catalog_source_store import SourceStateStore
from ragmon.monitor.storage.catalog_store import load_catalog
from ragmon.monitor.storage.store import make_engine, upgrade


def runtime_for(tmp_path, sources, **env):
    environ = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_CATALOG__SOURCES": json.dumps(sources), **env}
    return build_runtime(load_settings(environ=environ), registry=CollectorRegistry())


def stored(runtime) -> Catalog:
    """The catalog as the database holds it (what a restart, or another process, reads)."""
    catalog = Catalog()
    load_catalog(runtime.engine, catalog)
    return catalog


def folder(tmp_path, **files: str):
    root = tmp_path / "docs"
    root.mkdir(exist_ok=True)
    for name, body in files.items():
        (root / f"{name}.md").write_text(body)
    return root


def count(runtime, name, **labels) -> float:
    return metric_sum(runtime.registry, name, **labels)


def test_a_sync_applies_the_folder_and_a_second_sync_changes_and_sends_nothing(tmp_path):
    root = folder(tmp_path, a="---\nacl: [group:hr]\n---\nA", b="B", c="C")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    syncing = build_catalog_sync(runtime)
    first = syncing.sync("docs")
    assert (first.outcome, first.items, dict(first.changes)) == ("ok", 3, {"document": 3})
    assert set(stored(runtime).documents) == {"a.md", "b.md", "c.md"}
    assert stored(runtime).document("a.md").acl == ("group:hr",)
    with runtime.engine.connect() as connection:
        rows_before = connection.execute(text("select * from catalog_document order by doc_id")).fetchall()
    events_before = count(runtime, "ragmon_events_total", source="catalog_source")
    second = syncing.sync("docs")
    assert (second.outcome, second.items, dict(second.changes)) == ("ok", 3, {})
    assert count(runtime, "ragmon_events_total", source="catalog_source") == events_before == 3
    with runtime.engine.connect() as connection:
        assert connection.execute(text("select * from catalog_document order by doc_id")).fetchall() == rows_before
    assert count(runtime, "ragmon_catalog_source_syncs_total", source="docs", outcome="ok") == 2
    assert count(runtime, "ragmon_catalog_source_changes_total", source="docs", kind="document") == 3
    assert count(runtime, "ragmon_catalog_source_items", source="docs") == 3
    assert count(runtime, "ragmon_catalog_source_last_success_timestamp_seconds", source="docs") > 0
    runtime.close()


def test_an_edit_a_narrowed_acl_and_a_deletion_reach_the_catalog(tmp_path):
    root = folder(tmp_path, a="---\nacl: [group:hr, group:staff]\n---\nA", b="B", c="C", d="D")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    syncing = build_catalog_sync(runtime)
    syncing.sync("docs")
    version_b = stored(runtime).document("b.md").version
    (root / "a.md").write_text("---\nacl: [group:hr]\n---\nA")
    (root / "b.md").write_text("B, edited")
    (root / "c.md").unlink()
    report = syncing.sync("docs")
    assert dict(report.changes) == {"document": 2, "tombstone": 1} and report.items == 3
    catalog = stored(runtime)
    assert catalog.document("a.md").acl == ("group:hr",)
    assert catalog.document("b.md").version != version_b and version_b in catalog.document("b.md").history
    assert catalog.document("c.md").deleted
    assert catalog.is_outdated("b.md", version_b) is True
    runtime.close()


def test_a_vanished_folder_is_held_not_read_as_every_document_deleted(tmp_path):
    root = folder(tmp_path, a="A", b="B", c="C")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root),
                                      "max_deletion_share": 0.4}])
    syncing = build_catalog_sync(runtime)
    syncing.sync("docs")
    for path in root.iterdir():
        path.unlink()
    held = syncing.sync("docs")
    assert held.outcome == "held" and held.deletions == 3 and "would delete 3 of 3" in held.error
    assert not any(d.deleted for d in stored(runtime).documents.values())
    assert not any(d.deleted for d in runtime.catalog.documents.values())
    assert count(runtime, "ragmon_catalog_source_syncs_total", source="docs", outcome="held") == 1
    (root / "a.md").write_text("A")
    (root / "b.md").write_text("B")
    assert syncing.sync("docs").changes == {"tombstone": 1}  # one of three: within 0.4
    (root / "b.md").unlink()
    assert syncing.sync("docs").outcome == "held"  # one of two
    accepted = syncing.sync("docs", accept_deletions=True)
    assert accepted.outcome == "ok" and accepted.changes == {"tombstone": 1}
    assert {k for k, d in stored(runtime).documents.items() if d.deleted} == {"b.md", "c.md"}
    runtime.close()


def test_a_source_that_cannot_be_read_changes_nothing(tmp_path):
    root = folder(tmp_path, a="A")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    syncing = build_catalog_sync(runtime)
    syncing.sync("docs")
    (root / "a.md").unlink()
    root.rmdir()
    failed = syncing.sync("docs")
    assert failed.outcome == "failed" and failed.error.startswith("unavailable")
    assert not stored(runtime).document("a.md").deleted
    assert count(runtime, "ragmon_catalog_source_syncs_total", source="docs", outcome="failed") == 1
    runtime.close()


def test_a_sync_whose_write_fails_half_way_leaves_catalog_and_snapshot_as_they_were(tmp_path):
    root = folder(tmp_path, a="A", b="B")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    syncing = build_catalog_sync(runtime)
    syncing.sync("docs")
    snapshot_before = SourceStateStore(runtime.engine).load("docs")
    (root / "a.md").write_text("A, edited")
    for name in ("c", "d", "poison", "e"):
        (root / f"{name}.md").write_text(name)
    with runtime.engine.begin() as connection:  # the database refuses one row of the batch
        connection.execute(text("create trigger refuse before insert on catalog_document "
                                "when new.doc_id = 'poison.md' begin select raise(abort, 'refused'); end"))
    failed = syncing.sync("docs")
    assert failed.outcome == "failed"
    catalog = stored(runtime)
    assert set(catalog.documents) == {"a.md", "b.md"}  # neither c, d nor e: the batch is one transaction
    assert catalog.document("a.md").version == snapshot_before[0]["a.md"].version
    assert SourceStateStore(runtime.engine).load("docs") == snapshot_before
    with runtime.engine.begin() as connection:
        connection.execute(text("drop trigger refuse"))
    retried = syncing.sync("docs")  # the next sync sends it all again
    assert retried.outcome == "ok" and dict(retried.changes) == {"document": 5}
    assert set(stored(runtime).documents) == {"a.md", "b.md", "c.md", "d.md", "e.md", "poison.md"}
    runtime.close()


def test_what_the_catalog_refuses_is_counted_and_sent_again_next_time(tmp_path):
    long_name = "x" * 300
    root = folder(tmp_path, a="A", b="B", **{long_name[:250]: "too long an id once prefixed"})
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root), "id_prefix": "p/" * 5}],
                          RAGMON_CATALOG__MAX_DOCUMENTS="1")
    syncing = build_catalog_sync(runtime)
    report = syncing.sync("docs")
    assert report.outcome == "ok" and report.refused == {"too_long": 1, "catalog_full": 1}
    assert dict(report.changes) == {"document": 1}
    again = syncing.sync("docs")
    assert again.refused == {"too_long": 1, "catalog_full": 1} and dict(again.changes) == {}
    assert count(runtime, "ragmon_catalog_source_refused_total", source="docs", reason="catalog_full") == 2
    dead = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert sorted(letter["reason"] for letter in dead) == ["catalog_full", "catalog_full", "too_long", "too_long"]
    runtime.close()


def test_a_dry_run_says_what_would_change_and_changes_nothing(tmp_path):
    root = folder(tmp_path, a="A", b="B")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    syncing = build_catalog_sync(runtime)
    report = syncing.sync("docs", dry_run=True)
    assert report.dry_run and dict(report.changes) == {"document": 2} and report.items == 2
    assert stored(runtime).documents == {} and SourceStateStore(runtime.engine).load("docs") == ({}, {})
    assert count(runtime, "ragmon_catalog_source_syncs_total", source="docs") == 0
    runtime.close()


def test_the_manifest_credential_reaches_no_log_no_metric_and_no_stored_row(tmp_path, caplog):
    secret = "Bearer tok-77ab-never-shown"
    runtime = runtime_for(tmp_path, [{"name": "wiki", "kind": "manifest", "url": "https://wiki.example/m.jsonl",
                                      "allowed_hosts": ["wiki.example"], "auth_header": "env:WIKI_AUTH"}])
    import httpx

    answers = iter([httpx.Response(401, text=f"bad token {secret}"),
                    httpx.Response(200, content=b'{"doc_id": "a", "version": "1", "modified_at": 1777000000}\n')])
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return next(answers)

    syncing = build_catalog_sync(runtime, environ={"WIKI_AUTH": secret}, http_transport=httpx.MockTransport(handler))
    caplog.set_level(logging.DEBUG)
    failed = syncing.sync("wiki")
    done = syncing.sync("wiki")
    assert (failed.outcome, done.outcome) == ("failed", "ok") and seen == [secret, secret]
    assert "HTTP 401" in failed.error
    exposition = generate_latest(runtime.registry).decode()
    with runtime.engine.connect() as connection:
        rows = json.dumps([list(map(str, r)) for table in ("catalog_document", "catalog_source_item")
                           for r in connection.execute(text(f"select * from {table}"))])
    for where in (caplog.text, exposition, rows, failed.error, os.fspath(tmp_path / "dead.jsonl")):
        assert "tok-77ab" not in where
    runtime.close()


@pytest.mark.parametrize("interval", [0.0, 30.0])
def test_the_scheduler_has_a_job_per_scheduled_source(tmp_path, interval):
    from ragmon.monitor.app.jobs import catalog_sync_job
    from ragmon.monitor.app.scheduler import build_scheduler
    from ragmon.monitor.app.wiring import build_jobs

    root = folder(tmp_path, a="A")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root),
                                      "interval_seconds": interval},
                                     {"name": "other", "kind": "folder", "root": str(root), "interval_seconds": 60}])
    jobs = build_jobs(runtime)
    scheduler = build_scheduler(runtime.settings.scheduler, jobs, probes=False)
    ids = {job.id for job in scheduler.get_jobs()}
    assert (catalog_sync_job("docs") in ids) is (interval > 0) and catalog_sync_job("other") in ids
    assert jobs.run(catalog_sync_job("other"))
    assert set(stored(runtime).documents) == {"a.md"}
    assert count(runtime, "ragmon_job_runs_total", scheduled_job="catalog-sync:other", outcome="ok") == 1
    root.rename(tmp_path / "moved")
    assert not jobs.run(catalog_sync_job("other"))  # a failed sync fails its job
    assert count(runtime, "ragmon_job_runs_total", scheduled_job="catalog-sync:other", outcome="failed") == 1
    runtime.close()


def test_a_catalog_loaded_later_is_brought_level_by_the_next_sync(tmp_path):
    """A serve that started before `ragmon catalog sync` ran in another process: the stored snapshot is
    current, its catalog is not; its own next sync sends what it lacks."""
    root = folder(tmp_path, a="A")
    serving = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    elsewhere = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}])
    assert build_catalog_sync(elsewhere).sync("docs").changes == {"document": 1}
    elsewhere.close()
    assert serving.catalog.document("a.md") is None
    report = build_catalog_sync(serving).sync("docs")
    assert report.changes == {"document": 1} and serving.catalog.document("a.md") is not None
    assert build_catalog_sync(serving).sync("docs").changes == {}
    serving.close()


def test_a_manifest_answering_404_or_empty_is_not_read_as_every_document_deleted(tmp_path):
    import httpx

    body = b"".join(b'{"doc_id": "%s", "version": "1", "modified_at": 1777000000}\n' % name for name in (b"a", b"b"))
    answers = iter([httpx.Response(200, content=body), httpx.Response(404), httpx.Response(200, content=b"")])
    runtime = runtime_for(tmp_path, [{"name": "wiki", "kind": "manifest", "url": "https://wiki.example/m.jsonl",
                                      "allowed_hosts": ["wiki.example"]}])
    syncing = build_catalog_sync(runtime, http_transport=httpx.MockTransport(lambda request: next(answers)))
    assert syncing.sync("wiki").changes == {"document": 2}
    assert syncing.sync("wiki").outcome == "failed"
    assert syncing.sync("wiki").outcome == "held"
    assert not any(d.deleted for d in stored(runtime).documents.values())
    runtime.close()


@pytest.mark.integration
def test_sync_and_digest_on_postgresql(postgres, tmp_path):
    import uuid

    from ragmon.monitor.core.records import Privilege, RawRecord
    from ragmon.monitor.storage.served_documents import ServedDocuments
    from ragmon.monitor.storage.store import make_engine, upgrade

    url = postgres.create_database(f"sources_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))
    root = folder(tmp_path, a="A", b="B", c="C")
    runtime = runtime_for(tmp_path, [{"name": "docs", "kind": "folder", "root": str(root)}],
                          RAGMON_DATABASE__URL=url, RAGMON_REDACTION__CALLER_KEY="k" * 32)
    syncing = build_catalog_sync(runtime)
    assert syncing.sync("docs").changes == {"document": 3}
    (root / "c.md").unlink()
    (root / "b.md").write_text("B2")
    assert dict(syncing.sync("docs").changes) == {"document": 1, "tombstone": 1}
    assert syncing.sync("docs").changes == {}
    assert SourceStateStore(runtime.engine).load("docs")[0]["c.md"].deleted
    trace = {"type": "trace", "trace_id": "t1", "time": 1_780_000_000, "tenant": "acme", "query": "q",
             "index": {"name": "i"}, "retrievals": [{"retriever": "v", "passages": [
                 {"id": "a#1", "doc_id": "./a.md", "doc_version": "1"}, {"id": "a#2", "doc_id": "a.md"}]}]}
    for _ in range(2):  # two writes of the same key add up
        trace["trace_id"] += "x"
        runtime.pipeline.process([RawRecord("http", json.dumps(trace).encode(), privilege=Privilege.INGEST)])
    runtime.close()
    rows = ServedDocuments(make_engine(url), lambda: 0.0, 7, 100).read()
    assert sorted((r.doc_id, r.version or "", r.passages) for r in rows) == [("a.md", "", 2), ("a.md", "1", 2)]
    catalog = Catalog()
    load_catalog(make_engine(url), catalog)
    assert catalog.document("c.md").deleted and catalog.document("b.md").version != catalog.document("a.md").version


def test_a_snapshot_replaced_keeps_what_stayed_and_deletes_what_went_each_row_by_its_whole_key(tmp_path):
    """Documents and index entries gone from a source, over two indexes, are deleted, each through
    the table's key (SQLite's own query plan): a row-value ``(index_name, doc_id) IN (...)`` made
    SQLite read every row of the source once per chunk of deletions."""
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    store = SourceStateStore(engine)
    documents = {f"d{n}": DocumentEvent(f"d{n}", "v1", 1.0) for n in range(6)}
    entries = {(index, f"d{n}"): IndexEvent(index, f"d{n}", "v1", 2.0) for index in ("a", "b") for n in range(6)}
    store.replace("docs", ({}, {}), (documents, entries))
    kept_documents = {k: v for k, v in documents.items() if k in ("d0", "d1")}
    kept_entries = {k: v for k, v in entries.items() if k in (("a", "d0"), ("b", "d5"))}
    deletes: list[tuple[str, object]] = []

    def remember(connection, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append((statement, parameters))

    sql_event.listen(Engine, "before_cursor_execute", remember)
    try:
        store.replace("docs", (documents, entries), (kept_documents, kept_entries))
    finally:
        sql_event.remove(Engine, "before_cursor_execute", remember)
    assert store.load("docs") == (kept_documents, kept_entries)
    database = sqlite3.connect(tmp_path / "ragmon.db")
    plans = [row[3] for statement, parameters in deletes
             for row in database.execute("EXPLAIN QUERY PLAN " + statement, parameters)]
    assert deletes and all("source=? AND index_name=? AND doc_id=?" in plan for plan in plans), plans
