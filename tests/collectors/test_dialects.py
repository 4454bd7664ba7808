"""How a span is recognised as a dialect's: by its instrumentation scope, else by a marker
attribute; a trace may mix dialects; and what the closest dialect of an unread trace lacked."""

from __future__ import annotations

from ragmon.collectors.dialects import DIALECTS, MAX_CACHED_SCOPES, CallerKeys, Dialects
from ragmon.collectors.otlp_wire import Span, SpanEvent, parse_json

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
    assert nobody.dialect is None and nobody.spans == 0 and "openinference.span.kind" in nobody.lacked[0]


def test_dialect_names_are_unique_and_each_says_where_it_looks_for_a_caller():
    names = [d.name for d in DIALECTS]
    assert len(set(names)) == len(names) and "application" not in names
    assert all(d.caller_places for d in DIALECTS)


def test_the_caller_keys_of_association_properties_are_configurable():
    from ragmon.collectors.span_mapping import SpanMapper

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
