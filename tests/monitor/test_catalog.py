"""Catalog: document and index events, out-of-order changes, version history, index lag, and
index health (staleness from the oldest un-indexed change, deletions, removals, embedding models)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ragmon.monitor.core.catalog import (
    MAX_VERSION_HISTORY,
    Catalog,
    DocumentState,
    IndexedState,
    IndexHealth,
    health_from_scratch,
)
from ragmon.monitor.core.errors import InvalidInput, Reason
from ragmon.monitor.core.model import DocumentEvent, IndexEvent, Passage

NOW = 1_796_000_000.0


def doc(doc_id="leave", version="4", modified_at=NOW - 1000, **fields) -> DocumentEvent:
    return DocumentEvent(doc_id=doc_id, version=version, modified_at=modified_at, **fields)


def indexed(doc_id="leave", version="4", indexed_at=NOW - 900, index="policies", **fields) -> IndexEvent:
    return IndexEvent(index=index, doc_id=doc_id, version=version, indexed_at=indexed_at, **fields)


# --- document events -------------------------------------------------------------------------------


def test_first_document_event_creates_the_state_with_acl_as_tuple():
    catalog = Catalog()
    state = catalog.apply_document(doc(tenant="acme", acl=["group:staff", "user:u-1"]))
    assert state == DocumentState("leave", "acme", "4", NOW - 1000, ("group:staff", "user:u-1"), False,
                                  {"4": NOW - 1000})
    assert catalog.document("leave") is state
    assert catalog.document("other") is None


def test_document_without_acl_keeps_acl_unknown():
    catalog = Catalog()
    assert catalog.apply_document(doc()).acl is None


def test_newer_document_event_replaces_version_acl_tenant_and_deletion():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0, tenant="acme", acl=["group:staff"]))
    state = catalog.apply_document(doc(version="4", modified_at=200.0, tenant="globex", acl=["group:hr"],
                                       deleted=True))
    assert (state.version, state.modified_at, state.tenant, state.acl, state.deleted) == (
        "4", 200.0, "globex", ("group:hr",), True)
    assert state.history == {"3": 100.0, "4": 200.0}


def test_late_older_document_event_only_enters_the_history():
    catalog = Catalog()
    catalog.apply_document(doc(version="5", modified_at=200.0, acl=["group:hr"]))
    state = catalog.apply_document(doc(version="4", modified_at=100.0, acl=["*"], deleted=True))
    assert (state.version, state.modified_at, state.acl, state.deleted) == ("5", 200.0, ("group:hr",), False)
    assert state.history == {"5": 200.0, "4": 100.0}


def test_document_event_with_the_same_time_replaces_the_state():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0, acl=["group:staff"]))
    state = catalog.apply_document(doc(version="4", modified_at=100.0, acl=[]))  # a revocation to nobody
    assert state.acl == ()
    assert state.history == {"4": 100.0}


def test_version_history_keeps_only_the_newest_versions():
    catalog = Catalog()
    for i in range(MAX_VERSION_HISTORY + 4):
        catalog.apply_document(doc(version=f"v{i}", modified_at=float(i)))
    history = catalog.documents["leave"].history
    assert len(history) == MAX_VERSION_HISTORY
    assert set(history) == {f"v{i}" for i in range(4, MAX_VERSION_HISTORY + 4)}


def test_version_history_evicts_the_oldest_by_time_even_when_it_arrived_last():
    catalog = Catalog()
    for i in range(1, MAX_VERSION_HISTORY + 1):
        catalog.apply_document(doc(version=f"v{i}", modified_at=float(i)))
    catalog.apply_document(doc(version="v0", modified_at=0.0))  # a late, older change
    history = catalog.documents["leave"].history
    assert "v0" not in history
    assert len(history) == MAX_VERSION_HISTORY
    assert catalog.documents["leave"].version == f"v{MAX_VERSION_HISTORY}"


# --- is_outdated -----------------------------------------------------------------------------------


def test_is_outdated_is_none_for_an_unknown_document():
    assert Catalog().is_outdated("leave", "4") is None


def test_is_outdated_current_older_and_unseen_versions():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.is_outdated("leave", "4") is False
    assert catalog.is_outdated("leave", "3") is True
    assert catalog.is_outdated("leave", "2") is True  # never seen: the change feed is the authority


def test_is_outdated_after_out_of_order_events():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=200.0))
    catalog.apply_document(doc(version="3", modified_at=100.0))  # arrives late
    assert catalog.is_outdated("leave", "4") is False
    assert catalog.is_outdated("leave", "3") is True


# --- index events and lag --------------------------------------------------------------------------


def test_index_lag_is_indexed_at_minus_modified_at_of_that_version():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.apply_index(indexed(version="3", indexed_at=130.0)) == 30.0
    assert catalog.apply_index(indexed(version="4", indexed_at=290.5)) == 90.5


def test_index_lag_is_none_when_the_document_or_the_version_is_unknown():
    catalog = Catalog()
    assert catalog.apply_index(indexed(doc_id="nowhere", version="1", indexed_at=100.0)) is None
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.apply_index(indexed(version="9", indexed_at=300.0)) is None
    assert ("policies", "nowhere") in catalog.indexed  # still recorded


def test_an_index_event_sent_again_or_reindexing_the_held_version_is_no_new_lag():
    """Lag is a source change taken in: an indexer that re-sends its events (a retry, a replay, a
    periodic full report) or re-embeds the version the index holds observes none."""
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.apply_index(indexed(version="3", indexed_at=130.0)) == 30.0
    assert catalog.apply_index(indexed(version="3", indexed_at=130.0)) is None  # the same event again
    assert catalog.apply_index(indexed(version="3", indexed_at=180.0)) is None  # version 3 re-embedded
    assert catalog.apply_index(indexed(version="4", indexed_at=260.0)) == 60.0  # a new version: its lag
    assert catalog.apply_index(indexed(version="3", indexed_at=150.0)) is None  # older than what it holds
    assert catalog.apply_index(indexed(version="4", indexed_at=900.0, chunks=0)) is None  # a removal
    restarted = Catalog()  # the same catalog loaded from the store: a replay of the topic is no lag either
    restarted.load(list(catalog.documents.values()), list(catalog.indexed.values()))
    assert restarted.apply_index(indexed(version="4", indexed_at=900.0, chunks=0)) is None


def test_the_signals_get_the_lag_of_the_very_event_the_catalog_took_in():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=200.0))
    event, same = indexed(version="4", indexed_at=230.0), indexed(version="4", indexed_at=230.0)
    assert catalog.lag_taken_in(event) is None  # not applied yet
    catalog.apply_index(event)
    assert catalog.lag_taken_in(event) == 30.0
    catalog.apply_index(same)
    assert catalog.lag_taken_in(same) is None and catalog.lag_taken_in(event) is None


def test_index_lag_is_never_negative():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.apply_index(indexed(version="4", indexed_at=150.0)) == 0.0


def test_an_older_index_event_does_not_replace_a_newer_one():
    catalog = Catalog()
    catalog.apply_index(indexed(version="4", indexed_at=300.0, embedding_model="e5@2", chunks=14))
    catalog.apply_index(indexed(version="3", indexed_at=200.0, embedding_model="e5@1", chunks=9))
    assert catalog.indexed[("policies", "leave")] == IndexedState("policies", "leave", "4", 300.0, "e5@2", 14)


def test_index_entries_are_kept_per_index():
    catalog = Catalog()
    catalog.apply_index(indexed(index="policies", version="4"))
    catalog.apply_index(indexed(index="archive", version="2"))
    assert {key: entry.version for key, entry in catalog.indexed.items()} == {
        ("policies", "leave"): "4", ("archive", "leave"): "2"}


# --- health: index staleness -----------------------------------------------------------------------


def test_health_is_empty_for_an_empty_catalog():
    assert Catalog().health(NOW) == {}


def test_an_index_holding_the_newest_version_is_not_stale():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="4", indexed_at=150.0, embedding_model="e5@2"))
    assert catalog.health(NOW) == {"policies": IndexHealth(0, 0.0, 1)}


def test_staleness_runs_from_the_oldest_change_the_index_has_not_taken_in():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_index(indexed(version="3", indexed_at=110.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))
    catalog.apply_document(doc(version="5", modified_at=300.0))
    assert catalog.health(1000.0) == {"policies": IndexHealth(1, 900.0 - 100.0, 0)}


def test_staleness_with_out_of_order_document_events():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_index(indexed(version="3", indexed_at=110.0))
    catalog.apply_document(doc(version="5", modified_at=300.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))  # late: the oldest un-indexed change
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 800.0, 0)


def test_indexed_version_unknown_to_the_catalog_counts_changes_after_indexing():
    catalog = Catalog()
    catalog.apply_index(indexed(version="3", indexed_at=150.0))  # the feed never reported version 3
    catalog.apply_document(doc(version="4", modified_at=400.0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 600.0, 0)


def test_an_index_ahead_of_the_change_feed_is_not_stale():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="5", indexed_at=200.0))  # version 5 not yet in the change feed
    assert catalog.health(1000.0)["policies"] == IndexHealth(0, 0.0, 0)


def test_a_deleted_document_still_in_the_index_is_stale_since_the_deletion():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="4", indexed_at=150.0))
    catalog.apply_document(doc(version="4", modified_at=500.0, deleted=True))
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 500.0, 0)


def test_a_deletion_in_the_second_the_indexed_version_was_made_is_pending():
    # the index still holds the document's chunks, so it has not taken the deletion in, whichever
    # came first within that second; the passages are outdated too (the two agree)
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="4", indexed_at=150.0))
    catalog.apply_document(doc(version="4", modified_at=100.0, deleted=True))
    assert catalog.is_outdated("leave", "4", "policies") is True
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 900.0, 0)


def test_a_deleted_document_removed_from_the_index_is_not_stale():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="4", indexed_at=150.0, embedding_model="e5@2", chunks=14))
    catalog.apply_document(doc(version="4", modified_at=500.0, deleted=True))
    catalog.apply_index(indexed(version="4", indexed_at=600.0, embedding_model="e5@2", chunks=0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(0, 0.0, 0)  # removed: its model no longer counts


def test_a_deleted_document_is_stale_since_the_oldest_change_the_index_missed():
    # docs/signals.md: staleness = now - modified_at of the oldest un-indexed change. The index holds
    # version 3; version 4 (t=100) and then the deletion (t=200) never reached it.
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=50.0))
    catalog.apply_index(indexed(version="3", indexed_at=60.0))
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_document(doc(version="5", modified_at=200.0, deleted=True))
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 900.0, 0)


def test_a_document_recreated_after_its_removal_is_stale_until_indexed_again():
    # docs/signals.md: a document an index has indexed at least once is stale there when its newest
    # source version is not the version indexed there. After the removal (chunks: 0) the source
    # brings the document back as version 4; the index does not hold it.
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=50.0))
    catalog.apply_index(indexed(version="3", indexed_at=60.0))
    catalog.apply_document(doc(version="3", modified_at=100.0, deleted=True))
    catalog.apply_index(indexed(version="3", indexed_at=110.0, chunks=0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(0, 0.0, 0)
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 800.0, 0)


def test_a_change_stamped_in_the_second_of_a_removal_is_taken_as_before_it():
    # as for indexing, the tie goes to the index: sources and indexers often stamp whole seconds
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=50.0))
    catalog.apply_index(indexed(version="3", indexed_at=60.0))
    catalog.apply_document(doc(version="3", modified_at=100.0, deleted=True))
    catalog.apply_index(indexed(version="3", indexed_at=110.0, chunks=0))
    catalog.apply_document(doc(version="4", modified_at=110.0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(0, 0.0, 0)


def test_a_reindex_after_a_change_makes_the_index_current_again():
    catalog = Catalog()
    catalog.apply_document(doc(version="3", modified_at=100.0))
    catalog.apply_index(indexed(version="3", indexed_at=110.0))
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.health(1000.0)["policies"].stale_documents == 1
    catalog.apply_index(indexed(version="4", indexed_at=250.0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(0, 0.0, 0)


def test_staleness_is_clipped_at_zero_when_now_precedes_the_change():
    catalog = Catalog()
    catalog.apply_index(indexed(version="3", indexed_at=110.0))
    catalog.apply_document(doc(version="4", modified_at=2000.0))
    assert catalog.health(1000.0)["policies"] == IndexHealth(1, 0.0, 0)


def test_health_counts_stale_documents_and_keeps_the_largest_staleness_per_index():
    catalog = Catalog()
    for doc_id, made in (("a", 100.0), ("b", 300.0), ("c", 50.0)):
        catalog.apply_document(doc(doc_id=doc_id, version="1", modified_at=made - 10))
        catalog.apply_index(indexed(doc_id=doc_id, version="1", indexed_at=made - 5))
    catalog.apply_document(doc(doc_id="a", version="2", modified_at=100.0))
    catalog.apply_document(doc(doc_id="b", version="2", modified_at=300.0))
    catalog.apply_index(indexed(index="archive", doc_id="a", version="2", indexed_at=120.0))
    health = catalog.health(1000.0)
    assert health == {"policies": IndexHealth(2, 900.0, 0), "archive": IndexHealth(0, 0.0, 0)}
    assert health["policies"].stalest == ["a", "b"] and health["archive"].stalest == []  # oldest change first


def test_health_names_at_most_ten_stalest_documents_oldest_change_first():
    catalog = Catalog()
    for n in range(25):
        catalog.apply_document(doc(doc_id=f"d{n:02d}", version="1", modified_at=1.0))
        catalog.apply_index(indexed(doc_id=f"d{n:02d}", version="1", indexed_at=2.0))
        catalog.apply_document(doc(doc_id=f"d{n:02d}", version="2", modified_at=500.0 - n))
    health = catalog.health(1000.0)["policies"]
    assert health.stale_documents == 25 and health.stalest == [f"d{n:02d}" for n in range(24, 14, -1)]


def test_documents_unknown_to_the_catalog_are_never_stale_but_their_model_counts():
    catalog = Catalog()
    catalog.apply_index(indexed(doc_id="ghost", version="1", indexed_at=10.0, embedding_model="e5@1"))
    assert catalog.health(1000.0) == {"policies": IndexHealth(0, 0.0, 1)}


def test_embedding_models_are_counted_per_index_among_indexed_documents():
    catalog = Catalog()
    catalog.apply_index(indexed(doc_id="a", embedding_model="e5@1"))
    catalog.apply_index(indexed(doc_id="b", embedding_model="e5@2"))
    catalog.apply_index(indexed(doc_id="c", embedding_model="e5@2"))
    catalog.apply_index(indexed(doc_id="d"))  # model not reported
    catalog.apply_index(indexed(doc_id="e", embedding_model="old@0", chunks=0))  # removed
    catalog.apply_index(indexed(index="archive", doc_id="a", embedding_model="bge@1"))
    health = catalog.health(NOW)
    assert (health["policies"].embedding_models, health["archive"].embedding_models) == (2, 1)


def test_reindexing_with_a_new_model_replaces_the_old_model():
    catalog = Catalog()
    catalog.apply_index(indexed(indexed_at=100.0, embedding_model="e5@1"))
    catalog.apply_index(indexed(indexed_at=200.0, embedding_model="e5@2"))
    assert catalog.health(NOW)["policies"].embedding_models == 1


def test_load_replaces_the_contents():
    catalog = Catalog()
    catalog.apply_document(doc(doc_id="old"))
    catalog.apply_index(indexed(doc_id="old"))
    state = DocumentState("new", "acme", "2", 100.0, None, False, {"2": 100.0})
    entry = IndexedState("policies", "new", "1", 50.0, "e5@2", 3)
    catalog.load([state], [entry])
    assert catalog.documents == {"new": state}
    assert catalog.indexed == {("policies", "new"): entry}
    assert catalog.is_outdated("new", "1") is True


@given(st.permutations([("v1", 10.0), ("v2", 20.0), ("v3", 30.0), ("v4", 40.0)]))
def test_the_newest_version_wins_whatever_the_arrival_order(changes):
    catalog = Catalog()
    for version, made in changes:
        catalog.apply_document(doc(version=version, modified_at=made))
    state = catalog.documents["leave"]
    assert (state.version, state.modified_at) == ("v4", 40.0)
    assert state.history == {"v1": 10.0, "v2": 20.0, "v3": 30.0, "v4": 40.0}
    assert [catalog.is_outdated("leave", v) for v in ("v1", "v2", "v3", "v4")] == [True, True, True, False]



def test_a_deleted_documents_passages_are_outdated():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_document(doc(version="4", modified_at=200.0, deleted=True))
    assert catalog.is_outdated("leave", "4") is True


def test_an_index_ahead_of_the_change_feed_is_not_outdated():
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="5", indexed_at=300.0))  # v5 indexed before its document event
    assert catalog.is_outdated("leave", "5", "policies") is False
    assert catalog.is_outdated("leave", "5", "other-index") is True  # that index holds no v5
    assert catalog.is_outdated("leave", "5") is True
    catalog.apply_document(doc(version="6", modified_at=400.0))  # newer than the indexed v5
    assert catalog.is_outdated("leave", "5", "policies") is True


def test_an_index_that_embedded_a_version_in_the_second_of_the_newest_change_is_current():
    """The tie goes to the index: sources and indexers often stamp whole seconds, so a version
    indexed at the very time of the newest change the catalog knows is taken as that change's."""
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="5", indexed_at=100.0))
    assert catalog.is_outdated("leave", "5", "policies") is False
    behind = Catalog()
    behind.apply_document(doc(version="4", modified_at=100.0))
    behind.apply_index(indexed(version="5", indexed_at=99.999))  # a moment before the change: behind it
    assert behind.is_outdated("leave", "5", "policies") is True


