"""The mapping rules one at a time, on span shapes the instrumented frameworks produce (the
conformance suite in tests/clients/ runs the frameworks themselves)."""

from __future__ import annotations

import hashlib
import json

import pytest

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.otlp_wire import Span, SpanEvent
from ragmon.collectors.passage_ids import PassageNamer
from ragmon.collectors.semconv import CHECKED_ATTRIBUTES
from ragmon.collectors.span_mapping import SpanMapper

T = "a" * 32
MS = 1_000_000


def span(span_id: int, parent: int | None, name: str, start: int, end: int, **attributes) -> Span:
    return Span(T, f"{span_id:016x}", f"{parent:016x}" if parent is not None else "", name, start * MS, end * MS,
                {k.replace("__", "."): v for k, v in attributes.items()})


def docs(prefix: str, *documents: dict) -> dict:
    """OpenInference document attributes: ``docs("retrieval.documents", {"id": "a", "score": 1})``."""
    out = {}
    for i, document in enumerate(documents):
        for field, value in document.items():
            out[f"{prefix}.{i}.document.{field}"] = value
    return out


def retriever(span_id, parent, name, start, end, *documents, **attributes) -> Span:
    s = span(span_id, parent, name, start, end, openinference__span__kind="RETRIEVER", **attributes)
    s.attributes.update(docs("retrieval.documents", *documents))
    return s


def mapped(*spans, namer=None):
    return SpanMapper(namer).map(list(spans))


def context_of(event) -> list[dict]:
    """The context: as given, else the last list (absent when it is that list: not sent twice)."""
    if "context" in event:
        return event["context"]
    return event["retrievals"][-1]["passages"] if event["retrievals"] else []


def ids(event) -> list[list[str]]:
    return [[p["id"] for p in r["passages"]] for r in event["retrievals"]]


def test_an_empty_nested_level_is_not_a_list_of_its_own():
    # LlamaIndex: retrieve (documents) -> _retrieve (none)
    outer = retriever(1, None, "BM25Retriever.retrieve", 0, 10, {"id": "n1", "score": 2.0}, {"id": "n2", "score": 1.0},
                      input__value="q")
    inner = retriever(2, 1, "BM25Retriever._retrieve", 1, 9)
    event = mapped(outer, inner).event
    assert ids(event) == [["n1", "n2"]] and event["retrievals"][0]["retriever"] == "BM25Retriever"
    assert [p["id"] for p in context_of(event)] == ["n1", "n2"] and event["latency_ms"]["retrieve"] == 10


def test_levels_with_the_same_documents_merge_and_the_best_identified_wins():
    # DSPy: Retrieve.forward (content only) -> ColBERTv2.__call__ (ids, content, scores)
    outer = retriever(1, None, "Retrieve.forward", 0, 10, {"content": "alpha"}, {"content": "beta"})
    inner = retriever(2, 1, "ColBERTv2.__call__", 1, 9, {"id": 7, "content": "alpha", "score": 0.9},
                      {"id": 8, "content": "beta", "score": 0.5})
    result = mapped(outer, inner)
    assert ids(result.event) == [["7", "8"]] and result.event["retrievals"][0]["retriever"] == "ColBERTv2"
    assert [p["score"] for p in result.event["retrievals"][0]["passages"]] == [0.9, 0.5]
    assert not result.derived  # counted once, and by the ids the inner level had



def test_merged_levels_keep_the_best_identified_levels_values_and_take_the_others_where_it_has_none():
    def passages(outer_documents, inner_documents):
        outer = retriever(1, None, "Retrieve.forward", 0, 10, *outer_documents)
        inner = retriever(2, 1, "ColBERTv2.__call__", 1, 9, *inner_documents)
        return [r["passages"] for r in mapped(outer, inner).event["retrievals"]]

    # the inner level is the better identified (id and metadata)
    assert passages([{"id": 7, "content": "alpha", "score": 1.0}],
                    [{"id": 7, "score": 0.9, "metadata": '{"file_path": "a.md"}'}]) == [
        [{"id": "7", "score": 0.9, "text": "alpha", "doc_id": "a.md"}]]
    # the outer level is
    assert passages([{"id": 7, "score": 1.0, "metadata": '{"file_path": "a.md"}'},
                     {"id": 8, "metadata": '{"file_path": "b.md"}'}],
                    [{"id": 7, "content": "alpha", "score": 0.9}, {"id": 8, "score": 0.5}]) == [
        [{"id": "7", "score": 1.0, "text": "alpha", "doc_id": "a.md"}, {"id": "8", "score": 0.5, "doc_id": "b.md"}]]
    # fields the two disagree on (a wrapper that sets its own version): the better identified level's win
    assert passages([{"content": "alpha", "metadata": '{"doc_version": "3"}'}],
                    [{"id": 7, "content": "alpha", "metadata": '{"file_path": "a.md", "doc_version": "4"}'}]) == [
        [{"id": "7", "text": "alpha", "doc_version": "4", "doc_id": "a.md"}]]

def test_nested_levels_merge_only_when_every_document_agrees_on_what_both_tell():
    def lists(outer_documents, inner_documents):
        outer = retriever(1, None, "Rewriter.retrieve", 0, 10, *outer_documents)
        inner = retriever(2, 1, "Store.search", 1, 9, *inner_documents)
        return ids(mapped(outer, inner).event)

    # as many documents, other ones: the rewritten query's list and the store's are two lists
    assert lists([{"id": "a"}, {"id": "b"}], [{"id": "c"}, {"id": "d"}]) == [["c", "d"], ["a", "b"]]
    # the same text under two ids is two documents
    assert lists([{"id": "a", "content": "alpha"}], [{"id": "z", "content": "alpha"}]) == [["z"], ["a"]]
    # what only one side tells (here the content) does not keep them apart
    assert lists([{"id": "a", "content": "alpha"}], [{"id": "a"}]) == [["a"]]


def test_an_empty_wrapper_around_a_level_with_documents_gives_that_level():
    outer = retriever(1, None, "Wrapper.retrieve", 0, 10)
    inner = retriever(2, 1, "Store.search", 1, 9, {"id": "x"})
    assert ids(mapped(outer, inner).event) == [["x"]]


