"""The OpenLLMetry dialect on the spans opentelemetry-instrumentation-langchain and -llamaindex (0.6x)
write: what a LangChain retriever's and a LlamaIndex retriever's or postprocessor's output is read as
(passages, texts, scores, the problems named), the question and answer of a root workflow, the
generations, and what an unread trace lacked. The shapes are the instrumentations' own: LangChain's
``{"documents": [{page_content, metadata}], "count"}`` (callback_handler.on_retriever_end), LlamaIndex's
``json.dumps(output, cls=JSONEncoder)`` of a list of ``NodeWithScore`` (each ``to_json()`` text)."""

from __future__ import annotations

import json

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.span_mapping import SpanMapper

T = "c" * 32
MS = 1_000_000
LANGCHAIN, LLAMAINDEX = "opentelemetry.instrumentation.langchain", "opentelemetry.instrumentation.llamaindex"
OUTPUT = "traceloop.entity.output"
# a time without an offset: a field of the wrong kind in a document's metadata, named and left out
NO_OFFSET = "2026-11-21T10:00:00"


def span(span_id: int, parent: int | None, name: str, start: int, end: int, scope: str, **attributes) -> Span:
    return Span(T, f"{span_id:016x}", f"{parent:016x}" if parent is not None else "", name, start * MS, end * MS,
                {k.replace("__", "."): v for k, v in attributes.items()}, scope=scope)


def passages(event) -> list[list[dict]]:
    return [r["passages"] for r in event["retrievals"]]


# --- LangChain ---------------------------------------------------------------------------------


def langchain_retriever(output: str | None = None, **attributes) -> Span:
    """A ``vector_db_retrieve`` span as on_retriever_start/end make it (no ``ls_retriever_name``
    association property: a retriever invoked without LangChain's run metadata)."""
    if output is not None:
        attributes.update({OUTPUT.replace(".", "__"): output, "gen_ai__task__output": output})
    return span(2, 1, "vector_db_retrieve BM25Retriever", 10, 30, LANGCHAIN,
                gen_ai__operation__name="vector_db_retrieve", traceloop__span__kind="task",
                traceloop__entity__name="BM25Retriever",
                traceloop__entity__input=json.dumps({"query": "how many days?"}), **attributes)


def lcel_root(**attributes) -> Span:
    """The root ``RunnableSequence.workflow`` of an LCEL chain invoked with a dict and returning one
    (``{"inputs": ..., "tags", "metadata", "kwargs"}``, ``{"outputs": ..., "kwargs"}``)."""
    return span(1, None, "RunnableSequence.workflow", 0, 100, LANGCHAIN, traceloop__span__kind="workflow",
                traceloop__entity__name="RunnableSequence", **attributes)


LEAVE = {"documents": [{"page_content": "Five days of leave a year.", "metadata": {"source": "leave.md", "page": 2}},
                       {"page_content": "Carry over up to five days.",
                        "metadata": {"source": "carry.md", "page": 0, "indexed_at": NO_OFFSET}}], "count": 2}


def test_a_langchain_retriever_lists_each_documents_text_and_names_a_metadata_field_of_the_wrong_kind():
    found = langchain_retriever(json.dumps(LEAVE))
    reading = Dialects().read(found)
    assert reading.kind == "retriever" and reading.problems == [
        (OUTPUT, f"`{OUTPUT}.documents[1].metadata`: `indexed_at` has a value of the wrong kind")]
    event = SpanMapper().map([lcel_root(), found]).event
    # named by its entity name without LangChain's ls_retriever_name; no ids: named from the metadata
    assert [r["retriever"] for r in event["retrievals"]] == ["BM25Retriever"]
    assert passages(event) == [[{"id": "leave.md#2", "text": "Five days of leave a year.", "doc_id": "leave.md"},
                                {"id": "carry.md#0", "text": "Carry over up to five days.", "doc_id": "carry.md"}]]
    assert event["latency_ms"]["retrieve"] == 20.0  # the retriever's time is the retrieval stage's