events = st.lists(st.one_of(
    st.builds(lambda d, v, t, deleted: DocumentEvent(doc_id=d, version=v, modified_at=t, deleted=deleted),
              st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["1", "2", "3"]),
              st.floats(0, 1000), st.booleans()),
    st.builds(lambda i, d, v, t, model, chunks: IndexEvent(index=i, doc_id=d, version=v, indexed_at=t,
                                                           embedding_model=model, chunks=chunks),
              st.sampled_from(["policies", "archive"]), st.sampled_from(["a", "b", "c", "d", "e"]),
              st.sampled_from(["1", "2", "3"]), st.floats(0, 1000), st.sampled_from([None, "e5@1", "e5@2"]),
              st.sampled_from([None, 0, 3]))), max_size=40)


@given(events, st.floats(0, 2000))
@example([DocumentEvent(doc_id="a", version="2", modified_at=10.0),
          DocumentEvent(doc_id="b", version="2", modified_at=20.0),
          IndexEvent(index="policies", doc_id="a", version="1", indexed_at=5.0),
          IndexEvent(index="policies", doc_id="b", version="1", indexed_at=5.0)], 100.0)  # two stale in one index
def test_the_health_kept_up_to_date_equals_the_health_from_the_whole_catalog(sequence, now):
    catalog = Catalog()
    for event in sequence:
        catalog.apply(event)
    expected = health_from_scratch(catalog.documents, catalog.indexed.values(), now)
    got = catalog.health(now)
    assert got == expected
    assert {index: h.stalest for index, h in got.items()} == {index: h.stalest for index, h in expected.items()}
    reloaded = Catalog()  # as the store loads it at start-up
    reloaded.load(list(catalog.documents.values()), list(catalog.indexed.values()))
    assert reloaded.health(now) == expected


