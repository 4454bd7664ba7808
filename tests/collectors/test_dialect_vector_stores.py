"""The vector-store dialect (collectors/dialects/vector_stores.py) on the span events OpenLLMetry's
store instrumentations (0.60) write: Pinecone's ``db.query.embeddings`` event before its
``db.query.result`` events (query_handlers.py), Chroma's results with their metadata as JSON text
(chromadb/wrapper.py), Milvus's ``db.search.result`` events per query vector with the output
fields as ``str(dict)`` (milvus/wrapper.py); a score reported under the semantic conventions'
``db.query.result.score`` / ``db.search.result.score`` (opentelemetry-semantic-conventions-ai
``EventAttributes``) by a store other than Pinecone is kept."""

from __future__ import annotations

import json

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.dialects.vector_stores import MAX_ENTITY_CHARS
from ragmon.collectors.otlp_wire import Span, SpanEvent
from ragmon.collectors.span_mapping import SpanMapper

T = "d" * 32
MS = 1_000_000
NO_OFFSET = "2026-11-21T10:00:00"  # a time without an offset: a passage field of the wrong kind


def store_span(name: str, store: str, events: list[SpanEvent], **attributes) -> Span:
    return Span(T, "2" * 16, "1" * 16, name, 1 * MS, 10 * MS, {k.replace("__", "."): v for k, v in attributes.items()},
                events=events, scope=f"opentelemetry.instrumentation.{store}")


def root() -> Span:
    return Span(T, "1" * 16, "", "answer", 0, 50 * MS, {"user.id": "u"}, scope="rag-app")


def retrievals(*spans: Span) -> list[dict]:
    return SpanMapper().map([root(), *spans]).event["retrievals"]


def query_result(**attributes) -> SpanEvent:
    return SpanEvent("db.query.result", 0, {f"db.query.result.{k}": v for k, v in attributes.items()})


def search_result(query: int, **attributes) -> SpanEvent:
    return SpanEvent("db.search.result", 0, {"db.search.query.id": query,
                                             **{f"db.search.result.{k}": v for k, v in attributes.items()}})


def milvus_search(*events: SpanEvent) -> Span:
    return store_span("milvus.search", "milvus", list(events), db__system="milvus", db__operation="search")


def test_pinecone_results_after_the_query_embeddings_event_are_all_read():
    query = store_span("pinecone.query", "pinecone", [
        SpanEvent("db.query.embeddings", 0, {"db.query.embeddings.vector": [0.25, 0.5]}),
        query_result(id="pay#0", score=0.91, metadata="{'text': 'Pay day', 'doc_id': 'pay'}", vector=[0.25, 0.5]),
        query_result(id="leave#0", score=0.5, metadata="{'text': 'Leave', 'doc_id': 'leave'}", vector=[0.5, 0.25])],
        db__system="Pinecone", pinecone__query__top_k=2)
    assert retrievals(query) == [{"retriever": "pinecone", "passages": [
        {"id": "pay#0", "text": "Pay day", "doc_id": "pay"}, {"id": "leave#0", "text": "Leave", "doc_id": "leave"}]}]


def test_a_chroma_result_with_a_metadata_field_of_the_wrong_kind_is_named_and_a_reported_score_kept():
    query = store_span("chroma.query", "chromadb", [
        query_result(id="c-1", distance=0.1, document="Pay day", score=0.9,
                     metadata=json.dumps({"doc_id": "pay", "indexed_at": NO_OFFSET})),
        query_result(id="c-2", distance=0.4, document="Leave", score=float("nan"))],
        db__system="chroma", db__operation="query")
    reading = Dialects().read(query)
    assert reading.problems == [
        ("db.query.result.metadata", "`db.query.result.metadata`: `indexed_at` has a value of the wrong kind"),
        ("document.score", "`db.query.result.score` is not a finite number")]
    assert retrievals(query) == [{"retriever": "chroma", "passages": [
        {"id": "c-1", "score": 0.9, "text": "Pay day", "doc_id": "pay"}, {"id": "c-2", "text": "Leave"}]}]


def test_a_milvus_search_of_several_query_vectors_counts_the_results_it_leaves_out():
    search = milvus_search(
        search_result(0, id="pay#0", distance="0.99", score=0.99, entity="{'text': 'Pay day', 'doc_id': 'pay'}"),
        search_result(0, id="leave#0", distance="0.5", entity="{'text': 'Leave', 'indexed_at': '" + NO_OFFSET + "'}"),
        search_result(1, id="other#0", distance="0.9", entity="{'text': 'Other'}"),
        search_result(1, id="other#1", distance="0.8", entity="{'text': 'Other too'}"))
    reading = Dialects().read(search)
    assert reading.problems == [
        ("db.search.result.entity", "`db.search.result.1.metadata`: `indexed_at` has a value of the wrong kind"),
        ("db.search.result", "2 results of further query vectors of one search are left out: only the first "
                             "vector's results are its list")]
    assert retrievals(search) == [{"retriever": "milvus", "passages": [
        {"id": "pay#0", "score": 0.99, "text": "Pay day", "doc_id": "pay"}, {"id": "leave#0", "text": "Leave"}]}]


def test_a_milvus_entity_is_read_up_to_its_size_limit_and_one_beyond_or_no_dict_is_named():
    def entity_of(size: int) -> str:
        head = "{'text': '"
        return head + "x" * (size - len(head) - 2) + "'}"

    at_limit = entity_of(MAX_ENTITY_CHARS)
    assert len(at_limit) == MAX_ENTITY_CHARS
    reading = Dialects().read(milvus_search(search_result(0, id="p", entity=at_limit)))
    assert reading.problems == [] and len(reading.documents[0].content) == MAX_ENTITY_CHARS - 12
    reading = Dialects().read(milvus_search(search_result(0, id="p", entity=entity_of(MAX_ENTITY_CHARS + 1))))
    assert reading.problems == [("db.search.result.entity", "`db.search.result.0.entity` is not a dict of output "
                                                            f"fields of at most {MAX_ENTITY_CHARS} characters")]
    reading = Dialects().read(milvus_search(search_result(0, id="p", entity="['text']")))
    assert reading.problems == [("db.search.result.entity", "`db.search.result.0.entity` is not a dict of output "
                                                            "fields")]
    assert [d.id for d in reading.documents] == ["p"]
