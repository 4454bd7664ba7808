"""How a span is recognised as a dialect's: by its instrumentation scope, else by a marker
attribute; a trace may mix dialects; and what the closest dialect of an unread trace lacked."""

from __future__ import annotations

import json

from ragmon.collectors.dialects import DIALECTS, MAX_CACHED_SCOPES, CallerKeys, Dialects
from ragmon.collectors.otlp_wire import Span, SpanEvent, parse_json
from ragmon.collectors.span_mapping import SpanMapper
from tests.collectors.dialect_spans import Capture

T = "b" * 32


def span(n: int, scope: str = "", **attributes) -> Span:
    return Span(T, f"{n:016x}", "", "s", 0, 1, {k.replace("__", "."): v for k, v in attributes.items()}, scope=scope)


def test_the_scope_names_the_dialect_before_any_marker():
    dialects = Dialects()
    # an OpenInference scope: its dialect even on a span without its marker
    assert dialects.read(span(1, "openinference.instrumentation.llama_index")).dialect.name == "openinference"
    # a vector store's scope names its dialect, whatever markers the span also carries
    chroma = span(2, "opentelemetry.instrumentation.chromadb", db__system="chroma", db__operation="query",
                  gen_ai__operation__name="chat")
    assert dialects.read(chroma).dialect.name == "vector_store"
    # the application's own tracer: the marker decides
    assert dialects.read(span(3, "rag-app", gen_ai__operation__name="chat")).dialect.name == "genai"
    assert dialects.read(span(4, "rag-app", user__id="u")).dialect.name == "application"


def test_a_span_carrying_two_dialects_markers_is_read_by_the_one_that_finds_a_list():
    both = span(1, "rag-app", openinference__span__kind="CHAIN", gen_ai__operation__name="retrieval",
                gen_ai__retrieval__documents=[{"id": "d1"}])
    reading = Dialects().read(both)
    assert (reading.kind, reading.dialect.name, [d.id for d in reading.documents]) == ("retriever", "genai", ["d1"])


def test_the_scope_arrives_with_the_span_on_the_wire():
    body = (b'{"resourceSpans": [{"scopeSpans": [{"scope": {"name": "openinference.instrumentation.dspy", '
            b'"version": "0.1.48"}, "spans": [{"traceId": "' + T.encode() + b'", "spanId": "0000000000000001", '
            b'"name": "Retrieve.forward"}]}]}]}')
    [parsed] = parse_json(body)
    assert (parsed.scope, parsed.scope_version) == ("openinference.instrumentation.dspy", "0.1.48")


def test_the_cache_of_scope_names_is_bounded():
    dialects = Dialects()
    for n in range(MAX_CACHED_SCOPES + 50):
        dialects.by_scope(f"made-up.scope.{n}")
    assert len(dialects._by_scope) == MAX_CACHED_SCOPES
    assert dialects.by_scope("openinference.instrumentation.langchain").name == "openinference"  # not cached, found


def test_the_closest_dialect_of_an_unread_trace_and_what_it_lacked():
    dialects = Dialects()
    chains = [span(1, "openinference.instrumentation.llama_index", openinference__span__kind="CHAIN"),
              span(2, "openinference.instrumentation.llama_index", openinference__span__kind="LLM"),
              span(3, "rag-app", gen_ai__operation__name="chat")]
    closest = dialects.closest(chains)
    assert (closest.dialect, closest.spans) == ("openinference", 2)
    assert closest.lacked == ("a span of openinference.span.kind RETRIEVER or RERANKER",)
    rows = span(4, "opentelemetry.instrumentation.milvus", db__system="milvus", db__operation="query")
    rows.events = [SpanEvent("db.query.result", 0, {"id": 3})]
    assert dialects.closest([rows]).dialect == "vector_store"
    nobody = dialects.closest([span(5, "rag-app", user__id="u")])
    assert nobody.dialect is None and nobody.spans == 0
    assert nobody.lacked == ("a span of a known instrumentation scope or with one of openinference.span.kind, "
                             "traceloop.span.kind, mlflow.spanType, langfuse.observation.type, "
                             "gen_ai.operation.name, db.system, db.system.name",)


def test_dialect_names_are_unique_and_each_says_where_it_looks_for_a_caller():
    names = [d.name for d in DIALECTS]
    assert len(set(names)) == len(names) and "application" not in names
    assert all(d.caller_places for d in DIALECTS)


def test_the_caller_keys_of_association_properties_are_configurable():
    a = "traceloop.association.properties."

    def root() -> Span:
        workflow = span(1, "traceloop.tracer", traceloop__span__kind="workflow", ragmon__context__document_ids=["d"])
        workflow.attributes.update({f"{a}customer_id": "acme", f"{a}org": "initech", f"{a}user_id": "u-1",
                                    f"{a}groups": "staff, hr"})
        return workflow

    assert SpanMapper().map([root()]).event["tenant"] == "acme"  # Traceloop's documented customer_id
    event = SpanMapper(dialects=Dialects(CallerKeys(tenant=("org",)))).map([root()]).event
    assert event["tenant"] == "initech" and event["caller"] == {"id": "u-1", "groups": ["staff", "hr"]}


def test_caller_keys_in_the_config_are_checked(monkeypatch):
    import pytest

    from ragmon.monitor.config.settings import load_settings

    monkeypatch.setenv("RAGMON_OTLP__CALLER_KEYS", '{"tenant": ["org"], "teams": ["x"]}')
    with pytest.raises(Exception, match="unknown kind teams"):
        load_settings(None)
    monkeypatch.setenv("RAGMON_OTLP__CALLER_KEYS", '{"tenant": ["org"]}')
    assert load_settings(None).otlp.caller_keys == {"tenant": ["org"]}