def test_a_full_catalog_refuses_a_new_index_entry_by_name_and_still_takes_the_entries_it_holds():
    catalog = Catalog(max_index_entries=1)
    catalog.apply_index(indexed(doc_id="leave", version="4", indexed_at=100.0))
    with pytest.raises(InvalidInput) as refused:
        catalog.apply_index(indexed(doc_id="travel", version="1", indexed_at=110.0))
    # the detail names the setting to raise, as the operator reads it in the dead-letter queue
    assert (refused.value.reason, refused.value.detail) == (
        Reason.CATALOG_FULL, "the catalog holds 1 index entries (catalog.max_index_entries)")
    catalog.apply_index(indexed(doc_id="leave", version="5", indexed_at=120.0))
    assert catalog.indexed_version("policies", "leave") == "5"


def test_a_full_catalog_refuses_a_new_document_by_name_and_still_takes_changes_to_those_it_holds():
    catalog = Catalog(max_documents=2)
    catalog.apply_document(doc(doc_id="leave", version="4", modified_at=100.0))
    catalog.apply_document(doc(doc_id="travel", version="1", modified_at=100.0))
    with pytest.raises(InvalidInput) as refused:
        catalog.apply_document(doc(doc_id="expenses", version="1", modified_at=110.0))
    assert (refused.value.reason, refused.value.detail) == (
        Reason.CATALOG_FULL, "the catalog holds 2 documents (catalog.max_documents)")
    catalog.apply_document(doc(doc_id="leave", version="5", modified_at=120.0))
    assert catalog.documents["leave"].version == "5" and "expenses" not in catalog.documents


