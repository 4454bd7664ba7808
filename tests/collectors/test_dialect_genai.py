"""The OTel GenAI dialect on the shapes applications write by hand (tests/clients/apps/genai_app.py,
logfire_app.py, openllmetry_qdrant_app.py) and OpenInference's GenAI conversion writes: the documents'
content and metadata, a score that is not a number, the answer among an output's parts, and values
that break the conventions."""

from __future__ import annotations

import json
import math

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.span_mapping import SpanMapper

T = "d" * 32
MS = 1_000_000


def span(span_id: int, parent: int | None, name: str, start: int, end: int, **attributes) -> Span:
    return Span(T, f"{span_id:016x}", f"{parent:016x}" if parent is not None else "", name, start * MS, end * MS,
                {k.replace("__", "."): v for k, v in attributes.items()})


def retrieval(documents, **attributes) -> Span:
    return span(2, 1, "retrieval policies", 1, 10, gen_ai__operation__name="retrieval",
                gen_ai__data_source__id="policies", gen_ai__retrieval__query__text="how many days?",
                gen_ai__retrieval__documents=documents, **attributes)


def chat(output_messages) -> Span:
    return span(3, 1, "chat stub-model", 11, 20, gen_ai__operation__name="chat", gen_ai__request__model="stub-model",
                gen_ai__output__messages=output_messages)


ROOT = span(1, None, "invoke_workflow policy-assistant", 0, 30, gen_ai__operation__name="invoke_workflow")


def test_a_documents_content_is_its_text_and_its_metadata_object_gives_its_fields():
    # Logfire writes a list of objects as JSON text; the application's documents carry their text as
    # content and the catalog's fields in a metadata object (tests/clients/apps/logfire_app.py)
    found = [{"id": "leave#search", "content": "Five days of leave.", "score": 0.5,
              "metadata": {"doc_id": "leave", "doc_version": "3", "acl": ["group:staff"]}},
             {"id": "pay#search", "content": "Pay day is the 25th.", "score": 0.25, "metadata": {"doc_id": "pay"}}]
    event = SpanMapper().map([ROOT, retrieval(json.dumps(found))]).event
    assert event["retrievals"][0]["passages"] == [
        {"id": "leave#search", "score": 0.5, "text": "Five days of leave.", "doc_id": "leave", "doc_version": "3",
         "acl": ["group:staff"]},
        {"id": "pay#search", "score": 0.25, "text": "Pay day is the 25th.", "doc_id": "pay"}]


def test_a_score_that_is_no_number_is_named_by_its_document_and_the_document_kept():
    # a cosine against a zero vector is NaN; structured values carry it (JSON text cannot)
    reading = Dialects().read(retrieval([{"id": "a", "score": 0.7}, {"id": "b", "score": math.nan}]))
    assert [(d.id, d.score) for d in reading.documents] == [("a", 0.7), ("b", None)]
    assert reading.problems == [("document.score", "`gen_ai.retrieval.documents[1].score` is not a finite number")]


def test_the_answer_is_the_first_text_part_after_the_models_reasoning():
    # a reasoning model's output message: a reasoning part, then the text
    output = [{"role": "assistant", "parts": [{"type": "reasoning", "content": "The policy says five."},
                                              {"type": "text", "content": "Five days."}], "finish_reason": "stop"}]
    event = SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat(json.dumps(output))]).event
    assert event["answer"]["text"] == "Five days."
    # a tool call first, then the text
    output[0]["parts"][0] = {"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"q": "leave"}}
    event = SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat(output)]).event
    assert event["answer"]["text"] == "Five days."


def test_values_that_break_the_conventions_are_no_documents_and_no_answer_and_no_error():
    dialects = Dialects()
    # JSON text cut by the SDK's attribute length limit (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT)
    cut = json.dumps([{"id": "a", "score": 0.7}, {"id": "b", "score": 0.6}])[:25]
    reading = dialects.read(retrieval(cut))
    assert (reading.kind, reading.documents) == ("retriever", [])
    assert reading.problems == [("gen_ai.retrieval.documents", "`gen_ai.retrieval.documents` is not a JSON array")]
    # output messages that are not message objects, or a message without its parts
    for output in (["Five days."], [{"role": "assistant", "finish_reason": "stop"}],
                   [{"role": "assistant", "parts": "Five days."}]):
        assert "answer" not in SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat(output)]).event
    # output messages cut by the attribute length limit: no answer, not the start of their JSON
    whole = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Five days."}]}])
    for cut in (whole[:40], " " + whole[:40]):
        assert "answer" not in SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat(cut)]).event
    # a message object not in an array is no answer, whole or cut
    for message in (whole[1:-1], whole[1:40]):
        assert "answer" not in SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat(message)]).event
    # plain text (not the conventions' messages) is taken as it is
    plain = SpanMapper().map([ROOT, retrieval([{"id": "a"}]), chat("Five days.")]).event
    assert plain["answer"]["text"] == "Five days."
