"""The Langfuse dialect on the spans the Langfuse SDK 5.2 really sends (its LangChain callback handler,
``@observe``, and OpenInference's LlamaIndex spans under a Langfuse root; tests/collectors/dialect_spans),
and on the variations of them an application makes."""

from __future__ import annotations

import json

import pytest

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.span_mapping import SpanMapper
from ragmon.collectors.unread.closest import RETRIEVAL, Closest, RegistryDialects
from tests.clients.expect import passage_id
from tests.collectors.dialect_spans import Capture, named, root_of

CAPTURE = Capture("langfuse_5_2")
CHAIN, SECOND_CHAIN, RETRIEVER_ALONE, OBSERVED, LLAMAINDEX = range(5)


def ids(event) -> list[list[str]]:
    return [[p["id"] for p in r["passages"]] for r in event["retrievals"]]


def context_of(event) -> list[str]:
    if "context" in event:
        return [p["id"] for p in event["context"]]
    return ids(event)[-1] if event["retrievals"] else []


@pytest.mark.parametrize("n", range(len(CAPTURE)))
def test_each_question_maps_to_what_the_framework_returned(n):
    reported, spans = CAPTURE[n]
    event = SpanMapper().map(spans).event
    assert ids(event) == [[passage_id(d)[0] for d in documents] for documents in reported["lists"]]
    assert [[p.get("score") for p in r["passages"]] for r in event["retrievals"]] == [
        [d["score"] for d in documents] for documents in reported["lists"]]
    assert context_of(event) == [passage_id(d)[0] for d in reported["context"]]
    assert event["query"] == reported["question"]
    assert (event.get("answer") or {}).get("text") == reported["answer"]
    assert event["caller"].get("id") == reported["caller"].get("id")
    assert event["caller"]["groups"] == reported["caller"]["groups"]
    assert event["tenant"] == "langfuse" and event["index"]["name"] == "policies"
    assert event.get("conversation_id") == ("langfuse-conversation" if reported["caller"].get("id") else None)


def test_the_callback_handlers_spans_are_read_as_langfuse_and_its_retriever_by_observation_type():
    dialects = Dialects()
    readings = {s.name: dialects.read(s) for s in CAPTURE[CHAIN][1]}
    assert {r.dialect.name for r in readings.values()} == {"langfuse"}
    assert [name for name, r in readings.items() if r.kind] == ["BM25Retriever"]
    event = SpanMapper().map(CAPTURE[CHAIN][1]).event
    assert [r["retriever"] for r in event["retrievals"]] == ["bm25"]  # LangChain's ls_retriever_name


def test_a_retriever_alone_keeps_the_applications_metadata_but_langfuse_gives_it_no_user():
    # the CallbackHandler makes user.id and session.id only when a chain is the run's root
    reported, spans = CAPTURE[RETRIEVER_ALONE]
    [root] = spans
    assert "user.id" not in root.attributes and "langfuse.observation.metadata.tenant" in root.attributes
    event = SpanMapper().map(spans).event
    assert event["caller"] == {"groups": ["staff"]} and event["tenant"] == "langfuse"


def test_llamaindex_spans_under_a_langfuse_root_are_openinferences_and_the_caller_langfuses():
    dialects = Dialects()
    _, spans = CAPTURE[LLAMAINDEX]
    by_dialect = {}
    for s in spans:
        by_dialect.setdefault(dialects.read(s).dialect.name, []).append(s.name)
    assert by_dialect["langfuse"] == ["ask_engine"]
    assert "BM25Retriever.retrieve" in by_dialect["openinference"]
    event = SpanMapper().map(spans).event
    assert event["tenant"] == "langfuse" and event["caller"]["groups"] == ["staff"]


def test_groups_given_as_comma_separated_metadata_text():
    _, spans = CAPTURE[OBSERVED]
    for s in spans:
        s.attributes["langfuse.trace.metadata.groups"] = json.dumps("staff, hr")
    assert SpanMapper().map(spans).event["caller"]["groups"] == ["staff", "hr"]


def test_a_retriever_output_that_is_not_a_list_of_documents_is_named_and_the_trace_kept():
    reported, spans = CAPTURE[OBSERVED]
    search = next(s for s in spans if s.name == "search")
    search.attributes["langfuse.observation.output"] = "no documents today"
    reading = Dialects().read(search)
    assert reading.kind == "retriever" and reading.documents == []
    assert reading.problems == [("langfuse.observation.output",
                                 "`langfuse.observation.output` is not a JSON array of documents")]
    event = SpanMapper().map(spans).event
    assert ids(event) == [[]] and event["query"] == reported["question"]


@pytest.mark.parametrize("n", [CHAIN, OBSERVED, LLAMAINDEX])
def test_the_root_observations_input_and_output_are_the_question_and_answer(n):
    # the retriever searched a rewritten query and the application rewrote the model's answer
    reported, spans = CAPTURE[n]
    for span in spans:
        if span.attributes.get("langfuse.observation.type") == "retriever":
            span.attributes["langfuse.observation.input"] = "a rewritten query"
        if span.attributes.get("openinference.span.kind") == "RETRIEVER":
            span.attributes["input.value"] = "a rewritten query"
    root = next(s for s in spans if not s.parent_id)
    root.attributes["langfuse.observation.output"] = "The application's own words."
    event = SpanMapper().map(spans).event
    assert event["query"] == reported["question"] and event["answer"]["text"] == "The application's own words."


def test_an_unread_langfuse_trace_is_explained_by_what_langfuse_lacked():
    _, spans = CAPTURE[OBSERVED]
    spans = [s for s in spans if s.name != "search"]  # the model call without its retriever
    mapper = SpanMapper()
    assert mapper.map(spans).event is None
    closest = mapper.dialects.closest(spans)
    assert (closest.dialect, closest.spans) == ("langfuse", 2)
    assert closest.lacked == ("a span of langfuse.observation.type retriever listing documents in "
                              "langfuse.observation.output",)