def test_a_fusion_retriever_and_its_sources_stay_three_lists_in_order_of_completion():
    fused = retriever(1, None, "EnsembleRetriever", 0, 30, {"id": "b"}, {"id": "a"}, {"id": "c"})
    keyword = retriever(2, 1, "BM25Retriever", 1, 10, {"id": "a"}, {"id": "b"})
    vector = retriever(3, 1, "VectorRetriever", 11, 20, {"id": "c"}, {"id": "b"})
    event = mapped(fused, keyword, vector).event
    assert ids(event) == [["a", "b"], ["c", "b"], ["b", "a", "c"]]
    assert [p["id"] for p in context_of(event)] == ["b", "a", "c"]



def test_a_source_after_an_empty_one_is_still_a_list_and_a_retrieval_that_found_nothing_is_named_innermost():
    fused = retriever(1, None, "EnsembleRetriever", 0, 30, {"id": "b"})
    empty = retriever(2, 1, "BM25Retriever", 1, 10)
    vector = retriever(3, 1, "VectorRetriever", 11, 20, {"id": "b"}, {"id": "c"})
    assert ids(mapped(fused, empty, vector).event) == [["b", "c"], ["b"]]
    # DSPy's Retrieve around ColBERTv2, neither finding anything: named by the inner one, as when they do
    outer = retriever(1, None, "Retrieve.forward", 0, 10)
    inner = retriever(2, 1, "ColBERTv2.__call__", 1, 9)
    assert mapped(outer, inner).event["retrievals"] == [{"retriever": "ColBERTv2", "passages": []}]

def test_a_retrieval_that_found_nothing_is_an_empty_list_and_an_empty_context():
    event = mapped(retriever(1, None, "BM25Retriever.retrieve", 0, 10)).event
    assert event["retrievals"] == [{"retriever": "BM25Retriever", "passages": []}] and context_of(event) == []


def test_the_reranker_output_is_the_context_and_a_list():
    root = span(1, None, "query", 0, 50, openinference__span__kind="CHAIN", input__value="q", output__value="a")
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "a"}, {"id": "b"})
    rerank = span(3, 1, "rerank", 11, 20, openinference__span__kind="RERANKER",
                  reranker__model_name="keyword-overlap", **{
                      k.replace(".", "__"): v for k, v in docs("reranker.output_documents", {"id": "b"}).items()})
    event = mapped(root, found, rerank).event
    assert ids(event) == [["a", "b"], ["b"]] and event["retrievals"][1]["retriever"] == "keyword-overlap"
    assert "context" not in event  # the last list: the decoder's default
    assert [p["id"] for p in context_of(event)] == ["b"] and event["answer"]["text"] == "a"


def test_every_bare_copy_of_a_passage_takes_the_fields_of_the_copy_that_has_them():
    # a retriever that names the document and its ACL, a second retriever and a reranker that report
    # the id and a score only (Haystack's rankers): each bare copy gets the document's fields
    root = span(1, None, "query", 0, 50, openinference__span__kind="CHAIN", input__value="q")
    named = retriever(2, 1, "retrieve", 1, 10, {"id": "b", "score": 0.3,
                                                "metadata": '{"doc_id": "handbook", "acl": ["group:hr"]}'})
    second = retriever(3, 1, "retrieve", 11, 15, {"id": "b", "score": 0.4})
    kept = docs("reranker.output_documents", {"id": "b", "score": 0.9})
    rerank = span(4, 1, "rerank", 16, 20, openinference__span__kind="RERANKER", reranker__model_name="ce",
                  **{k.replace(".", "__"): v for k, v in kept.items()})
    event = mapped(root, named, second, rerank).event
    assert [[(p["doc_id"], p["acl"], p["score"]) for p in r["passages"]] for r in event["retrievals"]] == [
        [("handbook", ["group:hr"], 0.3)], [("handbook", ["group:hr"], 0.4)], [("handbook", ["group:hr"], 0.9)]]


def test_an_explicit_context_wins_and_keeps_the_fields_its_passages_had_in_the_lists():
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids=["b", "zz"])
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "a"}, {"id": "b", "metadata": '{"acl": ["group:x"]}'})
    event = mapped(root, found).event
    assert context_of(event) == [{"id": "b", "acl": ["group:x"]}, {"id": "zz"}]


def test_an_explicit_context_takes_the_reranked_copy_of_a_passage_in_two_lists():
    """A passage the retriever found and the reranker kept: the context is what the model got after
    reranking, so its copy is the reranker's (score, fields), not the retriever's."""
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids=["b", "a"])
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "a", "score": 0.2},
                      {"id": "b", "score": 0.3, "metadata": '{"doc_version": "1", "acl": ["group:x"]}'})
    kept = docs("reranker.output_documents", {"id": "b", "score": 0.9, "metadata": '{"doc_version": "2"}'})
    rerank = span(3, 1, "rerank", 11, 20, openinference__span__kind="RERANKER", reranker__model_name="ce",
                  **{k.replace(".", "__"): v for k, v in kept.items()})
    event = mapped(root, found, rerank).event
    assert ids(event) == [["a", "b"], ["b"]]
    assert context_of(event) == [{"id": "b", "score": 0.9, "doc_version": "2"},
                                 {"id": "a", "score": 0.2}]


def test_passages_without_ids_are_named_by_metadata_then_content_and_counted():
    found = retriever(1, None, "BM25Retriever", 0, 10,
                      {"content": "five days", "metadata": '{"source": "h.pdf", "page": 3}'},
                      {"content": "payroll", "metadata": '{"doc_id": "pay", "span": [10, 40]}'},
                      {"content": "just text", "metadata": '{"source": "notes.md"}'},
                      {"metadata": '{"author": "someone"}'},  # nothing names it
                      {"content": "chunk", "metadata": '{"chunk_id": "c-9", "source": "x"}'})
    result = mapped(found)
    digest = hashlib.blake2b(b"just text", digest_size=16).hexdigest()
    assert ids(result.event) == [["h.pdf#3", "pay#10:40", f"sha:{digest}", "c-9"]]
    assert [p.get("doc_id") for p in result.event["retrievals"][0]["passages"]] == ["h.pdf", "pay", "notes.md", "x"]
    assert result.derived == {"metadata": 3, "content_hash": 1} and result.unmapped == 1


