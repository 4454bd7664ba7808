"""A process's catalog follows what another process writes to the same store: every write takes
the next catalog revision and stamps the rows it changes; a reader takes in only the rows written
since the revision it saw, merged by the store's own rule (on SQLite and on a real PostgreSQL)."""

from __future__ import annotations

import uuid

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.catalog import Catalog, DocumentState, IndexedState
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.storage.catalog_refresh import CatalogRefresh
from ragmon.monitor.storage.catalog_store import changes_since, load_catalog
from ragmon.monitor.storage.store import make_engine, upgrade

NOW = 1_796_000_000.0


def runtime_for(url: str, tmp_path, **env: str):
    settings = load_settings(environ={"RAGMON_DATABASE__URL": url,
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "d.jsonl"),
                                      "RAGMON_REDACTION__CALLER_KEY": "a-test-key-of-some-length", **env})
    return build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())


def feed(runtime, *events: dict) -> None:
    runtime.pipeline.process([RawRecord("file", msgspec.json.encode(e), privilege=Privilege.TRUSTED) for e in events])


def document(version: str, modified_at: float, acl: list[str]) -> dict:
    return {"type": "document", "doc_id": "leave", "tenant": "acme", "version": version, "modified_at": modified_at,
            "acl": acl}


def follow(url: str, tmp_path) -> None:
    writer, reader = runtime_for(url, tmp_path), runtime_for(url, tmp_path)
    try:
        revision = load_catalog(reader.engine, catalog := Catalog())
        changed: list[set[str]] = []
        refresh = CatalogRefresh(reader.engine, catalog, revision, interval=3600.0, on_change=changed.append)
        assert refresh.poll(force=True) == set() and changed == []  # nothing written since
        feed(writer, document("3", NOW - 500, ["group:hr"]),
             {"type": "index", "index": "policies", "doc_id": "leave", "version": "3", "indexed_at": NOW - 400})
        assert refresh.poll() == set()  # not before its interval
        assert refresh.poll(force=True) == {"leave"}
        assert catalog.document("leave").acl == ("group:hr",) and catalog.indexed_version("policies", "leave") == "3"
        feed(writer, document("4", NOW - 300, ["group:payroll"]))  # a revocation
        assert refresh.poll(force=True) == {"leave"} and changed == [{"leave"}, {"leave"}]
        assert catalog.document("leave").acl == ("group:payroll",)
        assert catalog.health(NOW)["policies"].stale_documents == 1  # the index holds 3, the source has 4
        # the index's ACL of its entry is followed too, even when only it changed
        feed(writer, {"type": "index", "index": "policies", "doc_id": "leave", "version": "3", "indexed_at": NOW - 400,
                      "acl": ["group:hr"]})
        assert refresh.poll(force=True) == {"leave"} and catalog.indexed[("policies", "leave")].acl == ("group:hr",)
        # an older change written late does not move the catalog back, and a write of nothing new
        # is read back without changing anything
        feed(writer, document("2", NOW - 900, ["*"]))
        assert refresh.poll(force=True) == {"leave"}  # its history grew: the row moved on
        assert catalog.document("leave").acl == ("group:payroll",)
        feed(writer, document("4", NOW - 300, ["group:payroll"]))
        assert refresh.poll(force=True) == set()
        # only the rows written since the revision seen are read: the write that changed nothing
        # took a revision (four batches wrote) but stamped no row with it
        revision = refresh.revision
        assert revision == 5 and changes_since(reader.engine, revision) == (revision, [], [])
        assert changes_since(reader.engine, revision - 1) == (revision, [], [])
        _, documents, indexed = changes_since(reader.engine, 0)
        assert ([d.doc_id for d in documents], [e.doc_id for e in indexed]) == (["leave"], ["leave"])
    finally:
        writer.close()
        reader.close()


def test_a_reader_follows_what_another_process_writes_on_sqlite(tmp_path):
    follow(f"sqlite:///{tmp_path / 'ragmon.db'}", tmp_path)


