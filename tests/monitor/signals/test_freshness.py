"""Stale passages served: the catalog's version first, else source_modified_at > indexed_at;
distinct passage ids per stage."""

from __future__ import annotations

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals.freshness import Freshness, is_stale, stale_as_of, stale_passages, staleness
from ragmon.monitor.core.signals.results import MAX_IDS, StaleFindings

NOW = 1_796_000_000.0
DAY = 86_400.0


def make_trace(retrievals=(), context=None) -> TraceEvent:
    return TraceEvent(trace_id="t1", time=NOW, query="q", index=IndexRef("policies"),
                      retrievals=[Retrieval(name, list(passages)) for name, passages in retrievals], context=context)


def catalog_with_versions(doc_id="leave", *versions: tuple[str, float]) -> Catalog:
    catalog = Catalog()
    for version, made in versions:
        catalog.apply_document(DocumentEvent(doc_id=doc_id, version=version, modified_at=made))
    return catalog


CATALOG = ("leave", ("2026-3", NOW - 10 * DAY), ("2026-4", NOW - 2 * DAY))


def test_passage_of_an_older_version_than_the_catalogs_is_stale():
    passage = Passage("leave#4", doc_id="leave", doc_version="2026-3")
    assert is_stale(passage, catalog_with_versions(*CATALOG)) is True


def test_passage_of_the_current_version_is_fresh():
    passage = Passage("leave#4", doc_id="leave", doc_version="2026-4")
    assert is_stale(passage, catalog_with_versions(*CATALOG)) is False


def test_catalog_verdict_wins_over_the_passage_timestamps():
    fresh_by_time = Passage("leave#4", doc_id="leave", doc_version="2026-3",
                            source_modified_at=NOW - 20 * DAY, indexed_at=NOW - 15 * DAY)
    stale_by_time = Passage("leave#4", doc_id="leave", doc_version="2026-4",
                            source_modified_at=NOW - DAY, indexed_at=NOW - 15 * DAY)
    catalog = catalog_with_versions(*CATALOG)
    assert (is_stale(fresh_by_time, catalog), is_stale(stale_by_time, catalog)) == (True, False)


def test_without_the_document_in_the_catalog_timestamps_decide():
    catalog = catalog_with_versions(*CATALOG)
    modified_after = Passage("memo#1", doc_id="memo", doc_version="1", source_modified_at=NOW - DAY,
                             indexed_at=NOW - 2 * DAY)
    indexed_after = Passage("memo#1", doc_id="memo", doc_version="1", source_modified_at=NOW - 2 * DAY,
                            indexed_at=NOW - DAY)
    same_time = Passage("memo#1", source_modified_at=NOW - DAY, indexed_at=NOW - DAY)
    assert [is_stale(x, catalog) for x in (modified_after, indexed_after, same_time)] == [True, False, False]


def test_without_doc_version_the_catalog_cannot_decide_and_timestamps_do():
    catalog = catalog_with_versions(*CATALOG)
    passage = Passage("leave#4", doc_id="leave", source_modified_at=NOW - DAY, indexed_at=NOW - 2 * DAY)
    assert is_stale(passage, catalog) is True
    assert is_stale(Passage("leave#4", doc_id="leave"), catalog) is False


def test_a_passage_naming_no_version_is_judged_by_the_version_its_index_embedded():
    catalog = catalog_with_versions(*CATALOG)
    catalog.apply_index(IndexEvent(index="policies", doc_id="leave", version="2026-3", indexed_at=NOW - 9 * DAY))
    passage = Passage("leave#4", doc_id="leave")  # spans that report only ids and scores
    assert is_stale(passage, catalog, "policies") is True
    assert is_stale(passage, catalog) is False  # no index: nothing says which version was served


def test_without_catalog_or_both_timestamps_a_passage_is_not_stale():
    catalog = Catalog()
    assert is_stale(Passage("a"), catalog) is False
    assert is_stale(Passage("a", source_modified_at=NOW), catalog) is False
    assert is_stale(Passage("a", indexed_at=NOW), catalog) is False
    assert is_stale(Passage("a", doc_id="leave", doc_version="1"), catalog) is False


def test_stale_after_out_of_order_catalog_events():
    catalog = catalog_with_versions("leave", ("2026-4", NOW - 2 * DAY), ("2026-3", NOW - 10 * DAY))
    assert is_stale(Passage("x", doc_id="leave", doc_version="2026-3"), catalog) is True
    assert is_stale(Passage("x", doc_id="leave", doc_version="2026-4"), catalog) is False


def test_empty_trace_has_no_stale_passages():
    assert stale_passages(make_trace(), Catalog()) == StaleFindings(0, 0, [])