def test_a_langchain_retriever_output_under_the_genai_task_name_alone_is_read():
    # the instrumentation writes the output twice, gen_ai.task.output being the newer name
    found = langchain_retriever(**{"gen_ai__task__output": json.dumps(LEAVE)})
    event = SpanMapper().map([lcel_root(), found]).event
    assert [[p["id"] for p in r] for r in passages(event)] == [["leave.md#2", "carry.md#0"]]


def test_a_langchain_retriever_output_cut_short_is_named_and_lists_nothing():
    # an attribute length limit (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) cuts the JSON text
    found = langchain_retriever(json.dumps(LEAVE)[:40])
    reading = Dialects().read(found)
    assert (reading.kind, reading.documents, reading.silent) == ("retriever", [], True)
    assert reading.problems == [(OUTPUT, f"`{OUTPUT}` of a retriever lists no documents")]


def test_an_lcel_chain_invoked_with_a_dict_gives_the_question_and_answer_from_within_it():
    root = lcel_root(traceloop__entity__input=json.dumps({"inputs": {"question": "how many days?"}, "tags": [],
                                                          "metadata": {}, "kwargs": {"name": "RunnableSequence"}}),
                     traceloop__entity__output=json.dumps({"outputs": {"answer": "Five.", "context": "..."},
                                                           "kwargs": {"tags": []}}))
    event = SpanMapper().map([root, langchain_retriever(json.dumps(LEAVE))]).event
    assert (event["query"], event["answer"]["text"]) == ("how many days?", "Five.")


# --- LlamaIndex --------------------------------------------------------------------------------


def node_with_score(node_id: str, text: str, score: float, **metadata) -> str:
    """``NodeWithScore(node=TextNode(...), score=...).to_json()`` (llama-index-core 0.14): Python's
    json, which writes ``NaN`` for a score no store could compute."""
    return json.dumps({"node": {"id_": node_id, "embedding": None, "metadata": metadata,
                                "excluded_embed_metadata_keys": [], "excluded_llm_metadata_keys": [],
                                "relationships": {}, "metadata_template": "{key}: {value}", "metadata_separator": "\n",
                                "text": text, "mimetype": "text/plain", "start_char_idx": None, "end_char_idx": None,
                                "text_template": "{metadata_str}\n\n{content}", "class_name": "TextNode"},
                       "score": score, "class_name": "NodeWithScore"})


def llamaindex(span_id, parent, name, start, end, output: str | None, **arguments) -> Span:
    attributes = {"traceloop__span__kind": "task" if parent else "workflow",
                  "traceloop__entity__input": json.dumps(arguments)}
    if output is not None:
        attributes["traceloop__entity__output"] = output
    return span(span_id, parent, name, start, end, LLAMAINDEX, **attributes)


def test_llamaindex_text_nodes_keep_their_text_and_a_score_no_store_could_compute_is_named():
    output = json.dumps([node_with_score("pay#0", "Payroll runs on the 25th.", 1.5, doc_id="pay"),
                         node_with_score("office#0", "The office opens at nine.", float("nan"), doc_id="office")])
    found = llamaindex(2, 1, "VectorIndexRetriever.task", 1, 20, output, query_bundle={"query_str": "payroll?"})
    reading = Dialects().read(found)
    assert reading.problems == [("document.score", f"`{OUTPUT}[1].node.score` is not a finite number")]
    assert [(d.id, d.score, d.content) for d in reading.documents] == [
        ("pay#0", 1.5, "Payroll runs on the 25th."), ("office#0", None, "The office opens at nine.")]


def test_a_postprocessors_nodes_with_a_metadata_field_of_the_wrong_kind_are_named():
    output = json.dumps([node_with_score("pay#0", "Payroll.", 0.9, doc_id="pay", indexed_at=NO_OFFSET)])
    cut = llamaindex(3, 1, "SimilarityPostprocessor.task", 21, 30, output, nodes=["..."],
                     query_bundle={"query_str": "payroll?"})
    reading = Dialects().read(cut)
    assert reading.kind == "reranker"
    assert reading.problems == [(OUTPUT, f"`{OUTPUT}[0].node.metadata`: `indexed_at` has a value of the wrong kind")]