def test_the_key_orders_are_configurable():
    found = retriever(1, None, "r", 0, 10, {"content": "t", "metadata": '{"uuid": "u-1", "path": "/docs/a"}'})
    namer = PassageNamer(passage_id_keys=["uuid"], doc_id_keys=["path"])
    [[passage]] = [r["passages"] for r in mapped(found, namer=namer).event["retrievals"]]
    assert passage["id"] == "u-1" and passage["doc_id"] == "/docs/a"


def test_langchain_ids_are_read_from_the_span_output_when_the_documents_agree():
    output = ('{"documents": [{"id": "leave#0", "metadata": {}, "page_content": "five days", "type": "Document"},'
              ' {"id": null, "metadata": {}, "page_content": "other", "type": "Document"}]}')
    found = retriever(1, None, "BM25Retriever", 0, 10, {"content": "five days"}, {"content": "other"},
                      output__value=output, output__mime_type="application/json",
                      metadata='{"ls_retriever_name": "bm25"}')
    result = mapped(found)
    assert ids(result.event)[0][0] == "leave#0" and ids(result.event)[0][1].startswith("sha:")
    assert result.event["retrievals"][0]["retriever"] == "bm25"
    disagreeing = retriever(1, None, "BM25Retriever", 0, 10, {"content": "changed"}, {"content": "other"},
                            output__value=output, output__mime_type="application/json")
    assert ids(mapped(disagreeing).event)[0][0].startswith("sha:")


def test_genai_and_vector_store_results_are_lists():
    root = span(1, None, "answer", 0, 50, user__id="u-1")
    genai = span(2, 1, "retrieval kb", 1, 10, gen_ai__operation__name="retrieval", gen_ai__data_source__id="kb",
                 gen_ai__retrieval__query__text="reset password",
                 gen_ai__retrieval__documents=[{"id": "kb-1", "score": 0.7, "doc_version": "2"}, {"id": "kb-2"}])
    chroma = span(3, 1, "chroma.query", 11, 20, db__system="chroma")
    chroma.events = [SpanEvent("db.query.result", 0, {"db.query.result.id": "c-1", "db.query.result.distance": 0.1,
                                                      "db.query.result.document": "text",
                                                      "db.query.result.metadata": '{"acl": "group:a, group:b"}'})]
    event = mapped(root, genai, chroma).event
    assert event["index"]["name"] == "kb" and event["query"] == "reset password"
    assert event["retrievals"][0] == {"retriever": "retrieval kb", "passages": [
        {"id": "kb-1", "score": 0.7, "doc_version": "2"}, {"id": "kb-2"}]}
    assert event["retrievals"][1] == {"retriever": "chroma", "passages": [
        {"id": "c-1", "text": "text", "acl": ["group:a", "group:b"]}]}  # a distance is not a score


def test_the_caller_tenant_query_and_answer_from_where_frameworks_put_them():
    root = span(1, None, "Pipeline.run", 0, 50, openinference__span__kind="CHAIN", input__mime_type="application/json",
                input__value='{"data": {"retriever": {"query": "q"}}}', output__mime_type="application/json",
                output__value='{"llm": {"replies": ["x"]}}', ragmon__caller__groups=["staff"], enduser__id="u-7")
    root.resource = {"ragmon.tenant": "acme"}
    found = retriever(2, 1, "InMemoryBM25Retriever.run", 1, 10, {"id": "d"}, input__mime_type="application/json",
                      input__value='{"query": "how do I reset?", "top_k": null}')
    prompt = span(3, 1, "PromptBuilder.run", 11, 12, openinference__span__kind="LLM", output__value="the prompt")
    generator = span(4, 1, "Generator.run", 13, 20, openinference__span__kind="LLM",
                     llm__output_messages__0__message__content="Use the reset link.")
    event = mapped(root, found, prompt, generator).event
    assert (event["tenant"], event["query"], event["answer"]["text"]) == ("acme", "how do I reset?",
                                                                          "Use the reset link.")
    assert event["caller"] == {"id": "u-7", "groups": ["staff"]}
    dspy = span(1, None, "RAG.forward", 0, 50, openinference__span__kind="CHAIN", input__mime_type="application/json",
                input__value='{"question": "q?"}', output__mime_type="application/json",
                output__value='{"answer": "a."}')
    event = mapped(dspy, retriever(2, 1, "Retrieve.forward", 1, 5, {"id": "p"})).event
    assert (event["query"], event["answer"]["text"]) == ("q?", "a.")


def test_nested_generations_are_counted_once():
    root = span(1, None, "query", 0, 100, openinference__span__kind="CHAIN")
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "d"})
    predict = span(3, 1, "MockLLM.predict", 10, 60, openinference__span__kind="LLM", llm__token_count__prompt=100)
    complete = span(4, 3, "MockLLM.complete", 11, 59, openinference__span__kind="LLM", llm__token_count__prompt=100,
                    llm__token_count__completion=8)
    event = mapped(root, found, predict, complete).event
    assert event["usage"] == {"input_tokens": 100, "output_tokens": 8} and event["latency_ms"]["generate"] == 50


def test_a_span_set_without_retrieval_maps_to_nothing():
    ingest = span(1, None, "SentenceSplitter._parse_nodes", 0, 10, openinference__span__kind="CHAIN")
    assert mapped(ingest, span(2, 1, "split", 1, 2)).event is None


def test_a_parent_cycle_does_not_hang_the_mapping():
    a = retriever(1, 2, "a", 0, 10, {"id": "x"})
    b = retriever(2, 1, "b", 0, 10, {"id": "x"})
    assert mapped(a, b).event is not None



def test_levels_nest_through_spans_of_other_kinds_and_a_cycle_of_those_ends():
    outer = retriever(1, None, "Retrieve.forward", 0, 10, {"content": "alpha"})
    between = span(2, 1, "embed query", 1, 9)
    inner = retriever(3, 2, "ColBERTv2.__call__", 2, 8, {"id": 7, "content": "alpha"})
    assert ids(mapped(outer, between, inner).event) == [["7"]]
    x, y = span(4, 5, "x", 0, 10), span(5, 4, "y", 0, 10)
    assert ids(mapped(x, y, retriever(6, 4, "Store.search", 1, 9, {"id": "z"})).event) == [["z"]]