@pytest.mark.integration
def test_a_reader_follows_what_another_process_writes_on_postgresql(postgres, tmp_path):
    url = postgres.create_database(f"follow_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))  # PostgreSQL is migrated by `ragmon db upgrade`, not at start-up
    follow(url, tmp_path)


def test_merging_stored_states_takes_those_further_along_only():
    catalog = Catalog()
    held = DocumentState("d", "acme", "2", 200.0, ("group:a",), False, {"1": 100.0, "2": 200.0})
    assert catalog.merge([held], [IndexedState("i", "d", "2", 250.0, None, None)]) == {"d"}
    assert catalog.merge([held], []) == set()  # the same state: no change
    older = DocumentState("d", "acme", "1", 100.0, ("*",), False, {"1": 100.0})
    assert catalog.merge([older], [IndexedState("i", "d", "1", 150.0, None, None)]) == set()
    assert catalog.document("d") is held and catalog.indexed_version("i", "d") == "2"
    narrowed = IndexedState("i", "d", "2", 250.0, None, None, ("group:a",))  # as late, another ACL
    assert catalog.merge([], [narrowed]) == {"d"} and catalog.indexed[("i", "d")].acl == ("group:a",)
    revoked = DocumentState("d", "acme", "2", 200.0, ("group:b",), False, {"1": 100.0, "2": 200.0})
    assert catalog.merge([revoked], []) == {"d"} and catalog.document("d").acl == ("group:b",)
    full = Catalog(max_documents=1)
    full.merge([held], [])
    assert full.merge([DocumentState("e", "acme", "1", 1.0, None, False, {"1": 1.0})], []) == set()
    # a new document refused for want of room does not keep a later one already held from its change
    assert full.merge([DocumentState("e", "acme", "1", 1.0, None, False, {"1": 1.0}), revoked], []) == {"d"}


def test_merging_index_entries_follows_the_store_and_a_full_catalog_still_takes_the_entries_it_holds():
    catalog = Catalog(max_index_entries=1)
    held = IndexedState("policies", "leave", "3", 400.0, "e5@1", 12)
    assert catalog.merge([], [held]) == {"leave"}
    assert catalog.merge([], [IndexedState("policies", "leave", "3", 400.0, "e5@1", 12)]) == set()  # read again
    # another process re-embedded the document with a new model, and indexed a document this one
    # has no room for: the new entry is refused, the change to the entry held is taken all the same
    reembedded = IndexedState("policies", "leave", "4", 500.0, "e5@2", 14)
    assert catalog.merge([], [IndexedState("policies", "travel", "1", 450.0, "e5@2", 3), reembedded]) == {"leave"}
    assert list(catalog.indexed) == [("policies", "leave")] and catalog.indexed_version("policies", "leave") == "4"
    assert catalog.health(NOW)["policies"].embedding_models == 1  # e5@1 no longer held by any entry


@pytest.mark.parametrize("repeat", [1, 2])
def test_an_event_that_changes_nothing_reports_no_change(repeat):
    from ragmon.monitor.core.model import DocumentEvent, IndexEvent

    catalog = Catalog()
    event = DocumentEvent(doc_id="d", version="1", modified_at=10.0, acl=["group:a"])
    index = IndexEvent(index="i", doc_id="d", version="1", indexed_at=20.0)
    assert catalog.apply(event) == "d" and catalog.apply(index) == "d"
    for _ in range(repeat):
        assert catalog.apply(DocumentEvent(doc_id="d", version="1", modified_at=10.0, acl=["group:a"])) is None
        assert catalog.apply(IndexEvent(index="i", doc_id="d", version="1", indexed_at=20.0)) is None
    assert catalog.apply(DocumentEvent(doc_id="d", version="1", modified_at=10.0, acl=["group:b"])) == "d"
    # the index's ACL of its entry is part of what the entry is
    assert catalog.apply(IndexEvent(index="i", doc_id="d", version="1", indexed_at=20.0, acl=["group:b"])) == "d"
    assert catalog.apply(IndexEvent(index="i", doc_id="d", version="1", indexed_at=20.0, acl=["group:b"])) is None
