"""The rules of a sync, on the plan alone: from a source's last snapshot and its new one to events."""

from __future__ import annotations

import copy

from ragmon.collectors.catalog_sources.base import Snapshot
from ragmon.collectors.catalog_sources.plan import KEEP_GONE_SECONDS, plan_sync
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent

NOW = 1_800_000_000.0


def doc(doc_id: str, version: str = "v1", at: float = NOW - 1000, acl=("group:staff",), tenant="acme") -> DocumentEvent:
    return DocumentEvent(doc_id=doc_id, version=version, modified_at=at, tenant=tenant,
                         acl=list(acl) if acl is not None else None)


def snapshot(*documents: DocumentEvent, unread=()) -> Snapshot:
    return Snapshot(documents={d.doc_id: copy.deepcopy(d) for d in documents}, unread=set(unread))


def applied(plan, catalog: Catalog) -> Catalog:
    for event in plan.events:
        catalog.apply(event)
    return catalog


def sync(previous, new, catalog, now=NOW, share=0.5, accept=False):
    return plan_sync(previous, {}, new, catalog, now, max_deletion_share=share, accept_deletions=accept)


def test_a_first_sync_sends_every_document_and_a_second_of_the_same_snapshot_sends_nothing():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b")), catalog)
    assert [e.doc_id for e in first.events] == ["a", "b"] and first.changes == {"document": 2}
    applied(first, catalog)
    second = sync(first.documents, snapshot(doc("a"), doc("b")), catalog)
    assert second.events == [] and not second.changes and second.documents == first.documents


def test_a_document_gone_becomes_a_tombstone_of_its_last_version_once():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b"), doc("c")), catalog)
    applied(first, catalog)
    second = sync(first.documents, snapshot(doc("a"), doc("b")), catalog, now=NOW + 60)
    assert second.changes == {"tombstone": 1} and second.deletions == 1 and second.live_before == 3
    [tombstone] = second.events
    assert (tombstone.doc_id, tombstone.version, tombstone.deleted, tombstone.modified_at, tombstone.tenant,
            tombstone.acl) == ("c", "v1", True, NOW + 60, "acme", ["group:staff"])
    applied(second, catalog)
    assert catalog.document("c").deleted
    third = sync(second.documents, snapshot(doc("a"), doc("b")), catalog, now=NOW + 120)
    assert third.events == [] and third.documents["c"] == tombstone  # remembered, not sent again
    later = sync(third.documents, snapshot(doc("a"), doc("b")), catalog, now=NOW + 60 + KEEP_GONE_SECONDS)
    assert "c" not in later.documents and later.events == []


def test_a_sync_that_would_delete_more_than_its_share_is_held_unless_accepted():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b"), doc("c"), doc("d")), catalog)
    applied(first, catalog)
    vanished = sync(first.documents, snapshot(), catalog)
    assert vanished.held and vanished.events == [] and vanished.deletion_share == 1.0
    half = sync(first.documents, snapshot(doc("a"), doc("b")), catalog, share=0.5)
    assert not half.held and half.changes == {"tombstone": 2}  # 0.5 is within a share of 0.5
    more = sync(first.documents, snapshot(doc("a")), catalog, share=0.5)
    assert more.held and more.changes == {}
    accepted = sync(first.documents, snapshot(doc("a")), catalog, share=0.5, accept=True)
    assert not accepted.held and accepted.changes == {"tombstone": 3}


def test_a_document_present_but_unread_keeps_its_last_state():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b")), catalog)
    applied(first, catalog)
    plan = sync(first.documents, snapshot(doc("a"), unread={"b"}), catalog)
    assert plan.events == [] and plan.deletions == 0 and plan.documents["b"] == first.documents["b"]


def test_a_process_that_missed_the_last_sync_is_brought_level_and_one_ahead_is_left_alone():
    synced = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b", version="v2")), synced)
    applied(first, synced)
    elsewhere = Catalog()  # a serve that did not take part: the stored snapshot is the same
    elsewhere.apply(doc("b", version="v1", at=NOW - 5000))
    plan = sync(first.documents, snapshot(doc("a"), doc("b", version="v2")), elsewhere)
    assert [(e.doc_id, e.version) for e in plan.events] == [("a", "v1"), ("b", "v2")]
    ahead = Catalog()  # another feed reported a later change of b: not fought over
    ahead.apply(doc("a"))
    ahead.apply(doc("b", version="v3", at=NOW - 10))
    assert sync(first.documents, snapshot(doc("a"), doc("b", version="v2")), ahead).events == []


def test_an_unchanged_version_keeps_the_time_it_was_first_seen_with():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a", at=NOW - 1000)), catalog)
    applied(first, catalog)
    touched = sync(first.documents, snapshot(doc("a", at=NOW - 10)), catalog)
    assert touched.events == [] and touched.documents["a"].modified_at == NOW - 1000
    edited = sync(first.documents, snapshot(doc("a", version="v2", at=NOW - 10)), catalog)
    assert [(e.version, e.modified_at) for e in edited.events] == [("v2", NOW - 10)]