@pytest.mark.parametrize(("attributes", "expected"), [
    ({"metadata": "{not json"}, ["metadata"]),
    ({"retrieval.documents.0.document.metadata": "[1]"}, ["document.metadata"]),
    ({"retrieval.documents.0.document.metadata": '{"acl": 5, "span": "x"}'}, ["document.metadata"] * 2),
    ({"retrieval.documents.3.document.score": "high"}, ["document.score"]),
    ({"gen_ai.retrieval.documents": '{"id": 1}'}, ["gen_ai.retrieval.documents"]),
    ({"ragmon.context.document_ids": 5}, ["ragmon.context.document_ids"]),
    ({"ragmon.caller.groups": [1.5]}, ["ragmon.caller.groups"]),
    ({"retrieval.documents.0.document.metadata": '{"acl": ["group:a"]}', "metadata": "{}"}, []),
])
def test_attributes_ragmon_cannot_use_are_named(attributes, expected):
    kind = {} if "gen_ai.retrieval.documents" in attributes else {"openinference.span.kind": "RETRIEVER"}
    if not kind:
        kind = {"gen_ai.operation.name": "retrieval"}
    problems = Dialects().read(Span(T, "1" * 16, "", "s", 0, 1, {**kind, **attributes})).problems
    assert [attribute for attribute, _ in problems] == expected
    assert set(expected) <= set(CHECKED_ATTRIBUTES)  # a metric label: a closed set
    assert all(str(v) not in detail for (_, detail), v in zip(problems, attributes.values(), strict=False))


def test_a_vector_search_that_found_nothing_is_an_empty_list_and_rows_of_a_scalar_query_are_no_list():
    root = span(1, None, "rag", 0, 50, openinference__span__kind="CHAIN", input__value="q", output__value="a")
    empty = span(2, 1, "chroma.query", 1, 10, db__system="chroma", db__operation="query")
    event = mapped(root, empty).event
    assert event["retrievals"] == [{"retriever": "chroma", "passages": []}] and context_of(event) == []
    rows = span(2, 1, "milvus.query", 1, 10, db__system="milvus", db__operation="query")
    rows.events = [SpanEvent("db.query.result", 0, {"id": 3, "text": "a row"})]  # a filter query's rows
    assert mapped(root, rows).event is None


def test_milvus_search_results_with_their_output_fields_written_as_python_reprs():
    """opentelemetry-instrumentation-milvus 0.60: a ``db.search.result`` event per result, its output
    fields as ``str(dict)``, its distance a string (a cosine similarity, in Milvus's words a distance)."""
    root = span(1, None, "rag", 0, 50, openinference__span__kind="CHAIN", input__value="q", output__value="a")
    search = span(2, 1, "milvus.search", 1, 10, db__system="milvus", db__operation="search")
    search.events = [
        SpanEvent("db.search.result", 0, {"db.search.query.id": 0, "db.search.result.id": "pay#0",
                                          "db.search.result.distance": "0.99",
                                          "db.search.result.entity": "{'text': 'Pay day', 'doc_id': 'pay', "
                                                                     "'acl': ['group:hr'], 'doc_version': '3'}"}),
        SpanEvent("db.search.result", 0, {"db.search.query.id": 0, "db.search.result.id": 7,
                                          "db.search.result.entity": '{"text": "JSON too", "doc_id": "faq"}'}),
        SpanEvent("db.search.result", 0, {"db.search.query.id": 1, "db.search.result.id": "other-vector"})]
    read = Dialects().read(search)
    assert read.problems == [("db.search.result", "1 results of further query vectors of one search are left out: "
                              "only the first vector's results are its list")]
    event = mapped(root, search).event
    assert event["retrievals"] == [{"retriever": "milvus", "passages": [
        {"id": "pay#0", "doc_id": "pay", "doc_version": "3", "text": "Pay day", "acl": ["group:hr"]},
        {"id": "7", "doc_id": "faq", "text": "JSON too"}]}]
    empty = span(2, 1, "milvus.search", 1, 10, db__system="milvus", db__operation="search")
    assert mapped(root, empty).event["retrievals"] == [{"retriever": "milvus", "passages": []}]


@pytest.mark.parametrize("entity", ["__import__('os').system('true')", "{'a': open('/etc/passwd')}", "[1, 2]",
                                    "{" * 300, "{'text': '" + "x" * 70_000 + "'}"])
def test_a_milvus_entity_that_is_no_small_literal_dict_is_named_and_never_evaluated(entity):
    search = span(2, None, "milvus.search", 1, 10, db__system="milvus", db__operation="search")
    search.events = [SpanEvent("db.search.result", 0, {"db.search.result.id": "p", "db.search.result.entity": entity})]
    read = Dialects().read(search)
    assert [attribute for attribute, _ in read.problems] == ["db.search.result.entity"]
    assert mapped(search).event["retrievals"] == [{"retriever": "milvus", "passages": [{"id": "p"}]}]


def test_pinecone_query_results_with_their_metadata_written_as_python_reprs_and_no_score():
    """opentelemetry-instrumentation-pinecone 0.60: a ``pinecone.query`` span (``db.system`` Pinecone,
    no ``db.operation``) with a ``db.query.result`` event per match: its metadata as ``str(dict)``
    (``'None'`` without any), its score (a similarity, or for a euclidean index a distance)
    and its vector, which is never read."""
    root = span(1, None, "rag", 0, 50, openinference__span__kind="CHAIN", input__value="q", output__value="a")
    query = span(2, 1, "pinecone.query", 1, 10, db__system="Pinecone", pinecone__query__top_k=3)
    query.events = [
        SpanEvent("db.query.result", 0, {"db.query.result.id": "pay#0", "db.query.result.score": 0.91,
                                         "db.query.result.metadata": "{'text': 'Pay day', 'doc_id': 'pay', "
                                                                     "'acl': ['group:hr'], 'doc_version': '3'}",
                                         "db.query.result.vector": [0.25, 0.5]}),
        SpanEvent("db.query.result", 0, {"db.query.result.id": "bare", "db.query.result.score": 0.5,
                                         "db.query.result.metadata": "None"}),
        SpanEvent("db.query.result", 0, {"db.query.result.id": "odd", "db.query.result.metadata": "[1, 2]"})]
    read = Dialects().read(query)
    assert read.problems == [("db.query.result.metadata",
                              "`db.query.result.2.metadata` is not a dict of metadata fields")]
    event = mapped(root, query).event
    assert event["retrievals"] == [{"retriever": "pinecone", "passages": [
        {"id": "pay#0", "doc_id": "pay", "doc_version": "3", "text": "Pay day", "acl": ["group:hr"]},
        {"id": "bare"}, {"id": "odd"}]}]
    assert "0.25" not in json.dumps(event)  # the match's vector
    empty = span(2, 1, "pinecone.query", 1, 10, db__system="Pinecone")
    assert mapped(root, empty).event["retrievals"] == [{"retriever": "pinecone", "passages": []}]
    upsert = span(2, 1, "pinecone.upsert", 1, 10, db__system="Pinecone")
    assert mapped(root, upsert).event is None