def test_an_index_event_of_one_chunk_brings_its_lag():
    """Only ``chunks: 0`` is a removal; a document embedded as a single chunk is indexed."""
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=200.0))
    assert catalog.apply_index(indexed(version="4", indexed_at=245.0, chunks=1)) == 45.0


def test_a_model_still_held_by_another_document_stays_counted_when_one_document_moves_off_it():
    catalog = Catalog()
    catalog.apply_index(indexed(doc_id="a", indexed_at=100.0, embedding_model="e5@1"))
    catalog.apply_index(indexed(doc_id="b", indexed_at=100.0, embedding_model="e5@1"))
    catalog.apply_index(indexed(doc_id="a", indexed_at=200.0, embedding_model="e5@2"))
    assert catalog.health(NOW)["policies"].embedding_models == 2  # b still holds e5@1
    catalog.apply_index(indexed(doc_id="b", indexed_at=300.0, embedding_model="e5@2"))
    assert catalog.health(NOW)["policies"].embedding_models == 1


def test_a_version_made_in_the_second_of_the_current_one_is_not_taken_as_older():
    """Two versions stamped with the same time: which came first is unknown (sources stamp whole
    seconds), so neither is reported outdated nor an index holding either stale; a version made
    even a moment earlier is older."""
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_document(doc(version="5", modified_at=100.0))
    catalog.apply_document(doc(version="3", modified_at=99.5))  # late, and older
    catalog.apply_index(indexed(version="4", indexed_at=100.0))
    assert catalog.documents["leave"].version == "5"
    assert [catalog.is_outdated("leave", v) for v in ("3", "4", "5")] == [True, False, False]
    assert [catalog.is_outdated("leave", v, "policies") for v in ("3", "4", "5")] == [True, False, False]
    assert catalog.health(NOW)["policies"].stale_documents == 0
    assert health_from_scratch(catalog.documents, catalog.indexed.values(), NOW)["policies"].stale_documents == 0