def test_stale_passages_are_distinct_ids_per_stage_and_context_absent_is_the_last_list():
    catalog = catalog_with_versions(*CATALOG)
    old = Passage("leave#4", doc_id="leave", doc_version="2026-3")
    old_other_chunk = Passage("leave#5", doc_id="leave", doc_version="2026-3")
    by_time = Passage("memo#1", doc_id="memo", source_modified_at=NOW - DAY, indexed_at=NOW - 2 * DAY)
    fresh = Passage("leave#6", doc_id="leave", doc_version="2026-4")
    trace = make_trace([("bm25", [old, by_time, fresh]), ("vector", [old, old_other_chunk]), ("rerank", [old, old])])
    assert stale_passages(trace, catalog) == StaleFindings(3, 1, ["leave", "memo"])


def test_explicit_context_is_judged_on_its_own():
    catalog = catalog_with_versions(*CATALOG)
    trace = make_trace([("vector", [Passage("leave#4", doc_id="leave", doc_version="2026-4")])],
                       context=[Passage("leave#9", doc_id="leave", doc_version="2026-3"),
                                Passage("leave#9", doc_id="leave", doc_version="2026-3")])
    assert stale_passages(trace, catalog) == StaleFindings(0, 1, ["leave"])


def test_empty_context_has_no_stale_context_passages():
    catalog = catalog_with_versions(*CATALOG)
    trace = make_trace([("vector", [Passage("leave#4", doc_id="leave", doc_version="2026-3")])], context=[])
    assert stale_passages(trace, catalog) == StaleFindings(1, 0, ["leave"])


def test_stale_doc_ids_are_bounded():
    passages = [Passage(f"d{i}#1", doc_id=f"d{i}", source_modified_at=2.0, indexed_at=1.0) for i in range(MAX_IDS + 3)]
    findings = stale_passages(make_trace([("vector", passages)]), Catalog())
    assert (findings.candidates, findings.context) == (MAX_IDS + 3, MAX_IDS + 3)
    assert findings.doc_ids == [f"d{i}" for i in range(MAX_IDS)]


def test_staleness_shown_only_by_the_context_copy_is_counted_at_both_stages():
    trace = TraceEvent(
        trace_id="t", time=1.0, query="q", index=IndexRef("policies"),
        retrievals=[Retrieval("vector", [Passage("p1", score=0.9)])],
        context=[Passage("p1", doc_id="d9", source_modified_at=10.0, indexed_at=5.0)],
    )
    found = stale_passages(trace, Catalog())
    assert (found.candidates, found.context, found.doc_ids) == (1, 1, ["d9"])


def test_every_passage_is_judged_for_freshness_or_counted_not_judged_with_its_reason():
    from ragmon.monitor.core.model import IndexEvent

    catalog = catalog_with_versions(*CATALOG)
    catalog.apply_document(DocumentEvent(doc_id="memo", version="1", modified_at=NOW - DAY))  # no index event
    catalog.apply_document(DocumentEvent(doc_id="gone", version="1", modified_at=NOW - DAY, deleted=True))
    catalog.apply_document(DocumentEvent(doc_id="faq", version="2", modified_at=NOW - DAY))
    catalog.apply_index(IndexEvent(index="policies", doc_id="faq", version="2", indexed_at=NOW - DAY))
    passages = [
        Passage("named", doc_id="leave", doc_version="2026-3"),  # the catalog decides: stale
        Passage("by-index", doc_id="faq"),  # no version, but its index reported one: judged
        Passage("deleted", doc_id="gone"),  # no version, but the document is gone: stale whatever it was
        Passage("no-version", doc_id="memo"),  # known document, no version anywhere
        Passage("timed", doc_id="elsewhere", indexed_at=NOW - DAY, source_modified_at=NOW - 2 * DAY),
        Passage("half-timed", doc_id="elsewhere", indexed_at=NOW - DAY),  # one time is no evidence
        Passage("bare"),
    ]
    found = stale_passages(make_trace([("vector", passages)]), catalog)
    assert (found.candidates, found.context) == (2, 2)
    assert found.flagged == {"named", "deleted"}  # what a trace judged again after a catalog change is compared with
    coverage = found.coverage
    assert coverage.judged == {"candidates": 4, "context": 4}
    assert coverage.unjudged == {("candidates", "no_version"): 1, ("candidates", "unknown_document"): 2,
                                 ("context", "no_version"): 1, ("context", "unknown_document"): 2}
    assert coverage.examples == [("no-version", "memo", "no_version"), ("half-timed", "elsewhere", "unknown_document"),
                                 ("bare", None, "unknown_document")]