def test_copies_of_a_passage_complete_each_others_fields():
    found = retriever(1, None, "retrieve", 0, 10, {"id": "d", "metadata": '{"doc_id": "pay", "acl": ["group:p"]}'})
    rank = span(2, None, "LostInTheMiddleRanker.run", 11, 20, openinference__span__kind="RERANKER",
                **{k.replace(".", "__"): v for k, v in docs("reranker.output_documents",
                                                            {"id": "d", "score": 0.4}).items()})
    event = mapped(found, rank).event
    assert context_of(event) == [{"id": "d", "score": 0.4, "doc_id": "pay", "acl": ["group:p"]}]


def test_a_prompt_builder_is_no_generation():
    found = retriever(1, None, "retrieve", 0, 10, {"id": "d"})
    prompt = span(2, None, "PromptBuilder.run", 11, 20, openinference__span__kind="LLM",
                  llm__prompt_template__template="{{documents}} {{question}}", output__value="the whole prompt")
    event = mapped(found, prompt).event
    assert "answer" not in event and "generate" not in event["latency_ms"]
    mock = span(2, None, "MockLLM.predict", 11, 20, openinference__span__kind="LLM", llm__model_name="unknown",
                llm__prompt_template__template="{context_str}", output__value="text text")
    assert mapped(found, mock).event["answer"]["text"] == "text text"


# --- the list the caller got, of nested retriever spans ----------------------------------------


def nodes(*scored: tuple[str, str, float]) -> str:
    """OpenLLMetry's LlamaIndex output: a JSON array of JSON-encoded NodeWithScore objects."""
    return json.dumps([json.dumps({"node": {"id_": i, "metadata": {"doc_id": i.split("#")[0]},
                                            "text_resource": {"text": text}}, "score": score})
                       for i, text, score in scored])


def llamaindex(span_id, parent, name, start, end, output, **arguments) -> Span:
    s = span(span_id, parent, name, start, end, traceloop__span__kind="task" if parent else "workflow",
             traceloop__entity__input=json.dumps(arguments), traceloop__entity__output=output)
    s.scope = "opentelemetry.instrumentation.llamaindex"
    return s


def test_the_outermost_level_decides_and_an_inner_level_of_the_same_retriever_only_lends():
    # a retriever that filters weak matches: retrieve -> _retrieve (filtered) -> _retrieve (the store's top k)
    query = {"query_str": "q"}
    outer = llamaindex(1, None, "ConfidentRetriever.workflow", 0, 30, "[]", str_or_query_bundle="q")
    middle = llamaindex(2, 1, "ConfidentRetriever.task", 1, 29, "[]", query_bundle=query)
    inner = llamaindex(3, 2, "ConfidentRetriever.task", 2, 28, nodes(("pay#0", "payroll", 0.2), ("x#0", "x", 0.0)),
                       query_bundle=query)
    event = mapped(outer, middle, inner).event
    assert ids(event) == [[]] and context_of(event) == []  # the caller got nothing: no context, no list of padding
    kept = llamaindex(1, None, "ConfidentRetriever.workflow", 0, 30, nodes(("pay#0", "payroll", 0.9)),
                      str_or_query_bundle="q")
    inner.parent_id = kept.span_id
    event = mapped(kept, inner).event
    assert ids(event) == [["pay#0"]] and event["retrievals"][0]["retriever"] == "ConfidentRetriever"
    assert event["query"] == "q" and event["retrievals"][0]["passages"][0]["score"] == 0.9


def test_an_inner_level_of_the_same_retriever_lends_to_the_documents_it_shares_and_to_no_other():
    # LlamaIndex: retrieve (what the caller got) -> _retrieve (the store's top k, more documents):
    # a shared document (by id, else by content) takes what it lacks and keeps what it has; one whose
    # id differs from its namesake by content, or that the inner level lacks, takes nothing; the
    # inner level's extra document is in no list
    outer = retriever(1, None, "BM25Retriever.retrieve", 0, 10, {"content": "payroll", "score": 0.9},
                      {"id": "bonus#0", "content": "bonus"}, {"id": "leave#0"}, {"id": "solo#0", "content": "solo"},
                      {"id": "rules#0", "content": "the rules as cited",
                       "metadata": '{"file_path": "rules-2026.md", "acl": ["group:staff"]}'})
    inner = retriever(2, 1, "BM25Retriever._retrieve", 1, 9,
                      {"id": "pay#0", "content": "payroll", "score": 0.4,
                       "metadata": '{"doc_id": "pay", "acl": ["group:payroll"]}'},
                      {"id": "leave#0", "content": "leave", "score": 0.7, "metadata": '{"file_path": "leave.md"}'},
                      {"id": "rules#0", "content": "rules", "score": 0.2,
                       "metadata": '{"file_path": "rules-2025.md", "acl": ["*"]}'},
                      {"id": "bonus#9", "content": "bonus", "score": 0.3, "metadata": '{"doc_id": "bonus"}'},
                      {"id": "extra#0", "content": "extra", "score": 0.1})
    event = mapped(outer, inner).event
    assert event["retrievals"] == [{"retriever": "BM25Retriever", "passages": [
        {"id": "pay#0", "score": 0.9, "text": "payroll", "doc_id": "pay", "acl": ["group:payroll"]},
        {"id": "bonus#0", "text": "bonus"},
        {"id": "leave#0", "score": 0.7, "text": "leave", "doc_id": "leave.md"},
        {"id": "solo#0", "text": "solo"},
        {"id": "rules#0", "score": 0.2, "text": "the rules as cited", "acl": ["group:staff"],
         "doc_id": "rules-2026.md"}]}]

