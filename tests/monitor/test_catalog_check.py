"""``ragmon catalog check``: the digest of served documents, and what it says of a catalog that names
documents differently, versions them differently or leaves their tenant out. Expected figures are
counted from the traces the test sends."""

from __future__ import annotations

import json
import os
import subprocess
import time

from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from sqlalchemy import text

from ragmon.monitor.app.catalog_check import check_catalog
from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_catalog_sync, build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.storage.catalog_store import load_catalog
from ragmon.monitor.storage.served_documents import ServedDocuments
from ragmon.monitor.storage.store import make_engine


def environ_for(tmp_path, root):
    return {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_CATALOG__SOURCES": json.dumps([{"name": "docs", "kind": "folder", "root": str(root)}])}


def trace(number: int, tenant: str, passages: list[dict], index: str = "handbook") -> RawRecord:
    event = {"type": "trace", "trace_id": f"t{number}", "time": time.time(), "tenant": tenant, "query": "q",
             "index": {"name": index}, "retrievals": [{"retriever": "vector", "passages": passages}]}
    return RawRecord("http", json.dumps(event).encode(), privilege=Privilege.INGEST)


def git_blob(path) -> str:
    return subprocess.run(["git", "hash-object", "--no-filters", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def served_world(tmp_path):
    """A folder of three documents synced into the catalog, and traffic naming them (and others)."""
    root = tmp_path / "corpus"
    (root / "hr").mkdir(parents=True)
    (root / "hr/leave.md").write_text("leave")
    (root / "hr/pay.md").write_text("pay")
    (root / "faq.md").write_text("faq")
    runtime = build_runtime(load_settings(environ=environ_for(tmp_path, root)), registry=CollectorRegistry())
    assert build_catalog_sync(runtime).sync("docs").outcome == "ok"
    leave, pay = git_blob(root / "hr/leave.md"), git_blob(root / "hr/pay.md")
    records = [
        # 2 traces x 2 passages of hr/leave.md (the second spelled ./ and //): known, versions as the catalog's
        *[trace(i, "acme", [{"id": f"leave#{c}", "doc_id": "./hr//leave.md", "doc_version": leave} for c in (1, 2)])
          for i in (1, 2)],
        # 3 passages of pay.md, known, in the globex tenant
        trace(3, "globex", [{"id": f"pay#{c}", "doc_id": "hr/pay.md", "doc_version": pay} for c in (1, 2, 3)]),
        # 5 passages named by an absolute path the catalog does not know (the indexer's own path)
        trace(4, "acme", [{"id": f"faq#{c}", "doc_id": "/srv/app/corpus/faq.md"} for c in range(5)]),
        # 1 passage of a document nobody knows
        trace(5, "acme", [{"id": "x#1", "doc_id": "unknown.md"}]),
        # an index whose versions are hashed another way (sha256 of the text)
        trace(6, "acme", [{"id": "l#1", "doc_id": "hr/leave.md", "doc_version": "sha256:abc"},
                          {"id": "p#1", "doc_id": "hr/pay.md", "doc_version": "sha256:def"}], index="rehashed"),
    ]
    result = runtime.pipeline.process(records)
    assert result.accepted == 6 and result.rejected == 0
    runtime.close()  # writes the digest
    return root


def test_the_digest_counts_passages_served_per_document_and_version(tmp_path):
    served_world(tmp_path)
    rows = ServedDocuments(make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}"), time.time, 7, 1000).read()
    by_key = {(r.index, r.tenant, r.doc_id): r.passages for r in rows}
    assert by_key == {("handbook", "acme", "hr/leave.md"): 4, ("handbook", "globex", "hr/pay.md"): 3,
                      ("handbook", "acme", "/srv/app/corpus/faq.md"): 5, ("handbook", "acme", "unknown.md"): 1,
                      ("rehashed", "acme", "hr/leave.md"): 1, ("rehashed", "acme", "hr/pay.md"): 1}


def test_the_check_reports_shares_unknown_ids_with_hints_versions_and_tenantless_documents(tmp_path):
    served_world(tmp_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    catalog = Catalog()
    load_catalog(engine, catalog)
    report = check_catalog(ServedDocuments(engine, time.time, 7, 1000).read(), catalog, 0, lambda v: v, 0.95)
    handbook, rehashed = report.indexes
    assert (handbook.index, handbook.passages, handbook.known) == ("handbook", 4 + 3 + 5 + 1, 4 + 3)
    assert handbook.unmatched == [
        {"doc_id": "/srv/app/corpus/faq.md", "passages": 5,
         "hint": "the catalog has faq.md: give its source id_prefix /srv/app/corpus/"},
        {"doc_id": "unknown.md", "passages": 1, "hint": None}]
    assert (handbook.versions_checked, handbook.versions_unknown) == (2, 0)
    assert (rehashed.passages, rehashed.known, rehashed.versions_checked, rehashed.versions_unknown) == (2, 2, 2, 2)
    assert report.tenants == ["acme", "globex"]
    assert report.tenantless == 2  # leave.md served to acme, pay.md to globex: the folder named no tenant
    assert len(report.problems) == 3
    assert "handbook: the catalog knows the documents of 54% of the passages served" in report.problems[0]
    assert "rehashed: no served version" in report.problems[1]


def test_the_command_prints_it_and_fails_on_a_problem(tmp_path):
    root = served_world(tmp_path)
    env = {**{k: None for k in os.environ if k.startswith("RAGMON_")}, **environ_for(tmp_path, root)}
    result = CliRunner().invoke(main, ["catalog", "check"], env=env)
    assert result.exit_code == 1, result.output
    assert "53.8%" in result.output and "/srv/app/corpus/faq.md" in result.output
    result = CliRunner().invoke(main, ["catalog", "check", "-o", "json", "--min-known", "0.5"], env=env)
    data = json.loads(result.stdout)
    assert [i["known_share"] for i in data["indexes"]] == [round(7 / 13, 4), 1.0]
    assert len(data["problems"]) == 2  # the share passes at 0.5; versions and tenants do not


def test_the_digest_keeps_its_bounds(tmp_path):
    from ragmon.monitor.core.model import Caller, IndexRef, Passage, Retrieval, TraceEvent
    from ragmon.monitor.core.pipeline import Observation
    from ragmon.monitor.storage.store import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    now = [1_800_000_000.0]
    digest = ServedDocuments(engine, lambda: now[0], keep_days=1, max_rows=3)

    def serve(doc_id: str, when: float) -> None:
        event = TraceEvent(trace_id=doc_id, time=when, query="", index=IndexRef("i"), caller=Caller(),
                           retrievals=[Retrieval("v", [Passage(id=doc_id + "#1", doc_id=doc_id)])])
        digest.consume(Observation(event, "http", when))

    serve("old", now[0] - 2 * 86400)
    for n in range(4):
        serve(f"d{n}", now[0] + n)
    digest.write(now[0] + 10)
    with engine.connect() as connection:
        left = {row[0] for row in connection.execute(text("select doc_id from served_document"))}
    assert left == {"d1", "d2", "d3"}  # "old" beyond a day, d0 the least recently served beyond 3 rows


def test_the_digest_is_written_off_the_pipeline_thread_and_counts_what_it_leaves_out(tmp_path, monkeypatch):
    from ragmon.monitor.core.model import IndexRef, Passage, Retrieval, TraceEvent
    from ragmon.monitor.core.pipeline import Observation
    from ragmon.monitor.storage import served_documents
    from ragmon.monitor.storage.store import upgrade

    monkeypatch.setattr(served_documents, "WRITE_SECONDS", 0.05)
    monkeypatch.setattr(served_documents, "MAX_PENDING", 2)
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    dropped = []
    digest = ServedDocuments(engine, time.time, 7, 100, on_dropped=lambda: dropped.append(1)).start()
    event = TraceEvent(trace_id="t", time=time.time(), query="", index=IndexRef("i"), retrievals=[
        Retrieval("v", [Passage(id=f"c{n}", doc_id=f"d{n}") for n in range(3)] + [Passage(id="x", doc_id="y" * 300)])])
    digest.consume(Observation(event, "http", time.time()))
    assert digest.flush(1.0)
    deadline = time.monotonic() + 10
    while not digest.read():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert {r.doc_id for r in digest.read()} == {"d0", "d1"} and len(dropped) == 2  # d2 beyond 2 keys; y*300
    digest.shutdown()


def test_a_trace_judged_again_after_a_catalog_change_is_not_served_twice(tmp_path):
    """What a catalog change shows of an earlier trace reaches the sinks with that trace: the
    digest counted its passages when it was served, and counts them once."""
    from ragmon.monitor.core.model import IndexRef, Passage, Retrieval, TraceEvent
    from ragmon.monitor.core.pipeline import LATE_SOURCE, Observation
    from ragmon.monitor.core.signals.results import AccessFindings, LateSignals, StaleFindings
    from ragmon.monitor.storage.store import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    digest = ServedDocuments(engine, time.time, keep_days=1, max_rows=10)
    event = TraceEvent(trace_id="t", time=time.time(), query="", index=IndexRef("i"),
                       retrievals=[Retrieval("v", [Passage(id="pay#1", doc_id="pay")])])
    digest.consume(Observation(event, "http", time.time()))
    late = LateSignals("default", "i", AccessFindings(1, 1), StaleFindings())
    digest.consume(Observation(event, LATE_SOURCE, time.time(), late))
    digest.write(time.time())
    assert [(row.doc_id, row.passages) for row in digest.read()] == [("pay", 1)]


def index_event(index: str, doc_id: str, version: str) -> RawRecord:
    event = {"type": "index", "index": index, "doc_id": doc_id, "version": version, "indexed_at": time.time(),
             "chunks": 2}
    return RawRecord("http", json.dumps(event).encode(), privilege=Privilege.CATALOG)


def test_index_entries_whose_versions_the_document_source_never_had_fail_the_check(tmp_path):
    """Two index-entry feeds of the folder's documents: one versions them as git does (the folder
    source's blob ids), the other by the SHA-256 of the text, as an indexer's own hashes would. Passages
    without a version of their own would be judged by the second's and never found stale: the check
    says so, with no traffic at all."""
    import hashlib

    root = tmp_path / "corpus"
    (root / "hr").mkdir(parents=True)
    texts = {"hr/leave.md": "leave", "hr/pay.md": "pay"}
    for rel, body in texts.items():
        (root / rel).write_text(body)
    runtime = build_runtime(load_settings(environ=environ_for(tmp_path, root)), registry=CollectorRegistry())
    assert build_catalog_sync(runtime).sync("docs").outcome == "ok"
    records = [index_event("blobs", rel, git_blob(root / rel)) for rel in texts]
    records += [index_event("hashes", rel, "sha256:" + hashlib.sha256(body.encode()).hexdigest())
                for rel, body in texts.items()]
    records.append(index_event("hashes", "elsewhere.md", "v1"))  # a document the catalog does not know
    assert runtime.pipeline.process(records).accepted == len(records)
    runtime.close()

    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    catalog = Catalog()
    load_catalog(engine, catalog)
    report = check_catalog([], catalog, 0, lambda v: v, 0.95)
    blobs, hashes = report.indexes
    assert (blobs.index, blobs.passages, blobs.entries_checked, blobs.entries_unknown) == ("blobs", 0, 2, 0)
    assert (hashes.index, hashes.entries_checked, hashes.entries_unknown) == ("hashes", 2, 2)
    assert hashes.entry_examples[0] == {"doc_id": "hr/leave.md",
                                        "indexed": "sha256:" + hashlib.sha256(b"leave").hexdigest(),
                                        "catalog": git_blob(root / "hr/leave.md")}
    assert len(report.problems) == 1 and report.problems[0].startswith("hashes: no version its 2 index entries hold")

    env = {**{k: None for k in os.environ if k.startswith("RAGMON_")}, **environ_for(tmp_path, root)}
    result = CliRunner().invoke(main, ["catalog", "check"], env=env)
    assert result.exit_code == 1, result.output
    assert "one the document source never had" in result.output