def test_an_index_that_embedded_an_unannounced_version_in_the_second_of_the_newest_change_is_not_stale():
    """As :meth:`Catalog.is_outdated` judges it: the tie goes to the index."""
    catalog = Catalog()
    catalog.apply_document(doc(version="4", modified_at=100.0))
    catalog.apply_index(indexed(version="5", indexed_at=100.0))
    assert catalog.health(NOW)["policies"].stale_documents == 0
    behind = Catalog()
    behind.apply_document(doc(version="4", modified_at=100.0))
    behind.apply_index(indexed(version="5", indexed_at=99.5))
    assert behind.health(NOW)["policies"] == IndexHealth(1, NOW - 100.0, 0, ["leave"])


def test_a_passage_named_only_by_a_document_id_belongs_to_that_document():
    """OTel GenAI retrieval spans report document ids and scores, no ``doc_id`` field: a passage id
    the catalog knows as a document is that document; a ``doc_id`` given wins; else unknown."""
    catalog = Catalog()
    catalog.apply_document(doc(doc_id="leave", version="4", modified_at=100.0))
    assert catalog.document_of(Passage(id="leave", score=0.9)) == "leave"
    assert catalog.document_of(Passage(id="leave#3", score=0.9)) is None
    assert catalog.document_of(Passage(id="leave#3", doc_id="travel")) == "travel"
