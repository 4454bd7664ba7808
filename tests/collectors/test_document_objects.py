"""Documents listed as JSON objects in a span's output (collectors/dialects/document_objects.py), on
the spans mlflow-tracing 3.17 and langfuse 5.2 send (tests/collectors/dialect_spans) and the
variations of them an application's traced retriever function makes: what each document is read
as (id, score, text, passage fields) and what is named when the output or a document is odd."""

from __future__ import annotations

import json

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.span_mapping import SpanMapper
from tests.collectors.dialect_spans import Capture

MLFLOW, LANGFUSE = Capture("mlflow_3_17"), Capture("langfuse_5_2")
MLFLOW_QUERY_ENGINE, MLFLOW_TRACED_FUNCTIONS, LANGFUSE_OBSERVED_SEARCH = 1, 4, 3
MLFLOW_OUTPUTS, LANGFUSE_OUTPUT = "mlflow.spanOutputs", "langfuse.observation.output"
NO_OFFSET = "2026-11-21T10:00:00"  # a time without an offset: a metadata field of the wrong kind


def search(capture: Capture, n: int, name: str = "search"):
    """``(spans, the retriever span named name)`` of question ``n``."""
    _, spans = capture[n]
    return spans, next(s for s in spans if s.name == name)


def passages(spans) -> list[list[dict]]:
    return [r["passages"] for r in SpanMapper().map(spans).event["retrievals"]]


def test_an_applications_own_documents_keep_their_text_ids_and_scores():
    # @observe(as_type="retriever") returning {"id", "content", "score", "metadata"}
    reported, spans = LANGFUSE[LANGFUSE_OBSERVED_SEARCH]
    [listed] = passages(spans)
    assert [(p["id"], p["score"], p["text"]) for p in listed] == [
        (d["id"], d["score"], d["content"]) for d in reported["lists"][0]]
    # "text" for "content", and documents that carry no text at all (ids and scores only)
    spans, found = search(LANGFUSE, LANGFUSE_OBSERVED_SEARCH)
    found.attributes[LANGFUSE_OUTPUT] = json.dumps([{"id": "a#0", "text": "Alpha.", "score": 0.5},
                                                    {"id": "b#0", "score": 0.25}])
    assert passages(spans) == [[{"id": "a#0", "score": 0.5, "text": "Alpha."}, {"id": "b#0", "score": 0.25}]]


def test_a_retriever_function_returning_strings_lists_documents_of_text_alone():
    # @mlflow.trace(span_type="RETRIEVER") returning list[str]: MLflow writes the JSON array of them
    spans, found = search(MLFLOW, MLFLOW_TRACED_FUNCTIONS)
    found.attributes[MLFLOW_OUTPUTS] = json.dumps(["The office opens at nine.", "Payroll runs on the 25th."])
    reading = Dialects().read(found)
    assert [(d.id, d.score, d.content, d.fields) for d in reading.documents] == [
        (None, None, "The office opens at nine.", {}), (None, None, "Payroll runs on the 25th.", {})]
    assert reading.problems == []
    assert [[p["text"] for p in listed] for listed in passages(spans)] == [
        ["The office opens at nine.", "Payroll runs on the 25th."]]


def test_documents_given_under_a_documents_key_are_the_list():
    spans, found = search(LANGFUSE, LANGFUSE_OBSERVED_SEARCH)
    found.attributes[LANGFUSE_OUTPUT] = json.dumps({"documents": [{"id": "a#0", "content": "Alpha.", "score": 0.5}],
                                                    "count": 1})
    assert passages(spans) == [[{"id": "a#0", "score": 0.5, "text": "Alpha."}]]


def test_a_metadata_field_of_the_wrong_kind_is_named_by_the_document_that_carries_it():
    # a LangChain Document (the MLflow retriever's) and an application's object (Langfuse's)
    spans, found = search(MLFLOW, MLFLOW_TRACED_FUNCTIONS)
    documents = json.loads(found.attributes[MLFLOW_OUTPUTS])
    documents[1]["metadata"]["indexed_at"] = NO_OFFSET
    found.attributes[MLFLOW_OUTPUTS] = json.dumps(documents)
    reading = Dialects().read(found)
    assert reading.problems == [
        (MLFLOW_OUTPUTS, f"`{MLFLOW_OUTPUTS}[1].metadata`: `indexed_at` has a value of the wrong kind")]
    assert [d.content for d in reading.documents] == [d["page_content"] for d in documents]
    assert "indexed_at" not in reading.documents[1].fields and reading.documents[1].fields["doc_id"]
    spans, found = search(LANGFUSE, LANGFUSE_OBSERVED_SEARCH)
    found.attributes[LANGFUSE_OUTPUT] = json.dumps([{"id": "a#0", "content": "Alpha.", "score": "high",
                                                     "metadata": {"indexed_at": NO_OFFSET}}])
    assert Dialects().read(found).problems == [
        ("document.score", f"`{LANGFUSE_OUTPUT}[0].score` is not a finite number"),
        (LANGFUSE_OUTPUT, f"`{LANGFUSE_OUTPUT}[0].metadata`: `indexed_at` has a value of the wrong kind")]


def test_a_llamaindex_node_with_a_metadata_field_of_the_wrong_kind_is_named():
    # the MLflow reranker's NodeWithScore list
    _, spans = MLFLOW[MLFLOW_QUERY_ENGINE]
    rerank = next(s for s in spans if s.name == "KeywordOverlapRerank._postprocess_nodes")
    nodes = json.loads(rerank.attributes[MLFLOW_OUTPUTS])
    nodes[0]["node"]["metadata"]["indexed_at"] = NO_OFFSET
    rerank.attributes[MLFLOW_OUTPUTS] = json.dumps(nodes)
    reading = Dialects().read(rerank)
    assert reading.problems == [
        (MLFLOW_OUTPUTS, f"`{MLFLOW_OUTPUTS}[0].metadata`: `indexed_at` has a value of the wrong kind")]
    [kept] = reading.documents
    assert (kept.id, kept.score) == (nodes[0]["node"]["id_"], nodes[0]["score"]) and kept.fields["doc_id"]


def test_a_retriever_that_returned_nothing_recorded_is_no_problem():
    # MLflow writes a function's None as "null"; Langfuse writes a returned string as it is
    spans, found = search(MLFLOW, MLFLOW_TRACED_FUNCTIONS)
    found.attributes[MLFLOW_OUTPUTS] = "null"
    reading = Dialects().read(found)
    assert (reading.kind, reading.documents, reading.silent, reading.problems) == ("retriever", [], True, [])
    spans, found = search(LANGFUSE, LANGFUSE_OBSERVED_SEARCH)
    found.attributes[LANGFUSE_OUTPUT] = ""
    reading = Dialects().read(found)
    assert (reading.kind, reading.documents, reading.silent, reading.problems) == ("retriever", [], True, [])
