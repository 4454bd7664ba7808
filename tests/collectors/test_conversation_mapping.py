"""Chat turns from spans: the trace's query is the user's message, each list says what it searched
when that was a rewrite, and the conversation and the turn come from where applications put them.
The span shapes are those the frameworks produce (captured from LangChain 1.8.3 and LlamaIndex 0.14.25
under OpenInference and OpenLLMetry; the conformance suite in tests/clients/ runs the frameworks)."""

from __future__ import annotations

import json

import pytest

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.otlp_wire import Span
from tests.collectors.test_span_mapping import mapped, retriever, span

JSON = "application/json"
HISTORY = [{"type": "human", "data": {"content": "How many vacation days carry over?"}},
           {"type": "ai", "data": {"content": "Five days."}}]


def test_a_history_aware_retriever_searches_the_condensed_question_and_the_trace_keeps_the_message():
    """LangChain's ``create_retrieval_chain`` over ``create_history_aware_retriever``: the root's JSON
    input holds the message as ``input`` beside ``chat_history``; the retriever is called with what the
    condense step wrote."""
    root = span(1, None, "retrieval_chain", 0, 100, openinference__span__kind="CHAIN", input__mime_type=JSON,
                input__value=json.dumps({"input": "And for contractors?", "chat_history": HISTORY}),
                output__mime_type=JSON, output__value=json.dumps({"input": "And for contractors?", "answer": "None."}),
                session__id="c-77", metadata='{"turn": 2}')
    condense = span(2, 1, "FakeListChatModel", 5, 10, openinference__span__kind="LLM",
                    llm__output_messages__0__message__content="vacation days for contractors")
    found = retriever(3, 1, "BM25Retriever", 11, 20, {"id": "leave#1"}, input__value="vacation days for contractors",
                      metadata='{"ls_retriever_name": "bm25"}')
    event = mapped(root, condense, found).event
    assert (event["query"], event["conversation_id"], event["turn"]) == ("And for contractors?", "c-77", 2)
    assert event["retrievals"] == [{"retriever": "bm25", "passages": [{"id": "leave#1"}],
                                    "query": "vacation days for contractors"}]
    assert event["answer"]["text"] == "None."


def test_a_list_that_searched_the_message_itself_carries_no_query_of_its_own():
    root = span(1, None, "retrieval_chain", 0, 100, openinference__span__kind="CHAIN", input__mime_type=JSON,
                input__value=json.dumps({"input": "How many vacation days carry over?", "chat_history": []}))
    found = retriever(2, 1, "BM25Retriever", 1, 20, {"id": "leave#1"},
                      input__value="How many vacation days carry over?")
    event = mapped(root, found).event
    assert event["query"] == "How many vacation days carry over?" and "query" not in event["retrievals"][0]
    assert "turn" not in event  # none said: ordered by time


def test_a_llamaindex_chat_engine_asks_with_its_message_and_its_nested_retriever_searches_the_rewrite():
    """``CondenseQuestionChatEngine.chat(message, chat_history)``: the root's JSON input names the
    message ``message``; the retriever's ``retrieve`` (plain text) wraps ``_retrieve`` (a query bundle)."""
    root = span(1, None, "CondenseQuestionChatEngine.chat", 0, 100, openinference__span__kind="CHAIN",
                input__mime_type=JSON, input__value=json.dumps({"message": "And for contractors?", "chat_history": [
                    "ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[])"]}),
                output__mime_type=JSON, output__value=json.dumps({"response": "None.", "sources": []}))
    outer = retriever(2, 1, "BM25Retriever.retrieve", 10, 30, {"id": "n1"},
                      input__value="How many vacation days do contractors get?")
    inner = retriever(3, 2, "BM25Retriever._retrieve", 11, 29, input__mime_type=JSON, input__value=json.dumps(
        {"query_bundle": {"query_str": "How many vacation days do contractors get?"}}))
    event = mapped(root, outer, inner).event
    assert (event["query"], event["answer"]["text"]) == ("And for contractors?", "None.")
    assert [(r["retriever"], r.get("query")) for r in event["retrievals"]] == [
        ("BM25Retriever", "How many vacation days do contractors get?")]


def test_each_source_of_a_multi_query_retriever_says_what_it_searched():
    """``MultiQueryRetriever``: a RETRIEVER span asked the user's question, around one retriever call per
    generated query; the sources' lists stay lists of their own, each with its query."""
    outer = retriever(1, None, "MultiQueryRetriever", 0, 100, {"id": "a"}, {"id": "b"}, {"id": "c"},
                      input__value="vacation for contractors?", metadata='{"ls_retriever_name": "multiquery"}')
    generate = span(2, 1, "RunnableSequence", 1, 10, openinference__span__kind="CHAIN",
                    input__value="vacation for contractors?")
    sources = [retriever(3 + i, 1, "BM25Retriever", 11 + 10 * i, 20 + 10 * i, *found, input__value=searched,
                         metadata='{"ls_retriever_name": "bm25"}')
               for i, (searched, found) in enumerate([("vacation carry over", ({"id": "a"}, {"id": "b"})),
                                                      ("contractor vacation", ({"id": "b"}, {"id": "c"})),
                                                      ("payroll date", ({"id": "c"},))])]
    event = mapped(outer, generate, *sources).event
    assert event["query"] == "vacation for contractors?"
    assert [(r["retriever"], r.get("query")) for r in event["retrievals"]] == [
        ("bm25", "vacation carry over"), ("bm25", "contractor vacation"), ("bm25", "payroll date"),
        ("multiquery", None)]


def test_openllmetry_chat_engines_and_retrievers_give_the_message_and_the_searched_query():
    root = span(1, None, "CondensePlusContextChatEngine.workflow", 0, 100, traceloop__span__kind="workflow",
                traceloop__entity__input=json.dumps({"message": "And for contractors?"}),
                traceloop__entity__output=json.dumps({"response": "None."}),
                traceloop__association__properties__session_id="c-9", traceloop__association__properties__turn="3")
    node = json.dumps({"node": {"id_": "n1", "text": "Contractors get none.", "metadata": {}}, "score": 1.0})
    found = span(2, 1, "VectorIndexRetriever.task", 10, 30, traceloop__span__kind="task",
                 traceloop__entity__input=json.dumps({"str_or_query_bundle": "vacation days for contractors"}),
                 traceloop__entity__output=json.dumps([node]))
    event = mapped(root, found).event
    assert (event["query"], event["conversation_id"], event["turn"]) == ("And for contractors?", "c-9", 3)
    assert [r.get("query") for r in event["retrievals"]] == ["vacation days for contractors"]


@pytest.mark.parametrize("turn", [0, -1, 1.5, "two", True, 1_000_001, [2]])
def test_a_turn_that_is_no_whole_number_from_1_is_named_and_left_out(turn):
    attributes = {"openinference.span.kind": "RETRIEVER", "metadata": json.dumps({"turn": turn, "tenant": "acme"})}
    problems = Dialects().read(Span("a" * 32, "1" * 16, "", "s", 0, 1, attributes)).problems
    assert problems == [("metadata", "`metadata.turn` is not a whole number from 1 to 1000000")]
    event = mapped(retriever(1, None, "r", 0, 10, {"id": "p"}, metadata=json.dumps({"turn": turn}))).event
    assert "turn" not in event


def test_the_turn_in_metadata_wins_over_an_association_property():
    found = retriever(1, None, "r", 0, 10, {"id": "p"}, metadata='{"turn": 4}',
                      traceloop__association__properties__turn="2")
    assert mapped(found).event["turn"] == 4
