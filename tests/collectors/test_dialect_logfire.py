"""The Logfire dialect on the spans Logfire 5.4 really sends (OpenInference's LlamaIndex spans and
Logfire's own, baggage on every span, ``session.id`` scrubbed; tests/collectors/dialect_spans), and
on the scrubbed values an application's configuration makes."""

from __future__ import annotations

import json

import pytest

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.dialects.logfire import drop_scrubbed
from ragmon.collectors.span_mapping import SpanMapper
from tests.clients.expect import passage_id
from tests.collectors.dialect_spans import Capture

CAPTURE = Capture("logfire_5_4")
RETRIEVER, SECOND_RETRIEVER, ENGINE, SECOND_ENGINE, GENAI_BY_HAND = range(5)
SCRUBBED = "[Scrubbed due to 'session']"


def ids(event) -> list[list[str]]:
    return [[p["id"] for p in r["passages"]] for r in event["retrievals"]]


@pytest.mark.parametrize("n", range(len(CAPTURE)))
def test_each_question_maps_to_what_the_framework_returned(n):
    reported, spans = CAPTURE[n]
    event = SpanMapper().map(spans).event
    assert ids(event) == [[passage_id(d)[0] for d in documents] for documents in reported["lists"]]
    assert [[p.get("score") for p in r["passages"]] for r in event["retrievals"]] == [
        [d["score"] for d in documents] for documents in reported["lists"]]
    assert "context" not in event or [p["id"] for p in event["context"]] == [
        passage_id(d)[0] for d in reported["context"]]
    assert event["query"] == reported["question"]
    assert (event.get("answer") or {}).get("text") == reported["answer"]
    assert event["caller"] == {"id": reported["caller"]["id"], "groups": reported["caller"]["groups"]}
    assert event["tenant"] == "logfire" and event["index"]["name"] == "policies"
    # Logfire scrubs session.id: a scrubbed value is no conversation; gen_ai.conversation.id is kept
    assert event.get("conversation_id") == ("logfire-conversation" if reported["conversation_kept"] else None)


def test_the_scrubbed_session_reaches_ragmon_on_every_span_and_is_dropped_as_each_arrives():
    _, spans = CAPTURE[RETRIEVER]
    assert {s.attributes.get("session.id") for s in spans} == {SCRUBBED}
    dialects = Dialects()
    for span in spans:
        dialects.read(span)
        assert "session.id" not in span.attributes and "user.id" in span.attributes
    assert [dialects.reading(s).dialect.name for s in spans] == ["openinference", "openinference", "logfire"]


def test_logfire_spans_with_genai_attributes_are_read_as_genai_and_the_root_as_logfire():
    _, spans = CAPTURE[GENAI_BY_HAND]
    dialects = Dialects()
    by_name = {s.name: dialects.read(s) for s in spans}
    assert by_name["retrieval {index}"].dialect.name == "genai" and by_name["retrieval {index}"].kind == "retriever"
    assert by_name["answer {question}"].dialect.name == "logfire" and by_name["answer {question}"].kind is None


def test_a_key_scrubbed_inside_a_json_object_attribute_goes_from_the_object_only():
    attributes = {"metadata": json.dumps({"tenant": "acme", "session_key": "[Scrubbed due to 'session']"}),
                  "user.id": "u-1", "logfire.scrubbed": json.dumps([
                      {"path": ["attributes", "metadata", "session_key"], "matched_substring": "session"}])}
    drop_scrubbed(attributes)
    assert attributes["metadata"] == {"tenant": "acme"} and attributes["user.id"] == "u-1"


@pytest.mark.parametrize("listed", ["not json", json.dumps({"path": 1}), json.dumps([{"path": ["resource", "x"]}]),
                                    json.dumps([{"path": ["attributes", "user.id"]}])])
def test_odd_scrub_lists_and_values_not_scrubbed_are_left_alone(listed):
    attributes = {"user.id": "u-1", "logfire.scrubbed": listed}
    drop_scrubbed(attributes)
    assert attributes["user.id"] == "u-1"  # only a value that reads as scrubbed is removed


def test_the_roots_recorded_arguments_and_return_are_the_question_and_answer():
    # the retrieval searched a rewritten query and the model said something the app then rewrote:
    # the question is the instrumented function's argument, the answer its recorded return
    reported, spans = CAPTURE[GENAI_BY_HAND]
    root = next(s for s in spans if not s.parent_id)
    retrieval = next(s for s in spans if s.parent_id)
    retrieval.attributes["gen_ai.retrieval.query.text"] = "office opening hours"
    root.attributes["return"] = json.dumps({"answer": "Nine in the morning.", "sources": 2})
    event = SpanMapper().map(spans).event
    assert event["query"] == reported["question"] and event["answer"]["text"] == "Nine in the morning."
    _, spans = CAPTURE[GENAI_BY_HAND]  # a list is no answer
    root = next(s for s in spans if not s.parent_id)
    root.attributes["return"] = json.dumps(["a", "list"])
    assert "answer" not in SpanMapper().map(spans).event