def test_an_outer_level_that_says_it_found_nothing_is_an_empty_context_beside_its_sources():
    root = span(1, None, "answer", 0, 50, user__id="u")
    said = span(2, 1, "retrieval kb", 1, 40, gen_ai__operation__name="retrieval", gen_ai__retrieval__documents=[])
    store = span(3, 2, "chroma.query", 2, 30, db__system="chroma", db__operation="query")
    store.events = [SpanEvent("db.query.result", 0, {"db.query.result.id": "c-1"})]
    event = mapped(root, said, store).event
    assert ids(event) == [["c-1"], []] and context_of(event) == []
    silent = span(2, 1, "retrieval kb", 1, 40, gen_ai__operation__name="retrieval")  # says nothing: the store's list
    event = mapped(root, silent, store).event
    assert ids(event) == [["c-1"]] and [p["id"] for p in context_of(event)] == ["c-1"]
    # a coarse clock (Python's time.time_ns() ticks every 15.6 ms on older Windows): the two levels end
    # in the same tick, so the store's list sorts last, and the context is still the outer one's
    store.end_ns = said.end_ns
    event = mapped(root, said, store).event
    assert ids(event) == [[], ["c-1"]] and event["context"] == []


def test_the_root_is_the_span_whose_parent_is_not_in_the_trace():
    # a service called with a traceparent from one that sends its spans elsewhere: no span lacks a
    # parent id. Its top span and first child start in one tick of a coarse clock, and the child, ending
    # first, is exported first.
    top = span(1, 99, "query", 0, 50, openinference__span__kind="CHAIN", input__value="q", output__value="a")
    found = retriever(2, 1, "retrieve", 0, 10, {"id": "a"}, input__value="rewritten q")
    event = mapped(found, top).event
    assert (event["query"], event["answer"]["text"], event["latency_ms"]["total"]) == ("q", "a", 50.0)


def test_openllmetry_llamaindex_postprocessor_is_a_reranker_and_the_root_workflow_the_question_and_answer():
    root = llamaindex(1, None, "RetrieverQueryEngine.workflow", 0, 100,
                      json.dumps({"response": "Five days.", "metadata": {}}), str_or_query_bundle="vacation?")
    found = llamaindex(2, 1, "VectorIndexRetriever.task", 1, 20, nodes(("a#0", "a", 0.8), ("b#0", "b", 0.1)),
                       str_or_query_bundle={"query_str": "vacation?"})
    cut = llamaindex(3, 1, "SimilarityPostprocessor.task", 21, 30, nodes(("a#0", "a", 0.8)),
                     nodes=["..."], query_bundle={"query_str": "vacation?"})
    chat = span(4, 1, "MockLLM.task", 31, 90, gen_ai__output__messages=json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "inner text"}]}]))
    event = mapped(root, found, cut, chat).event
    assert ids(event) == [["a#0", "b#0"], ["a#0"]] and [p["id"] for p in context_of(event)] == ["a#0"]
    assert event["retrievals"][1]["retriever"] == "SimilarityPostprocessor"
    assert (event["query"], event["answer"]["text"]) == ("vacation?", "Five days.")
    assert event["retrievals"][0]["passages"][0] == {"id": "a#0", "score": 0.8, "text": "a", "doc_id": "a"}



def test_a_postprocessor_that_kept_nothing_is_an_empty_context():
    found = llamaindex(1, None, "VectorIndexRetriever.task", 1, 20, nodes(("a#0", "a", 0.8)),
                       str_or_query_bundle={"query_str": "vacation?"})
    cut = llamaindex(2, None, "SimilarityPostprocessor.task", 21, 30, "[]", nodes=["..."],
                     query_bundle={"query_str": "vacation?"})
    event = mapped(found, cut).event
    assert ids(event) == [["a#0"], []] and context_of(event) == []


def test_nested_rerankers_merged_are_still_the_context_before_a_later_search():
    def reranker(span_id, parent, name, start, end, *documents):
        return span(span_id, parent, name, start, end, openinference__span__kind="RERANKER",
                    **{k.replace(".", "__"): v for k, v in docs("reranker.output_documents", *documents).items()})

    found = retriever(1, None, "Store.search", 0, 10, {"id": "a"}, {"id": "b"})
    outer = reranker(2, None, "Rerank.run", 11, 20, {"id": "a"})
    inner = reranker(3, 2, "CohereRerank.postprocess", 12, 19, {"id": "a", "score": 0.9})
    later = retriever(4, None, "Web.search", 21, 30, {"id": "z"})
    event = mapped(found, outer, inner, later).event
    assert ids(event) == [["a", "b"], ["a"], ["z"]] and context_of(event) == [{"id": "a", "score": 0.9}]

def test_openllmetry_langchain_retriever_and_the_caller_in_association_properties():
    a = "traceloop__association__properties__"
    root = span(1, None, "RunnableSequence.workflow", 0, 100, traceloop__span__kind="workflow",
                traceloop__entity__input=json.dumps({"inputs": "how many days?"}),
                traceloop__entity__output=json.dumps({"outputs": "Five."}),
                **{f"{a}user_id": "u-1", f"{a}session_id": "s-1", f"{a}tenant": "acme", f"{a}groups": ["staff"]})
    found = span(2, 1, "vector_db_retrieve BM25Retriever", 1, 20, gen_ai__operation__name="vector_db_retrieve",
                 traceloop__span__kind="task", traceloop__entity__name="BM25Retriever",
                 traceloop__entity__input=json.dumps({"query": "how many days?"}),
                 traceloop__entity__output=json.dumps({"documents": [
                     {"page_content": "five days", "metadata": {"source": "leave.md", "page": 2}}], "count": 1}),
                 **{f"{a}ls_retriever_name": "bm25", f"{a}user_id": "u-1"})
    for s in (root, found):
        s.scope = "opentelemetry.instrumentation.langchain"
    event = mapped(root, found).event
    assert ids(event) == [["leave.md#2"]] and event["retrievals"][0]["retriever"] == "bm25"
    assert (event["query"], event["answer"]["text"], event["tenant"]) == ("how many days?", "Five.", "acme")
    assert event["caller"] == {"id": "u-1", "groups": ["staff"]} and event["conversation_id"] == "s-1"
    off = span(2, 1, "vector_db_retrieve BM25Retriever", 1, 20, gen_ai__operation__name="vector_db_retrieve")
    off.scope = "opentelemetry.instrumentation.langchain"
    assert mapped(root, off).event["retrievals"] == [{"retriever": "vector_db_retrieve BM25Retriever",
                                                      "passages": []}]  # no output (content tracing off)