# --- judged again after the catalog changed: stale as of the trace's time ---------------------------


def test_a_version_is_stale_as_of_a_time_only_by_the_versions_made_by_then():
    catalog = catalog_with_versions("leave", ("1", NOW - 10 * DAY), ("2", NOW - 5 * DAY), ("3", NOW + DAY))
    assert stale_as_of(catalog, "leave", "1", "policies", NOW) == (Freshness.OUTDATED, "1", "2")
    assert stale_as_of(catalog, "leave", "2", "policies", NOW) is None  # current then; 3 came after
    assert stale_as_of(catalog, "leave", "1", "policies", NOW - 5 * DAY) == (Freshness.OUTDATED, "1", "2")
    assert stale_as_of(catalog, "leave", "1", "policies", NOW - 6 * DAY) is None
    assert stale_as_of(catalog, "leave", "3", "policies", NOW) is None  # not made yet at that time
    assert stale_as_of(catalog, "leave", "3", "policies", NOW + DAY) is None
    assert stale_as_of(catalog, "leave", "never-announced", "policies", NOW) is None
    assert stale_as_of(catalog, "other-doc", "1", "policies", NOW) is None


def test_a_deleted_document_was_stale_from_its_deletion_on():
    catalog = catalog_with_versions("leave", ("1", NOW - 10 * DAY))
    catalog.apply_document(DocumentEvent(doc_id="leave", version="1", modified_at=NOW - DAY, deleted=True))
    assert stale_as_of(catalog, "leave", "1", "policies", NOW - DAY) == (Freshness.DELETED, "1", None)
    assert stale_as_of(catalog, "leave", "1", "policies", NOW - 2 * DAY) is None  # current before it


def test_a_passage_naming_no_version_is_judged_by_what_its_index_held_by_then():
    catalog = catalog_with_versions("leave", ("1", NOW - 10 * DAY), ("2", NOW - 5 * DAY))
    catalog.apply_index(IndexEvent(index="policies", doc_id="leave", version="1", indexed_at=NOW - 9 * DAY))
    assert stale_as_of(catalog, "leave", None, "policies", NOW) == (Freshness.OUTDATED, "1", "2")
    assert stale_as_of(catalog, "leave", None, "policies", NOW - 9 * DAY) is None  # indexed then, and current
    assert stale_as_of(catalog, "leave", None, "policies", NOW - 9.5 * DAY) is None  # not indexed yet
    assert stale_as_of(catalog, "leave", None, "elsewhere", NOW) is None  # that index reported nothing
    catalog.apply_index(IndexEvent(index="archive", doc_id="leave", version="1", indexed_at=NOW - 5 * DAY))
    assert stale_as_of(catalog, "leave", None, "archive", NOW - 5 * DAY) == (Freshness.OUTDATED, "1", "2")


def test_a_version_the_trace_index_holds_ahead_of_the_change_feed_is_not_stale():
    catalog = catalog_with_versions(*CATALOG)
    catalog.apply_index(IndexEvent(index="policies", doc_id="leave", version="2026-5", indexed_at=NOW - DAY))
    ahead = Passage("leave#4", doc_id="leave", doc_version="2026-5")  # indexed after the newest change known
    assert stale_passages(make_trace([("vector", [ahead])]), catalog).candidates == 0
    assert is_stale(ahead, catalog) is True  # no index to vouch for it: a version not announced is older


def test_what_decided_a_served_version_is_named_outdated_deleted_or_current():
    catalog = catalog_with_versions(*CATALOG)
    old = Passage("a", doc_id="leave", doc_version="2026-3")
    current = Passage("b", doc_id="leave", doc_version="2026-4")
    assert staleness(old, catalog) == (Freshness.OUTDATED, "2026-3")
    assert staleness(current, catalog) == (Freshness.CURRENT, "2026-4")
    catalog.apply_document(DocumentEvent(doc_id="leave", version="2026-4", modified_at=NOW - DAY, deleted=True))
    assert staleness(old, catalog) == (Freshness.DELETED, "2026-3")
    assert staleness(current, catalog) == (Freshness.DELETED, "2026-4")


def test_a_source_changed_in_the_second_it_was_indexed_is_not_stale_without_the_catalog():
    tie = Passage("p", doc_id="elsewhere", indexed_at=NOW - DAY, source_modified_at=NOW - DAY)
    found = stale_passages(make_trace([("vector", [tie])]), Catalog())
    assert (found.candidates, found.coverage.judged) == (0, {"candidates": 1, "context": 1})
    assert is_stale(tie, Catalog()) is False