def test_an_unread_langfuse_trace_names_the_observation_types_its_spans_carried():
    _, spans = CAPTURE[OBSERVED]
    spans = [s for s in spans if s.name != "search"]
    closest = RegistryDialects().closest(spans, RETRIEVAL)
    assert closest == Closest("langfuse", "a span of langfuse.observation.type retriever listing documents in "
                                          "langfuse.observation.output (the langfuse.observation.type of its spans: "
                                          "generation, span)")


def test_a_retriever_that_found_nothing_says_so_and_one_without_its_output_does_not():
    _, spans = CAPTURE[OBSERVED]
    search = next(s for s in spans if s.name == "search")
    search.attributes["langfuse.observation.output"] = "[]"  # what @observe records for an empty list
    reading = Dialects().read(search)
    assert (reading.kind, reading.documents, reading.silent, reading.problems) == ("retriever", [], False, [])
    del search.attributes["langfuse.observation.output"]  # the output not captured (capture_output=False)
    reading = Dialects().read(search)
    assert (reading.kind, reading.documents, reading.silent, reading.problems) == ("retriever", [], True, [])



def test_a_generations_usage_details_are_the_traces_usage():
    # what a generation's update(usage_details=...) and the LangChain handler write: Langfuse's input and output
    _, spans = CAPTURE[OBSERVED]
    named(spans, "stub_model").attributes["langfuse.observation.usage_details"] = json.dumps(
        {"input": 120, "output": 14, "total": 134})
    assert SpanMapper().map(spans).event["usage"] == {"input_tokens": 120, "output_tokens": 14}


@pytest.mark.parametrize(("recorded", "question"), [
    ({"args": [], "kwargs": {"question": "When does the office open?"}}, "When does the office open?"),
    ({"args": ["policies"], "kwargs": {"question": "When does the office open?"}}, "When does the office open?"),
    ({"args": [3, "When does the office open?"], "kwargs": {}}, "When does the office open?"),  # ask(top_k, question)
    ({"args": [], "kwargs": {}}, "office hours"),  # main() without arguments: the retriever's question
])
def test_the_question_in_the_arguments_observe_records(recorded, question):
    # @observe records a function's arguments as {"args": [...], "kwargs": {...}}; the retriever searched a
    # rewritten query
    _, spans = CAPTURE[OBSERVED]
    named(spans, "search").attributes["langfuse.observation.input"] = json.dumps(
        {"args": ["office hours"], "kwargs": {}})
    root_of(spans).attributes["langfuse.observation.input"] = json.dumps(recorded)
    assert SpanMapper().map(spans).event["query"] == question


@pytest.mark.parametrize(("output", "answer"), [
    (json.dumps({"answer": "Nine in the morning.", "sources": 2}), "Nine in the morning."),  # an object returned
    ("[1] The office opens at nine.", "[1] The office opens at nine."),  # text with a citation marker first
    (json.dumps(["langfuse/office#search", "langfuse/leave#search"]), None),  # a list is no answer: the model's
])
def test_the_root_observations_output_as_the_answer(output, answer):
    reported, spans = CAPTURE[OBSERVED]
    root_of(spans).attributes["langfuse.observation.output"] = output
    assert SpanMapper().map(spans).event["answer"]["text"] == (answer or reported["answer"])


def test_a_chain_ending_with_the_chat_model_is_answered_by_its_message():
    # prompt | model, without an output parser: the chain returns the model's AIMessage, which the handler
    # records as its serialized message, and the generation as {"role", "content"}
    reported, spans = CAPTURE[CHAIN]
    parser = named(spans, "StrOutputParser")
    spans.remove(parser)
    root_of(spans).attributes["langfuse.observation.output"] = parser.attributes["langfuse.observation.input"]
    assert SpanMapper().map(spans).event["answer"]["text"] == reported["answer"] == "Here is what the documents say."


def test_a_generation_returning_llamaindexs_completion_is_answered_by_its_text():
    # @observe(as_type="generation") on a function returning llm.complete(prompt): Langfuse's serializer
    # writes the CompletionResponse as its model_dump()
    reported, spans = CAPTURE[OBSERVED]
    del root_of(spans).attributes["langfuse.observation.output"]
    named(spans, "stub_model").attributes["langfuse.observation.output"] = json.dumps(
        {"text": reported["answer"], "additional_kwargs": {}, "raw": None, "logprobs": None, "delta": None})
    assert SpanMapper().map(spans).event["answer"]["text"] == reported["answer"]


def test_the_index_version_in_the_traces_metadata_of_an_application_that_names_no_groups():
    _, spans = CAPTURE[OBSERVED]
    for s in spans:
        del s.attributes["langfuse.trace.metadata.groups"]
        s.attributes["langfuse.trace.metadata.index_version"] = json.dumps("2026-12-01")
    event = SpanMapper().map(spans).event
    assert event["index"] == {"name": "policies", "version": "2026-12-01"} and event["tenant"] == "langfuse"
    assert event["caller"] == {"id": "langfuse-alice", "groups": []}


def test_the_traces_groups_win_over_the_run_metadatas_in_whatever_form():
    # propagate_attributes takes string metadata values (groups as "staff, hr"); LangChain's run metadata a list
    _, spans = CAPTURE[CHAIN]
    for s in spans:
        s.attributes["langfuse.trace.metadata.groups"] = json.dumps("staff, hr")
        assert json.loads(s.attributes["langfuse.observation.metadata.groups"]) == ["staff"]
    assert SpanMapper().map(spans).event["caller"]["groups"] == ["staff", "hr"]