def test_langfuse_metadata_written_as_plain_strings_reads_as_its_json_text():
    """Langfuse's SDKs before 5 wrote a metadata string as it is (``_serialize``), 5 writes every value
    as JSON text: the same trace maps the same either way (tenant, index, caller, list names)."""
    capture = Capture("langfuse_5_2")

    def seen(event) -> tuple:
        return (event["tenant"], event["index"], event.get("caller"),
                [r["retriever"] for r in event["retrievals"]])

    plain_strings = 0
    for n in range(len(capture)):
        _, spans = capture[n]
        expected = seen(SpanMapper().map(spans).event)
        _, spans = capture[n]
        for s in spans:
            for key, value in s.attributes.items():
                if key.startswith(("langfuse.trace.metadata.", "langfuse.observation.metadata.")) \
                        and isinstance(value, str) and value.startswith('"'):
                    s.attributes[key] = json.loads(value)
                    plain_strings += 1
        assert seen(SpanMapper().map(spans).event) == expected
    assert plain_strings > 0


def test_mlflow_trace_tags_are_taken_as_written_even_when_they_read_as_json():
    """Trace tags are plain strings: a hex session id of digits and one ``e`` is no number, a user
    id ``1.10`` is not ``1.1``."""
    _, spans = Capture("mlflow_3_17")[4]  # @mlflow.trace functions: the root carries the tags
    root = next(s for s in spans if not s.parent_id)
    for key in ("user.id", "session.id", "metadata"):
        root.attributes.pop(key, None)
    root.attributes.update({"mlflow.traceTag.user_id": "1.10", "mlflow.traceTag.session_id": "4e21",
                            "mlflow.traceTag.groups": '["staff", "hr"]'})  # groups as JSON text: a list
    event = SpanMapper().map(spans).event
    assert event["caller"] == {"id": "1.10", "groups": ["staff", "hr"]} and event["conversation_id"] == "4e21"
    # JSON text may begin with white space (RFC 8259's ws), a value pasted from a file or a template
    root.attributes["mlflow.traceTag.groups"] = '\n ["staff", "hr"]'
    assert SpanMapper().map(spans).event["caller"] == {"id": "1.10", "groups": ["staff", "hr"]}


def test_of_two_dialects_claiming_as_many_spans_the_closest_is_the_first_asked():
    # a Qdrant search (OpenLLMetry records no results) and a GenAI chat span: one span each
    search = span(1, "opentelemetry.instrumentation.qdrant", db__system="qdrant", db__operation="query_points")
    chat = span(2, "opentelemetry.instrumentation.openai_v2", gen_ai__operation__name="chat")
    for spans in ([search, chat], [chat, search]):
        closest = Dialects().closest(spans)
        assert (closest.dialect, closest.spans, closest.lacked) == ("genai", 1, ("a span of gen_ai.operation.name "
                                                                                 "retrieval",))


def test_a_dialect_that_says_nothing_of_what_it_lacked_says_it_lacked_retrieved_documents():
    from ragmon.collectors.dialects.base import Dialect

    class Acme(Dialect):  # a dialect added without its own explanation
        name = "acme"
        markers = ("acme.kind",)

    closest = Dialects(dialects=(Acme,)).closest([span(1, "acme-sdk", acme__kind="step")])
    assert (closest.dialect, closest.lacked) == ("acme", ("a span that reports retrieved documents",))


def oi_retriever(n: int, **attributes) -> Span:
    found = span(n, "openinference.instrumentation.langchain", openinference__span__kind="RETRIEVER", **attributes)
    found.attributes.update({"retrieval.documents.0.document.id": "a"})
    return found


def test_the_applications_metadata_names_the_retriever_before_the_instrumentation():
    mapper = SpanMapper()
    named = oi_retriever(1, metadata='{"retriever": "hr-search", "ls_retriever_name": "bm25"}')
    assert mapper.map([named]).event["retrievals"][0]["retriever"] == "hr-search"
    unnamed = oi_retriever(1, metadata='{"retriever": "", "ls_retriever_name": "bm25"}')
    assert mapper.map([unnamed]).event["retrievals"][0]["retriever"] == "bm25"


def test_the_turn_is_a_whole_number_from_1_to_max_turn():
    from ragmon.monitor.core.model import MAX_TURN

    def read(turn) -> tuple:
        found = oi_retriever(1, metadata=json.dumps({"turn": turn}))
        reading = Dialects().read(found)
        return SpanMapper().map([found]).event.get("turn"), reading.problems

    assert read(1) == (1, [])
    assert read(2.0) == (2, [])  # a number that is whole, as JSON from a language without integers sends it
    assert read(MAX_TURN) == (MAX_TURN, [])
    assert read(MAX_TURN + 1)[0] is None and read(MAX_TURN + 1)[1] == [
        ("metadata", f"`metadata.turn` is not a whole number from 1 to {MAX_TURN}")]
    assert read(0)[0] is None and read(1.5)[0] is None


def test_an_index_in_the_metadata_that_is_no_text_names_no_index():
    # the application's metadata object is its own JSON: an index given as a number or an object is no
    # name, and the index falls back to index_name
    for index in (2, {"name": "hr-policies"}):
        found = oi_retriever(1, metadata=json.dumps({"index": index, "index_name": "hr-policies"}))
        assert SpanMapper().map([found]).event["index"] == {"name": "hr-policies"}


def test_the_index_in_association_properties_names_the_index():
    # Traceloop.set_association_properties({"user_id", ..., "index"}) puts it on every span
    found = oi_retriever(1, **{"traceloop.association.properties.index": "hr-policies",
                               "traceloop.association.properties.user_id": "u-1"})
    event = SpanMapper().map([found]).event
    assert event["index"] == {"name": "hr-policies"} and event["caller"]["id"] == "u-1"
