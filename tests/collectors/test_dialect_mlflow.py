"""The MLflow dialect on the spans mlflow-tracing 3.17 really sends (LlamaIndex and LangChain autolog,
``@mlflow.trace``; tests/collectors/dialect_spans), and on the variations of them an application or a
newer MLflow makes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.span_mapping import SpanMapper
from ragmon.collectors.unread.closest import RETRIEVAL, Closest, RegistryDialects
from tests.clients.expect import passage_id
from tests.collectors.dialect_spans import Capture, named, root_of

CAPTURE = Capture("mlflow_3_17")
RETRIEVER_ALONE, QUERY_ENGINE, LCEL_CHAIN, LANGCHAIN_RETRIEVER, TRACED_FUNCTIONS = range(5)


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
    expected = [[passage_id(d)[0] for d in documents] for documents in reported["lists"]]
    assert ids(event) == expected
    assert [[p.get("score") for p in r["passages"]] for r in event["retrievals"]] == [
        [d["score"] for d in documents] for documents in reported["lists"]]
    assert context_of(event) == [passage_id(d)[0] for d in reported["context"]]
    assert event["query"] == reported["question"]
    assert (event.get("answer") or {}).get("text") == reported["answer"]
    assert event["caller"] == {"id": reported["caller"]["id"], "groups": reported["caller"]["groups"]}
    assert event["tenant"] == "mlflow" and event["index"]["name"] == "policies"
    assert event["conversation_id"] == "mlflow-conversation"


def test_every_span_is_read_as_mlflow_and_retrievers_and_rerankers_by_their_json_span_type():
    dialects = Dialects()
    _, spans = CAPTURE[QUERY_ENGINE]
    readings = {s.name: dialects.read(s) for s in spans}
    assert {r.dialect.name for r in readings.values()} == {"mlflow"}
    assert readings["BM25Retriever.retrieve"].kind == "retriever"
    assert readings["BM25Retriever._retrieve"].kind == "retriever"
    assert readings["KeywordOverlapRerank._postprocess_nodes"].kind == "reranker"
    assert all(r.kind is None for name, r in readings.items() if "Retriever" not in name and "Rerank" not in name)
    # the reranker's NodeWithScore list: node ids, texts, metadata and the reranker's own scores
    [kept] = readings["KeywordOverlapRerank._postprocess_nodes"].documents
    assert kept.content.startswith("Vacation days carry over") and kept.fields["doc_id"] == "mlflow/leave"
    assert kept.score == 0.7 and kept.id


def test_the_retriever_and_reranker_are_named_as_mlflow_names_them():
    event = SpanMapper().map(CAPTURE[QUERY_ENGINE][1]).event
    assert [r["retriever"] for r in event["retrievals"]] == ["BM25Retriever", "keyword-overlap"]
    event = SpanMapper().map(CAPTURE[LCEL_CHAIN][1]).event
    assert [r["retriever"] for r in event["retrievals"]] == ["bm25"]  # LangChain's ls_retriever_name
    event = SpanMapper().map(CAPTURE[TRACED_FUNCTIONS][1]).event
    assert [r["retriever"] for r in event["retrievals"]] == ["search"]


def test_langchain_documents_keep_their_ids_and_are_named_from_metadata_without_one():
    reported, spans = CAPTURE[LCEL_CHAIN]
    [passages] = [r["passages"] for r in SpanMapper().map(spans).event["retrievals"]]
    # the LangChain Document's own id when it had one, else source#page from its metadata
    assert [p["id"] for p in passages] == [d["id"] or f"{d['metadata']['source']}#{d['metadata']['page']}"
                                           for d in reported["lists"][0]]
    assert [p["doc_id"] for p in passages] == [d["metadata"]["source"] for d in reported["lists"][0]]


def test_trace_tags_give_the_caller_when_the_root_span_carries_them():
    # MLflow writes trace tags onto the root span as mlflow.traceTag.<key> (plain strings); with
    # opentelemetry-sdk < 1.43 the root survives it
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    root = next(s for s in spans if not s.parent_id)
    for key in ("user.id", "session.id", "metadata"):
        del root.attributes[key]
    root.attributes.update({"mlflow.traceTag.user_id": "tagged-bob", "mlflow.traceTag.tenant": "acme",
                            "mlflow.traceTag.groups": "staff, hr", "mlflow.traceTag.session_id": "c-9"})
    event = SpanMapper().map(spans).event
    assert event["caller"] == {"id": "tagged-bob", "groups": ["staff", "hr"]}
    assert event["tenant"] == "acme" and event["conversation_id"] == "c-9"


def test_association_properties_give_the_caller_as_on_any_span():
    # OpenLLMetry's SDK on the same TracerProvider puts them on MLflow's spans too
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    root = next(s for s in spans if not s.parent_id)
    for key in ("user.id", "session.id", "metadata"):
        del root.attributes[key]
    prefix = "traceloop.association.properties."
    root.attributes.update({f"{prefix}user_id": "carol", f"{prefix}customer_id": "acme", f"{prefix}groups": "staff"})
    event = SpanMapper().map(spans).event
    assert event["caller"] == {"id": "carol", "groups": ["staff"]} and event["tenant"] == "acme"


def test_a_span_is_recognised_by_its_span_type_without_the_scope():
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    for s in spans:
        s.scope = ""
    event = SpanMapper().map(spans).event
    assert ids(event) == [[d["id"] for d in CAPTURE[TRACED_FUNCTIONS][0]["lists"][0]]]


def test_a_retriever_output_that_is_not_a_list_of_documents_is_named_and_the_trace_kept():
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    search = next(s for s in spans if s.name == "search")
    search.attributes["mlflow.spanOutputs"] = json.dumps({"hits": 2})
    reading = Dialects().read(search)
    assert reading.kind == "retriever" and reading.documents == []
    assert reading.problems == [("mlflow.spanOutputs", "`mlflow.spanOutputs` is not a JSON array of documents")]
    event = SpanMapper().map(spans).event
    assert ids(event) == [[]] and event["query"] == CAPTURE[TRACED_FUNCTIONS][0]["question"]


@pytest.mark.parametrize("n", [QUERY_ENGINE, LCEL_CHAIN, TRACED_FUNCTIONS])
def test_the_roots_inputs_and_outputs_are_the_question_and_answer(n):
    # the retriever searched a rewritten query and the application rewrote the model's answer
    reported, spans = CAPTURE[n]
    for span in spans:
        if span.attributes["mlflow.spanType"] == '"RETRIEVER"':
            span.attributes["mlflow.spanInputs"] = json.dumps({"query": "a rewritten query"})
    root = next(s for s in spans if not s.parent_id)
    root.attributes["mlflow.spanOutputs"] = json.dumps({"answer": "The application's own words."})
    event = SpanMapper().map(spans).event
    assert event["query"] == reported["question"] and event["answer"]["text"] == "The application's own words."


def test_an_unread_mlflow_trace_is_explained_by_what_mlflow_lacked():
    # MLFLOW_ENABLE_OTEL_GENAI_SEMCONV: MLflow strips the mlflow.* attributes of the spans it cannot
    # translate, the retriever's documents among them
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    for span in spans:
        kind = span.attributes["mlflow.spanType"].strip('"')
        span.attributes = {"gen_ai.operation.name": kind}
    mapper = SpanMapper()
    assert mapper.map(spans).event is None
    closest = mapper.dialects.closest(spans)
    assert (closest.dialect, closest.spans) == ("mlflow", 2)
    assert closest.lacked == ('a span of mlflow.spanType "RETRIEVER" or "RERANKER" listing documents in '
                              "mlflow.spanOutputs",)


def test_an_unread_mlflow_trace_names_the_span_types_its_spans_carried():
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    [root] = [s for s in spans if s.name != "search"]  # the application's function without its retriever
    lacked = 'a span of mlflow.spanType "RETRIEVER" or "RERANKER" listing documents in mlflow.spanOutputs'
    closest = RegistryDialects().closest([root], RETRIEVAL)
    assert closest == Closest("mlflow", f'{lacked} (the mlflow.spanType of its spans: "CHAIN")')
    root.attributes["mlflow.spanType"] = json.dumps("an application's own type")  # never named
    closest = RegistryDialects().closest([root], RETRIEVAL)
    assert closest == Closest("mlflow", f"{lacked} (the mlflow.spanType of its spans: another value)")


def test_a_retriever_that_found_nothing_is_an_empty_context_and_one_without_its_output_leaves_it_to_its_inner_list():
    reported, spans = CAPTURE[RETRIEVER_ALONE]
    outer = next(s for s in spans if s.name == "BM25Retriever.retrieve")
    outer.attributes["mlflow.spanOutputs"] = "[]"  # what MLflow writes for a retriever that returned no document
    reading = Dialects().read(outer)
    assert (reading.kind, reading.documents, reading.silent) == ("retriever", [], False)
    event = SpanMapper().map(spans).event
    assert ids(event) == [[]] and context_of(event) == []
    reported, spans = CAPTURE[RETRIEVER_ALONE]
    outer = next(s for s in spans if s.name == "BM25Retriever.retrieve")
    del outer.attributes["mlflow.spanOutputs"]  # the output not recorded: the span does not say what it held
    assert Dialects().read(outer).silent
    event = SpanMapper().map(spans).event
    expected = [passage_id(d)[0] for d in reported["lists"][0]]
    assert ids(event) == [expected] and context_of(event) == expected



def test_a_models_token_usage_is_the_traces_usage():
    # what MLflow's LlamaIndex and LangChain tracers write for a model that reports its usage
    _, spans = CAPTURE[QUERY_ENGINE]
    named(spans, "MockLLM.complete").attributes["mlflow.chat.tokenUsage"] = json.dumps(
        {"input_tokens": 212, "output_tokens": 8, "total_tokens": 220})
    assert SpanMapper().map(spans).event["usage"] == {"input_tokens": 212, "output_tokens": 8}
    _, spans = CAPTURE[LCEL_CHAIN]
    named(spans, "FakeListChatModel").attributes["mlflow.chat.tokenUsage"] = json.dumps(
        {"input_tokens": 40, "output_tokens": 7, "total_tokens": 47})
    assert SpanMapper().map(spans).event["usage"] == {"input_tokens": 40, "output_tokens": 7}


@pytest.mark.parametrize("n", [QUERY_ENGINE, LCEL_CHAIN])
def test_a_root_that_returned_nothing_leaves_the_answer_to_the_last_model_call(n):
    # a traced function that returns None, as handle_question of the first question: MLflow records null;
    # LlamaIndex's predict returns the text, LangChain's chat model a chat completion
    reported, spans = CAPTURE[n]
    root_of(spans).attributes["mlflow.spanOutputs"] = "null"
    assert SpanMapper().map(spans).event["answer"]["text"] == reported["answer"]


def test_a_root_span_that_records_no_inputs_or_outputs_takes_the_retrievers_question_and_the_models_answer():
    # mlflow.start_span() records inputs and outputs only when the application sets them
    reported, spans = CAPTURE[QUERY_ENGINE]
    root = root_of(spans)
    del root.attributes["mlflow.spanInputs"], root.attributes["mlflow.spanOutputs"]
    root.attributes["mlflow.spanType"] = '"UNKNOWN"'
    event = SpanMapper().map(spans).event
    assert event["query"] == reported["question"] and event["answer"]["text"] == reported["answer"]


def test_a_completion_called_by_the_application_itself_gives_its_text():
    # llm.complete() without LlamaIndex's predict around it: MLflow records the CompletionResponse
    reported, spans = CAPTURE[QUERY_ENGINE]
    predict, complete = named(spans, "MockLLM.predict"), named(spans, "MockLLM.complete")
    complete.parent_id = predict.parent_id
    spans.remove(predict)
    root_of(spans).attributes["mlflow.spanOutputs"] = "null"
    assert json.loads(complete.attributes["mlflow.spanOutputs"])["text"] == reported["answer"]
    assert SpanMapper().map(spans).event["answer"]["text"] == reported["answer"]


COMPLETION = {"id": "cmpl-1", "object": "text_completion", "created": 1764806400, "model": "gpt-3.5-turbo-instruct",
              "choices": [{"text": "The office opens at nine.", "index": 0, "logprobs": None, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36}}


@pytest.mark.parametrize(("name", "outputs"), [
    # the legacy completions API: MLflow's OpenAI autolog makes an LLM span whose output is the Completion
    ("Completions", COMPLETION),
    # the application's own model call, @mlflow.trace(span_type=SpanType.LLM) on a function returning text
    ("stub_model", "The office opens at nine."),
    # ... or OpenAI's chat message (choices[0].message), as MLflow's encoder writes the ChatCompletionMessage
    ("stub_model", {"content": "The office opens at nine.", "refusal": None, "role": "assistant", "annotations": None,
                    "audio": None, "function_call": None, "tool_calls": None}),
])
def test_a_model_call_beside_the_retriever_gives_its_text(name, outputs):
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    root, search = root_of(spans), named(spans, "search")
    root.attributes["mlflow.spanOutputs"] = "null"
    attributes = {"mlflow.spanType": '"LLM"', "mlflow.spanOutputs": json.dumps(outputs)}
    spans.append(dataclasses.replace(search, span_id="c0ffee0000000001", parent_id=root.span_id, name=name,
                                     start_ns=search.end_ns, end_ns=search.end_ns + 1_000_000, reading=None,
                                     attributes=attributes))
    assert SpanMapper().map(spans).event["answer"]["text"] == "The office opens at nine."


def test_a_chat_model_that_said_nothing_gives_no_answer():
    _, spans = CAPTURE[LCEL_CHAIN]
    root_of(spans).attributes["mlflow.spanOutputs"] = "null"
    model = named(spans, "FakeListChatModel")
    outputs = json.loads(model.attributes["mlflow.spanOutputs"])
    outputs["choices"][0]["message"]["content"] = ""
    model.attributes["mlflow.spanOutputs"] = json.dumps(outputs)
    assert "answer" not in SpanMapper().map(spans).event


@pytest.mark.parametrize("choices", [[], ["The office opens at nine."]])
def test_a_model_output_without_a_choice_object_gives_no_answer_and_no_error(choices):
    # off OpenAI's shape (no choice, or a choice that is no object): a reader may not raise on it (Dialect)
    _, spans = CAPTURE[LCEL_CHAIN]
    root_of(spans).attributes["mlflow.spanOutputs"] = "null"
    model = named(spans, "FakeListChatModel")
    outputs = json.loads(model.attributes["mlflow.spanOutputs"])
    outputs["choices"] = choices
    model.attributes["mlflow.spanOutputs"] = json.dumps(outputs)
    assert "answer" not in SpanMapper().map(spans).event


@pytest.mark.parametrize(("attributes", "caller"), [
    # through MLflow's span API (LiveSpan.set_attribute) every value is JSON text
    ({"enduser.id": json.dumps("bob"), "ragmon.caller.groups": json.dumps(["staff", "hr"])},
     {"id": "bob", "groups": ["staff", "hr"]}),
    ({"enduser.id": json.dumps("bob"), "ragmon.caller.groups": json.dumps("staff, hr")},
     {"id": "bob", "groups": ["staff", "hr"]}),
    # through OpenTelemetry's current span (trace.get_current_span(), MLflow's span) the value itself
    ({"user.id": "carol", "ragmon.caller.groups": ["staff", "hr"]}, {"id": "carol", "groups": ["staff", "hr"]}),
    ({"user.id": "carol", "ragmon.caller.groups": "staff, hr"}, {"id": "carol", "groups": ["staff", "hr"]}),
])
def test_the_caller_the_application_sets_on_the_root(attributes, caller):
    _, spans = CAPTURE[TRACED_FUNCTIONS]
    root = root_of(spans)
    for key in ("user.id", "session.id", "metadata"):
        del root.attributes[key]
    root.attributes.update(attributes)
    assert SpanMapper().map(spans).event["caller"] == caller


def test_a_reranker_without_a_model_name_and_a_retriever_langchain_names_empty_are_named_by_their_class():
    _, spans = CAPTURE[QUERY_ENGINE]
    named(spans, "KeywordOverlapRerank._postprocess_nodes").attributes["model_name"] = json.dumps("")
    event = SpanMapper().map(spans).event
    assert [r["retriever"] for r in event["retrievals"]] == ["BM25Retriever", "KeywordOverlapRerank"]
    # nor a name (OTLP allows an empty one): "reranker", as OpenInference's
    named(spans, "KeywordOverlapRerank._postprocess_nodes").name = ""
    assert [r["retriever"] for r in SpanMapper().map(spans).event["retrievals"]] == ["BM25Retriever", "reranker"]
    # LangChain's ls_retriever_name strips "Retriever" from the class name: a class called Retriever gets ""
    _, spans = CAPTURE[LCEL_CHAIN]
    retriever = named(spans, "BM25Retriever")
    retriever.name = "Retriever"
    metadata = json.loads(retriever.attributes["metadata"])
    metadata["ls_retriever_name"] = ""
    retriever.attributes["metadata"] = json.dumps(metadata)
    assert [r["retriever"] for r in SpanMapper().map(spans).event["retrievals"]] == ["Retriever"]