def test_document_metadata_reads_acls_and_times_by_the_rules_of_native_events():
    """One rule for ACL strings and one reader for times (docs/events.md): what a native event
    accepts in a passage, a document's metadata gives the same, and what it refuses is named."""
    from datetime import datetime

    metadata = ('{"acl": "group:a, user:b", "indexed_at": "2026-11-21 10:00:00 +0100", '
                '"source_modified_at": 1795000000123}')
    found = Dialects().read(Span(T, "1" * 16, "", "s", 0, 1, {"openinference.span.kind": "RETRIEVER",
                                                              "retrieval.documents.0.document.id": "d",
                                                              "retrieval.documents.0.document.metadata": metadata}))
    fields = found.documents[0].fields
    assert fields["acl"] == ["group:a", "user:b"]
    assert fields["indexed_at"] == datetime.fromisoformat("2026-11-21T09:00:00+00:00").timestamp()  # git's %ci
    assert fields["source_modified_at"] == 1795000000.123  # milliseconds
    assert found.problems == []
    # a time without an offset (events.time_zone applies to native events only) and an ACL string
    # naming no principal are named and left out
    odd = '{"acl": " , ", "indexed_at": "2026-11-21T10:00:00"}'
    read = Dialects().read(Span(T, "1" * 16, "", "s", 0, 1, {"openinference.span.kind": "RETRIEVER",
                                                             "retrieval.documents.0.document.id": "d",
                                                             "retrieval.documents.0.document.metadata": odd}))
    assert read.documents[0].fields == {}
    assert [attribute for attribute, _ in read.problems] == ["document.metadata"] * 2


def test_json_text_of_the_context_ids_and_groups_is_read_once_as_the_span_arrives():
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids='["b", 7]', ragmon__caller__groups='["x"]',
                user__id="u")
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "a"}, {"id": "b"})
    dialects = Dialects()
    assert dialects.read(root).problems == []
    assert root.attributes["ragmon.context.document_ids"] == ["b", "7"]  # decoded in place: the mapper reads the list
    assert root.attributes["ragmon.caller.groups"] == ["x"]
    event = SpanMapper(dialects=dialects).map([root, found]).event
    assert [p["id"] for p in context_of(event)] == ["b", "7"] and event["caller"] == {"id": "u", "groups": ["x"]}


@pytest.mark.parametrize(("metadata", "read"), [
    ({"tenant": "t"}, lambda e: e["tenant"] == "t"),
    ({"groups": ["g"]}, lambda e: e.get("caller") == {"groups": ["g"]}),
    ({"index": "i"}, lambda e: e["index"] == {"name": "i"}),
    ({"index_name": "n"}, lambda e: e["index"] == {"name": "n"}),
    ({"index_version": 2}, lambda e: e["index"].get("version") == "2"),
    ({"abstained": True}, lambda e: e["answer"].get("abstained") is True),
    ({"citations": ["a"]}, lambda e: e["answer"]["citations"] == ["a"]),
    ({"turn": 3}, lambda e: e.get("turn") == 3),
])
def test_each_fact_of_a_metadata_object_is_read_when_it_is_the_only_one(metadata, read):
    found = retriever(2, None, "retrieve", 1, 10, {"id": "a"}, metadata=json.dumps({"retriever": "r", **metadata}))
    plain = retriever(2, None, "retrieve", 1, 10, {"id": "a"}, metadata='{"retriever": "r"}')
    llm = span(3, 2, "llm", 2, 3, openinference__span__kind="LLM", output__value="answered")
    assert read(mapped(found, llm).event) and not read(mapped(plain, llm).event)


def test_an_explicit_context_naming_the_last_list_is_that_list_and_not_sent_twice():
    # the application names what the model got: everything retrieved
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids=["a", "b"])
    event = mapped(root, retriever(2, 1, "retrieve", 1, 10, {"id": "a"}, {"id": "b", "score": 0.3})).event
    assert "context" not in event and context_of(event) == [{"id": "a"}, {"id": "b", "score": 0.3}]
    # or what the reranker kept, the last of two lists
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids=["b"])
    kept = docs("reranker.output_documents", {"id": "b", "score": 0.9})
    rerank = span(3, 1, "rerank", 11, 20, openinference__span__kind="RERANKER", reranker__model_name="ce",
                  **{k.replace(".", "__"): v for k, v in kept.items()})
    event = mapped(root, retriever(2, 1, "retrieve", 1, 10, {"id": "a"}, {"id": "b"}), rerank).event
    assert "context" not in event and context_of(event) == [{"id": "b", "score": 0.9}]


def test_an_explicit_empty_context_is_sent_though_a_list_was_retrieved():
    # the application answered without passages (all filtered out): the context is empty, not the list
    root = span(1, None, "answer", 0, 50, ragmon__context__document_ids=[])
    event = mapped(root, retriever(2, 1, "retrieve", 1, 10, {"id": "a"})).event
    assert event["context"] == [] and ids(event) == [["a"]]


def test_the_latency_of_each_stage_in_milliseconds_to_the_microsecond():
    def at(ms: float) -> int:
        return round(ms * MS)

    root = span(1, None, "query", 0, 0, openinference__span__kind="CHAIN", input__value="q")
    root.end_ns = at(95.1234567)
    found = retriever(2, 1, "retrieve", 0, 0, {"id": "a"}, {"id": "b"})
    found.start_ns, found.end_ns = at(1.5), at(13.7345678)
    kept = docs("reranker.output_documents", {"id": "b"})
    rerank = span(3, 1, "rerank", 0, 0, openinference__span__kind="RERANKER",
                  **{k.replace(".", "__"): v for k, v in kept.items()})
    rerank.start_ns, rerank.end_ns = at(14), at(21.0004)
    generate = span(4, 1, "OpenAI.complete", 0, 0, openinference__span__kind="LLM", output__value="x")
    generate.start_ns, generate.end_ns = at(22), at(94.9876543)
    event = mapped(root, found, rerank, generate).event
    assert event["latency_ms"] == {"retrieve": 12.235, "rerank": 7.0, "generate": 72.988, "total": 95.123}