def test_a_changed_acl_alone_is_sent_and_taken_by_the_catalog():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a", acl=("group:staff", "group:hr"))), catalog)
    applied(first, catalog)
    narrowed = sync(first.documents, snapshot(doc("a", acl=("group:hr",))), catalog)
    assert narrowed.changes == {"document": 1}
    applied(narrowed, catalog)
    assert catalog.document("a").acl == ("group:hr",)


def test_a_document_back_after_its_tombstone_is_dated_after_it():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b"), doc("c")), catalog)
    applied(first, catalog)
    gone = sync(first.documents, snapshot(doc("a"), doc("b")), catalog, now=NOW + 60)
    applied(gone, catalog)
    back = sync(gone.documents, snapshot(doc("a"), doc("b"), doc("c")), catalog, now=NOW + 120)
    [event] = back.events
    assert not event.deleted and event.modified_at == NOW + 120
    applied(back, catalog)
    assert not catalog.document("c").deleted


def test_an_event_the_catalog_refused_is_sent_again_next_time():
    catalog = Catalog()
    first = sync({}, snapshot(doc("a"), doc("b")), catalog)
    first.keep_last(first.events[1], {}, {})
    assert set(first.documents) == {"a"}
    applied(first, catalog)
    assert [e.doc_id for e in sync(first.documents, snapshot(doc("a"), doc("b")), catalog).events] == ["b"]


def test_an_index_entry_gone_becomes_a_removal():
    catalog = Catalog()
    entries = {("idx", "a"): IndexEvent(index="idx", doc_id="a", version="v1", indexed_at=NOW - 100, chunks=3),
               ("idx", "b"): IndexEvent(index="idx", doc_id="b", version="v1", indexed_at=NOW - 100, chunks=2)}
    first = plan_sync({}, {}, Snapshot(index_entries=dict(entries)), catalog, NOW, max_deletion_share=0.5)
    assert first.changes == {"index": 2} and first.documents is None
    applied(first, catalog)
    second = plan_sync({}, first.index_entries, Snapshot(index_entries={("idx", "a"): entries[("idx", "a")]}),
                       catalog, NOW + 5, max_deletion_share=0.5)
    [removal] = second.events
    assert (removal.doc_id, removal.chunks, removal.version, removal.indexed_at) == ("b", 0, "v1", NOW + 5)


def test_a_catalog_holding_an_index_entry_with_another_acl_is_brought_level():
    """A process whose catalog holds the entry as the last snapshot said but with another ACL (it did
    not take part in the sync that changed it) gets the entry again."""
    entry = IndexEvent(index="idx", doc_id="a", version="v1", indexed_at=NOW - 100, chunks=3, acl=["group:hr"])
    catalog = Catalog()
    catalog.apply(IndexEvent(index="idx", doc_id="a", version="v1", indexed_at=NOW - 100, chunks=3,
                             acl=["group:staff"]))
    plan = plan_sync({}, {("idx", "a"): entry}, Snapshot(index_entries={("idx", "a"): entry}), catalog, NOW,
                     max_deletion_share=0.5)
    assert plan.events == [entry]
    applied(plan, catalog)
    assert catalog.indexed[("idx", "a")].acl == ("group:hr",)
    assert plan_sync({}, {("idx", "a"): entry}, Snapshot(index_entries={("idx", "a"): entry}), catalog, NOW,
                     max_deletion_share=0.5).events == []


def test_without_a_catalog_the_snapshot_alone_decides():
    """Events for the Kafka catalog topic: the sending process's catalog may lag; every replica reads the topic."""
    first = sync({}, snapshot(doc("a")), None)
    assert first.changes == {"document": 1}
    assert sync(first.documents, snapshot(doc("a")), None).events == []


def test_an_index_entry_of_an_unchanged_version_keeps_the_time_it_was_first_indexed_with():
    """A source that knows no indexed time gives each sync's: the same version is no new lag."""
    def entries(version: str, at: float, chunks: int = 2) -> Snapshot:
        entry = IndexEvent(index="policies", doc_id="a", version=version, indexed_at=at, chunks=chunks)
        return Snapshot(index_entries={("policies", "a"): entry})

    catalog = Catalog()
    first = plan_sync({}, {}, entries("v1", NOW - 600), catalog, NOW - 600, max_deletion_share=0.5)
    applied(first, catalog)
    again = plan_sync({}, first.index_entries, entries("v1", NOW), catalog, NOW, max_deletion_share=0.5)
    assert again.events == [] and again.index_entries[("policies", "a")].indexed_at == NOW - 600
    more = plan_sync({}, first.index_entries, entries("v1", NOW, chunks=3), catalog, NOW, max_deletion_share=0.5)
    assert [(e.indexed_at, e.chunks) for e in more.events] == [(NOW - 600, 3)]
    newer = plan_sync({}, first.index_entries, entries("v2", NOW), catalog, NOW, max_deletion_share=0.5)
    assert [(e.version, e.indexed_at) for e in newer.events] == [("v2", NOW)]