def test_a_llamaindex_output_cut_short_is_named_and_lists_nothing():
    output = json.dumps([node_with_score("pay#0", "Payroll.", 0.9, doc_id="pay")])[:60]
    found = llamaindex(2, 1, "VectorIndexRetriever.task", 1, 20, output, query_bundle={"query_str": "q"})
    reading = Dialects().read(found)
    assert (reading.kind, reading.documents, reading.silent) == ("retriever", [], True)
    assert reading.problems == [(OUTPUT, f"`{OUTPUT}` is not a JSON array")]


def test_an_item_that_is_no_node_with_score_is_named_and_the_nodes_after_it_kept():
    # malformed input (the instrumentation writes every item as a NodeWithScore's to_json()): one
    # odd item costs that item alone, never the trace
    output = json.dumps([node_with_score("pay#0", "Payroll.", 0.9, doc_id="pay"), "not a node",
                         node_with_score("leave#0", "Leave.", 0.5, doc_id="leave")])
    reading = Dialects().read(llamaindex(2, 1, "VectorIndexRetriever.task", 1, 20, output,
                                         query_bundle={"query_str": "q"}))
    assert reading.problems == [(OUTPUT, f"`{OUTPUT}[1]` is not a NodeWithScore")]
    assert [d.id for d in reading.documents] == ["pay#0", "leave#0"]


def test_an_empty_list_that_is_no_search_is_no_list_and_a_generation_gives_the_answer_and_tokens():
    # the application's own root span; a text splitter given an empty text returns [] (not a retrieval);
    # the custom LLM's span: gen_ai.operation.name, its output messages and token counts
    root = span(1, None, "answer", 0, 100, "rag-app", user__id="u")
    split = llamaindex(2, 1, "TokenTextSplitter.task", 1, 5, "[]", text="")
    found = llamaindex(3, 1, "VectorIndexRetriever.task", 10, 20,
                       json.dumps([node_with_score("pay#0", "Payroll runs on the 25th.", 1.5, doc_id="pay")]),
                       str_or_query_bundle="payroll?")
    llm = span(4, 1, "MockLLM.task", 30, 90, LLAMAINDEX, traceloop__span__kind="task",
               gen_ai__operation__name="text_completion", gen_ai__usage__input_tokens=12,
               gen_ai__usage__output_tokens=8, gen_ai__output__messages=json.dumps(
                   [{"role": "assistant", "parts": [{"type": "text", "content": "On the 25th."}],
                     "finish_reason": "stop"}]))
    event = SpanMapper().map([root, split, found, llm]).event
    assert [[p["id"] for p in r] for r in passages(event)] == [["pay#0"]]
    assert event["answer"]["text"] == "On the 25th."
    assert event["usage"] == {"input_tokens": 12, "output_tokens": 8}
    assert event["latency_ms"] == {"retrieve": 10.0, "generate": 60.0, "total": 100.0}
    # content tracing off (TRACELOOP_TRACE_CONTENT=false): no messages, still a generation with its tokens
    del llm.attributes["gen_ai.output.messages"]
    llm.reading = None
    event = SpanMapper().map([root, found, llm]).event
    assert event["usage"] == {"input_tokens": 12, "output_tokens": 8} and event["latency_ms"]["generate"] == 60.0


def test_an_unread_openllmetry_trace_says_what_it_lacked():
    spans = [llamaindex(1, None, "RetrieverQueryEngine.workflow", 0, 100, json.dumps({"response": "Five."}),
                        str_or_query_bundle="q"),
             llamaindex(2, 1, "TokenTextSplitter.task", 1, 5, "[]", text="")]
    closest = Dialects().closest(spans)
    assert (closest.dialect, closest.spans) == ("openllmetry", 2)
    assert closest.lacked == (
        "a LangChain retriever span (gen_ai.operation.name vector_db_retrieve)",
        "a LlamaIndex span whose traceloop.entity.output lists NodeWithScore objects (LlamaIndex classes whose names "
        "hold a digit, such as BM25Retriever, make no span)")
