"""What reached the model: duplicate slots, mixed embedding models, unsupported citations."""

from __future__ import annotations

from ragmon.monitor.core.model import Answer, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals.context import duplicate_slots, mixed_embeddings, unsupported_citations

NOW = 1_796_000_000.0


def p(pid: str, doc_id=None, doc_version=None, model=None) -> Passage:
    return Passage(pid, doc_id=doc_id, doc_version=doc_version, embedding_model=model)


def make_trace(answer=None, context=None, retrievals=()) -> TraceEvent:
    return TraceEvent(trace_id="t1", time=NOW, query="q", index=IndexRef("policies"), answer=answer,
                      context=context, retrievals=[Retrieval(name, list(ps)) for name, ps in retrievals])


# --- duplicate slots -------------------------------------------------------------------------------


def test_empty_context_has_no_duplicates():
    assert duplicate_slots([]) == (0, 0)


def test_distinct_passages_have_no_duplicates():
    context = [p("a#1", "a", "1"), p("a#2", "a", "1"), p("b#1", "b", "7"), p("c")]
    assert duplicate_slots(context) == (0, 0)


def test_three_copies_of_one_passage_are_two_duplicate_slots():
    assert duplicate_slots([p("a#1", "a", "1"), p("b#1"), p("a#1", "a", "1"), p("a#1", "a", "1")]) == (2, 0)


def test_another_version_of_a_present_document_is_a_doc_version_duplicate():
    assert duplicate_slots([p("a#1", "a", "1"), p("b#1", "b", "1"), p("a#1@2", "a", "2")]) == (0, 1)


def test_passage_duplicates_do_not_count_as_doc_version_duplicates():
    context = [p("a#1", "a", "1"), p("a#1", "a", "1"), p("a#1", "a", "1"), p("a#9", "a", "2")]
    assert duplicate_slots(context) == (2, 1)


def test_versions_of_different_documents_are_not_duplicates():
    assert duplicate_slots([p("a#1", "a", "1"), p("b#1", "b", "2")]) == (0, 0)


def test_passages_without_doc_id_or_version_are_not_version_duplicates():
    context = [p("a#1", "a", "1"), p("a#2", "a", None), p("x#1", None, "2"), p("a#3", "a", "1")]
    assert duplicate_slots(context) == (0, 0)


def test_a_repeated_id_counts_as_a_passage_duplicate_even_with_other_metadata():
    assert duplicate_slots([p("a#1", "a", "1"), p("a#1", "a", "2")]) == (1, 0)


# --- mixed embeddings ------------------------------------------------------------------------------


def test_one_embedding_model_is_not_mixed():
    assert mixed_embeddings([p("a", model="e5@2"), p("b", model="e5@2")]) is False


def test_two_embedding_models_are_mixed():
    assert mixed_embeddings([p("a", model="e5@2"), p("b"), p("c", model="e5@1")]) is True


def test_unknown_models_are_ignored():
    assert mixed_embeddings([p("a", model="e5@2"), p("b"), p("c", model="")]) is False
    assert mixed_embeddings([]) is False


# --- unsupported citations -------------------------------------------------------------------------


def test_no_answer_or_no_citations_means_no_unsupported_citations():
    assert unsupported_citations(make_trace(None, context=[p("a")])) == 0
    assert unsupported_citations(make_trace(Answer("x"), context=[])) == 0


def test_citations_among_the_context_are_supported():
    trace = make_trace(Answer("x", citations=["a", "b"]), context=[p("a"), p("b"), p("c")])
    assert unsupported_citations(trace) == 0


def test_unsupported_citations_are_counted_distinct():
    trace = make_trace(Answer("x", citations=["a", "zz", "zz", "yy", "a"]), context=[p("a")])
    assert unsupported_citations(trace) == 2


def test_citations_with_an_empty_context_are_all_unsupported():
    assert unsupported_citations(make_trace(Answer("x", citations=["a", "b"]), context=[])) == 2


def test_citations_are_checked_against_the_last_retrieval_list_when_context_is_absent():
    trace = make_trace(Answer("x", citations=["a", "b"]), retrievals=[("bm25", [p("a"), p("b")]), ("rerank", [p("a")])])
    assert unsupported_citations(trace) == 1


def test_citations_are_exact_ids():
    trace = make_trace(Answer("x", citations=["A", "a "]), context=[p("a")])
    assert unsupported_citations(trace) == 2
