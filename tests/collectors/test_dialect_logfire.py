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


@pytest.mark.parametrize("listed", [
    json.dumps([{"matched_substring": "session"}]), json.dumps(["session.id"]), json.dumps([{"path": ["attributes"]}]),
    json.dumps([{"path": "attributes.user.id"}])])
def test_scrub_notes_without_a_path_to_an_attribute_are_left_alone(listed):
    # not Logfire's notes (each names a path from "attributes", "otel_events" or "links"): the list is the sender's
    attributes = {"user.id": "u-1", "session.id": SCRUBBED, "logfire.scrubbed": listed}
    drop_scrubbed(attributes)
    assert attributes["user.id"] == "u-1" and attributes["session.id"] == SCRUBBED


def test_every_scrubbed_value_the_notes_list_goes_whatever_comes_before_it():
    # Logfire notes the paths it scrubbed in the order it walks the span, appending each pass's notes to those
    # already on it; a value inside a list is noted by its index, a value in an event under otel_events
    metadata = {"requests": [{"headers": {"cookie": "[Scrubbed due to 'cookie']"}}], "tenant": "acme",
                "caller": {"session": "[Scrubbed due to 'session']", "team": "hr"},
                "session_key": "[Scrubbed due to 'session']", "api_key": "[Scrubbed due to 'api_key']"}
    attributes = {"history": json.dumps(["hello", "[Scrubbed due to 'session']"]), "metadata": json.dumps(metadata),
                  "session.id": SCRUBBED, "user.id": "u-1", "logfire.scrubbed": json.dumps([
                      {"path": ["otel_events", 0, "attributes", "exception.message"], "matched_substring": "secret"},
                      {"path": ["attributes", "session.id"], "matched_substring": "session"},
                      {"path": ["attributes", "history", 1], "matched_substring": "session"},
                      {"path": ["attributes", "metadata", "requests", 0, "headers", "cookie"],
                       "matched_substring": "cookie"},
                      {"path": ["attributes", "metadata", "caller", "session"], "matched_substring": "session"},
                      {"path": ["attributes", "metadata", "session_key"], "matched_substring": "session"},
                      {"path": ["attributes", "metadata", "api_key"], "matched_substring": "api_key"}])}
    drop_scrubbed(attributes)
    assert "session.id" not in attributes and attributes["user.id"] == "u-1"
    kept = attributes["metadata"]
    assert kept["tenant"] == "acme" and kept["caller"] == {"team": "hr"}
    assert "session_key" not in kept and "api_key" not in kept


@pytest.mark.parametrize(("returned", "answer"), [
    ("5", "5"),  # text that reads as JSON is still the text the function returned
    ("[1] The office opens at nine.", "[1] The office opens at nine."),  # a citation marker first, not a list
    ("{name} opens at nine.", "{name} opens at nine."),  # a brace first, not an object
    ("", None),  # an empty string is no answer
])
def test_a_returned_string_is_the_answer_as_it_is(returned, answer):
    _, spans = CAPTURE[GENAI_BY_HAND]
    root = next(s for s in spans if not s.parent_id)
    root.attributes["return"] = returned
    assert (SpanMapper().map(spans).event.get("answer") or {}).get("text") == answer


def test_an_unread_logfire_trace_is_explained_by_what_logfire_lacked():
    _, spans = CAPTURE[GENAI_BY_HAND]
    spans = [s for s in spans if not s.parent_id]  # the instrumented function without its retrieval span
    mapper = SpanMapper()
    assert mapper.map(spans).event is None
    closest = mapper.dialects.closest(spans)
    assert (closest.dialect, closest.spans) == ("logfire", 1)
    assert closest.lacked == ("Logfire's own spans list no documents: a span of an instrumentation it runs "
                              "(OpenInference, OpenLLMetry) or with gen_ai.operation.name retrieval",)