def test_the_latency_of_a_stage_run_twice_is_the_sum_of_its_runs():
    # two retrievers one after the other (a multi-query chat), two rerankers likewise
    def ranker(span_id: int, start: int, end: int) -> Span:
        kept = docs("reranker.output_documents", {"id": "a"})
        return span(span_id, 1, "rerank", start, end, openinference__span__kind="RERANKER",
                    **{k.replace(".", "__"): v for k, v in kept.items()})

    root = span(1, None, "query", 0, 100, openinference__span__kind="CHAIN", input__value="q")
    first, second = retriever(2, 1, "retrieve", 1, 11, {"id": "a"}), retriever(3, 1, "retrieve", 12, 32, {"id": "b"})
    event = mapped(root, first, second, ranker(4, 33, 36), ranker(5, 37, 44)).event
    assert (event["latency_ms"]["retrieve"], event["latency_ms"]["rerank"]) == (30.0, 10.0)


def test_tokens_are_summed_over_calls_and_a_calls_nested_spans_count_their_largest_figure():
    root = span(1, None, "query", 0, 100, openinference__span__kind="CHAIN")
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "d"})
    # a first call: the outer span reports more prompt tokens than the inner (a template wrapper)
    predict = span(3, 1, "MockLLM.predict", 10, 40, openinference__span__kind="LLM", llm__token_count__prompt=120)
    complete = span(4, 3, "MockLLM.complete", 11, 39, openinference__span__kind="LLM", llm__token_count__prompt=100,
                    llm__token_count__completion=0)
    # a second call, its own: a model that returned nothing reports 0 completion tokens
    again = span(5, 1, "MockLLM.complete", 41, 60, openinference__span__kind="LLM", llm__token_count__prompt=80,
                 llm__token_count__completion=0)
    event = mapped(root, found, predict, complete, again).event
    assert event["usage"] == {"input_tokens": 200, "output_tokens": 0}


def test_a_generation_inside_another_through_a_span_of_another_kind_is_counted_once():
    # LlamaIndex: structured_predict (LLM) -> LLMTextCompletionProgram.__call__ (CHAIN) -> complete (LLM)
    root = span(1, None, "query", 0, 100, openinference__span__kind="CHAIN")
    found = retriever(2, 1, "retrieve", 1, 10, {"id": "d"})
    outer = span(3, 1, "OpenAI.structured_predict", 20, 80, openinference__span__kind="LLM", llm__model_name="gpt",
                 llm__token_count__prompt=50)
    program = span(4, 3, "LLMTextCompletionProgram.__call__", 21, 79, openinference__span__kind="CHAIN")
    inner = span(5, 4, "OpenAI.complete", 22, 78, openinference__span__kind="LLM", llm__model_name="gpt",
                 llm__token_count__prompt=50, llm__token_count__completion=9)
    event = mapped(root, found, outer, program, inner).event
    assert event["usage"] == {"input_tokens": 50, "output_tokens": 9} and event["latency_ms"]["generate"] == 60


def test_generations_whose_parents_form_a_cycle_are_mapped():
    # a sender's broken parent ids: two model calls each the other's parent; the walk up the
    # parents ends (MAX_DEPTH), and neither is outermost: two calls
    found = retriever(1, None, "retrieve", 0, 10, {"id": "d"})
    first = span(2, 3, "OpenAI.complete", 11, 20, openinference__span__kind="LLM", llm__token_count__prompt=5)
    second = span(3, 2, "OpenAI.complete", 21, 30, openinference__span__kind="LLM", llm__token_count__prompt=7)
    event = mapped(found, first, second).event
    assert ids(event) == [["d"]] and event["usage"] == {"input_tokens": 12}


def test_each_passage_without_fields_takes_those_of_its_other_copy():
    # Haystack: the retriever's documents carry their meta; the ranker's output ids, content and scores
    found = retriever(1, None, "InMemoryBM25Retriever.run", 0, 10, {"id": "a"},
                      {"id": "d", "metadata": '{"doc_id": "pay", "acl": ["group:p"]}'})
    rank = span(2, None, "LostInTheMiddleRanker.run", 11, 20, openinference__span__kind="RERANKER",
                **{k.replace(".", "__"): v for k, v in docs("reranker.output_documents",
                                                            {"id": "d", "score": 0.4}).items()})
    event = mapped(found, rank).event
    assert context_of(event) == [{"id": "d", "score": 0.4, "doc_id": "pay", "acl": ["group:p"]}]


def test_a_passages_own_doc_id_wins_over_the_configured_keys():
    found = retriever(1, None, "r", 0, 10, {"id": "p-1", "metadata": '{"doc_id": "pay", "path": "/docs/pay.md"}'},
                      {"id": "p-2", "metadata": '{"path": "/docs/leave.md"}'})
    event = mapped(found, namer=PassageNamer(doc_id_keys=["path"])).event
    assert [p["doc_id"] for p in event["retrievals"][0]["passages"]] == ["pay", "/docs/leave.md"]


def test_every_passage_nothing_names_is_counted():
    found = retriever(1, None, "r", 0, 10, {"metadata": '{"author": "a"}'}, {"id": "x"}, {"score": 0.2})
    result = mapped(found)
    assert ids(result.event) == [["x"]] and result.unmapped == 2


def test_the_tenant_index_and_query_when_the_trace_names_none():
    found = retriever(1, None, "retrieve", 0, 10, {"id": "a"})
    event = mapped(found).event
    assert (event["tenant"], event["index"], event["query"]) == ("default", {"name": "default"}, "")
    found = retriever(1, None, "retrieve", 0, 10, {"id": "a"})
    found.resource = {"service.name": "hr-assistant"}
    assert mapped(found).event["index"] == {"name": "hr-assistant"}  # the service, when nothing names the index


def test_a_feedback_span_is_a_feedback_event_at_the_spans_start():
    from ragmon.collectors.span_mapping import feedback_event

    feedback = span(1, None, "ragmon.feedback", 0, 0, ragmon__feedback__trace_id="f" * 32,
                    ragmon__feedback__kind="thumb", ragmon__feedback__value="down")
    feedback.start_ns = 1_764_806_400_123_456_789
    assert feedback_event(feedback) == {"type": "feedback", "trace_id": "f" * 32, "kind": "thumb",
                                        "time": 1_764_806_400_123_456_789 / 1e9, "value": "down"}
