"""OTLP: spans from the real opentelemetry-sdk, in OpenInference and GenAI shape, through the real
OTLP/HTTP exporters (protobuf and JSON) to a running server; assembly across requests; every
answer status."""

from __future__ import annotations

import gzip
import json
import time

import msgspec
import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.emitter import Emitter, OpenInferenceTransport
from ragmon.collectors.http import build_app
from ragmon.collectors.otlp import AssemblerFull, OtlpReceiver, TraceAssembler
from ragmon.collectors.otlp_wire import Span, parse_json, parse_protobuf
from ragmon.collectors.span_mapping import SpanMapper
from ragmon.monitor.app.wiring import build_otlp, build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.memory import MemorySink
from ragmon.monitor.core.model import FeedbackEvent, TraceEvent
from tests.ragmon_process import served_in_thread

NOW = time.time()


def trace_event(spans: list[Span]) -> dict:
    return SpanMapper().map(spans).event


def full_trace(emitter: Emitter) -> str:
    trace = emitter.start_trace("How many vacation days carry over?", index="policies", caller="u-123",
                                groups=["staff", "hr"], tenant="acme", conversation="c-77", index_version="2026-11-28",
                                turn=2)
    trace.add_retrieval("bm25", [{"id": "leave#4", "score": 12.5, "doc_id": "leave", "doc_version": "3"},
                                 {"id": "travel#1", "score": 7.25}])
    trace.add_retrieval("vector", [{"id": "leave#4", "score": 0.82}], query="vacation days carry-over rules")
    trace.set_context([{"id": "leave#4", "score": 0.91, "doc_id": "leave", "doc_version": "3", "span": [1200, 1680],
                        "text": "Up to five days carry over.", "acl": ["group:staff"], "indexed_at": NOW - 86400,
                        "embedding_model": "e5-large-v2@2"}])
    trace.set_answer("Five days.", abstained=False, citations=["leave#4"])
    trace.set_latency(retrieve=40, rerank=12, generate=800, total=900)
    trace.set_usage(input_tokens=1200, output_tokens=80)
    return trace.end()


def in_memory_provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_openinference_spans_from_the_emitter_map_back_to_the_trace():
    provider, exporter = in_memory_provider()
    emitter = Emitter(OpenInferenceTransport(provider), clock=lambda: NOW)
    trace_id = full_trace(emitter)
    spans = parse_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString())
    assert {s.trace_id for s in spans} == {trace_id}
    event = trace_event(spans)
    assert event["trace_id"] == trace_id and event["time"] == pytest.approx(NOW, abs=1e-6)
    assert (event["tenant"], event["query"], event["index"]) == (
        "acme", "How many vacation days carry over?", {"name": "policies", "version": "2026-11-28"})
    assert event["caller"] == {"id": "u-123", "groups": ["staff", "hr"]}
    assert (event["conversation_id"], event["turn"]) == ("c-77", 2)
    # the list that searched a rewrite says what; the others searched the user's message
    assert [r.get("query") for r in event["retrievals"]] == [None, "vacation days carry-over rules", None]
    lists = [(r["retriever"], [(p["id"], p.get("score")) for p in r["passages"]]) for r in event["retrievals"]]
    assert lists == [("bm25", [("leave#4", 12.5), ("travel#1", 7.25)]), ("vector", [("leave#4", 0.82)]),
                     ("reranker", [("leave#4", 0.91)])]
    context = event["retrievals"][-1]["passages"][0]  # the reranked list is the last: the context
    assert context["acl"] == ["group:staff"] and context["span"] == [1200, 1680]
    assert context["text"] == "Up to five days carry over." and context["embedding_model"] == "e5-large-v2@2"
    assert event["answer"] == {"text": "Five days.", "citations": ["leave#4"], "abstained": False}
    assert event["usage"] == {"input_tokens": 1200, "output_tokens": 80}
    assert event["latency_ms"]["total"] == 900


def test_genai_retrieval_and_chat_spans_map_to_a_trace():
    provider, exporter = in_memory_provider()
    tracer = provider.get_tracer("app")
    start = int(NOW * 1e9)
    from opentelemetry import trace as otel

    root = tracer.start_span("answer", start_time=start, attributes={"user.id": "u-9",
                                                                     "gen_ai.conversation.id": "conv-1"})
    context = otel.set_span_in_context(root)
    tracer.start_span("retrieval kb", context=context, start_time=start, attributes={
        "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "support-kb",
        "gen_ai.retrieval.query.text": "reset my password",
        "gen_ai.retrieval.documents": json.dumps([{"id": "kb-1#2", "score": 0.77}, {"id": "kb-9#0", "score": 0.41}]),
    }).end(end_time=start + 30_000_000)
    tracer.start_span("chat gpt", context=context, start_time=start + 30_000_000, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 20,
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                                               "content": "Use the reset link."}]}]),
    }).end(end_time=start + 530_000_000)
    root.end(end_time=start + 600_000_000)
    event = trace_event(parse_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()))
    assert event["index"] == {"name": "support-kb"} and event["query"] == "reset my password"
    assert event["caller"] == {"id": "u-9", "groups": []} and event["conversation_id"] == "conv-1"
    assert event["retrievals"] == [{"retriever": "retrieval kb", "passages": [{"id": "kb-1#2", "score": 0.77},
                                                                              {"id": "kb-9#0", "score": 0.41}]}]
    assert event["answer"] == {"text": "Use the reset link.", "citations": []}
    assert event["usage"] == {"input_tokens": 300, "output_tokens": 20}
    assert event["latency_ms"] == {"retrieve": 30.0, "generate": 500.0, "total": 600.0}


def test_json_ids_are_hex_and_values_typed():
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},
                               "scopeSpans": [{"spans": [{
                                   "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                                   "name": "retrieve", "startTimeUnixNano": "1796000000000000000",
                                   "endTimeUnixNano": "1796000000100000000",
                                   "attributes": [{"key": "n", "value": {"intValue": "42"}},
                                                  {"key": "l", "value": {"arrayValue": {"values": [
                                                      {"stringValue": "x"}, {"doubleValue": 1.5}]}}}]}]}]}]}
    [span] = parse_json(json.dumps(body).encode())
    assert span.trace_id == "5b8efff798038103d269b633813fc60c" and span.span_id == "eee19b7ec3c1b174"
    assert span.attributes == {"n": 42, "l": ["x", 1.5]} and span.resource == {"service.name": "a"}
    assert span.duration_ms == 100.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def spans_of(trace_hex: str, n: int):
    return [Span(trace_hex, f"{i:016x}", "", "s", 0, 1) for i in range(n)]


def test_the_assembler_waits_for_quiet_traces_and_keeps_its_bounds():
    clock = FakeClock()
    assembler = TraceAssembler(wait=5.0, max_traces=2, max_spans=3, clock=clock)
    assert assembler.add(spans_of("a" * 32, 2)) == 0
    clock.now = 3.0
    assert assembler.add(spans_of("a" * 32, 2)) == 1  # the fourth span of a trace is over the bound
    clock.now = 4.0
    assert assembler.add(spans_of("b" * 32, 1)) == 0
    with pytest.raises(AssemblerFull):
        assembler.add(spans_of("c" * 32, 1))
    clock.now = 7.9
    assert assembler.due() == []  # trace a was touched at 3.0: quiet only from 8.0
    clock.now = 8.0
    [ready] = assembler.due()
    assert len(ready) == 3 and len(assembler) == 1
    assert [len(t) for t in assembler.due(everything=True)] == [1]


def test_the_assembler_holds_at_most_its_bytes_of_spans():
    clock = FakeClock()
    assembler = TraceAssembler(wait=5.0, max_traces=100, max_spans=100, clock=clock, max_bytes=1000)
    assert assembler.add(spans_of("a" * 32, 10), wire_bytes=600) == 0
    with pytest.raises(AssemblerFull, match="otlp.max_pending_bytes"):
        assembler.add(spans_of("b" * 32, 1), wire_bytes=600)  # refused whole: nothing of it is held
    assert len(assembler) == 1
    clock.now = 6.0
    assert [len(t) for t in assembler.due()] == [10]  # delivered: its bytes are free again
    assert assembler.add(spans_of("b" * 32, 1), wire_bytes=600) == 0


def test_a_body_over_the_bytes_left_is_refused_before_it_is_read(monkeypatch):
    """Full by the bytes held, the receiver answers 503 without parsing the body or reading its
    spans: a client retrying it while the assembler stays full costs next to nothing."""
    import ragmon.collectors.otlp as otlp

    assembler = TraceAssembler(wait=5.0, max_traces=100, max_spans=100, clock=FakeClock(), max_bytes=1000)
    assert assembler.refuses(1000) is None
    assert assembler.add(spans_of("a" * 32, 10), wire_bytes=600) == 0
    assert assembler.refuses(400) is None and "otlp.max_pending_bytes" in assembler.refuses(401)
    parsed = []
    monkeypatch.setattr(otlp, "parse_protobuf", lambda body: parsed.append(body) or [])
    receiver = OtlpReceiver(assembler, lambda records, events: None)
    refused = receiver.receive(b"\x00" * 401, "application/x-protobuf")
    assert (refused.status, refused.headers, parsed) == (503, {"Retry-After": "2"}, [])
    assert b"otlp.max_pending_bytes" in refused.body
    assert receiver.receive(b"\x00" * 400, "application/x-protobuf").status == 200 and len(parsed) == 1


def test_a_trace_whose_root_span_arrived_waits_only_the_root_grace():
    clock = FakeClock()
    assembler = TraceAssembler(wait=5.0, max_traces=10, max_spans=10, clock=clock, root_grace=1.0)
    child = lambda trace, n: Span(trace, f"{n:016x}", "f" * 16, "child", 0, 1)  # noqa: E731
    root = lambda trace: Span(trace, "f" * 16, "", "root", 0, 2)  # noqa: E731
    assembler.add([child("a" * 32, 1), child("b" * 32, 1)])
    clock.now = 0.5
    assembler.add([root("a" * 32)])  # a is complete: its root came
    assembler.add([child("c" * 32, 1)])
    clock.now = 1.4
    assert assembler.due() == []
    clock.now = 1.5
    [ready] = assembler.due()  # a, although b (no root yet) is older
    assert {s.span_id for s in ready} == {"f" * 16, f"{1:016x}"} and ready[0].trace_id == "a" * 32
    clock.now = 5.0
    assert [t[0].trace_id for t in assembler.due()] == ["b" * 32]  # rootless: the full wait
    assert [t[0].trace_id for t in assembler.due(everything=True)] == ["c" * 32]
    capped = TraceAssembler(wait=0.5, max_traces=10, max_spans=10, clock=clock, root_grace=1.0)
    capped.add([child("d" * 32, 1)])
    clock.now += 0.5
    assert len(capped.due()) == 1  # the grace never exceeds the wait


def test_attribute_values_of_any_type_map_without_an_error():
    root = Span("a" * 32, "1" * 16, "", "rag", 0, 10**9, {
        "openinference.span.kind": "CHAIN", "input.value": "q", "output.value": "a",
        "metadata": '{"citations": 3, "groups": "g", "tenant": {"x": 1}, "abstained": "no"}'})
    llm = Span("a" * 32, "2" * 16, "1" * 16, "llm", 0, 10**9, {
        "openinference.span.kind": "LLM", "llm.token_count.prompt": "many", "llm.token_count.completion": float("nan"),
        "gen_ai.usage.output_tokens": float("inf"), "gen_ai.output.messages": '[{"parts": 5}, 3, null]'})
    chat = Span("a" * 32, "3" * 16, "1" * 16, "chat", 0, 10**9, {
        "gen_ai.operation.name": "chat", "gen_ai.output.messages": "[" * 100_000 + "]" * 100_000})
    retriever = Span("a" * 32, "4" * 16, "1" * 16, "retrieve", 0, 10**9, {
        "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": ["x"],
        "retrieval.documents.0.document.score": "high", "retrieval.documents.0.document.content": 7,
        "retrieval.documents.0.document.metadata": '{"acl": 5, "span": [3, 1], "doc_id": {}, "indexed_at": "soon"}',
        "retrieval.documents.1.document.metadata": "not json", "ragmon.context.document_ids": "p1"})
    event = trace_event([root, llm, chat, retriever])
    assert event["answer"]["citations"] == [] and "caller" not in event and "usage" not in event
    # nothing names the first document (a list is no id, 7 is no content) nor the second: both left out
    assert event["retrievals"] == [{"retriever": "retrieve", "passages": []}] and "context" not in event


def test_a_trace_the_mapping_fails_on_is_dead_lettered_and_delivery_goes_on(tmp_path):
    from ragmon.collectors.files import read_dead_letters
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")})
    runtime = build_runtime(settings, registry=CollectorRegistry())

    class Fragile(SpanMapper):
        def map(self, spans):
            if spans[0].trace_id == "b" * 32:
                raise TypeError("cannot map 'secret query'")
            return super().map(spans)

    clock = FakeClock()
    receiver = OtlpReceiver(TraceAssembler(1.0, 10, 10, clock=clock), lambda r, e: runtime.pipeline.process(r),
                            mapper=Fragile())
    root = lambda trace: Span(trace, "f" * 16, "", "rag", 10**18, 10**18 + 1, {  # noqa: E731
        "input.value": "q", "openinference.span.kind": "RETRIEVER"})
    receiver._assembler.add([root("a" * 32), root("b" * 32), root("c" * 32)])
    clock.now = 2.0
    receiver._flush()
    accepted, rejected = runtime.pipeline.stats.snapshot()
    assert accepted == {("otlp", "trace"): 2} and rejected == {("otlp", "missing_field"): 1}
    [letter] = read_dead_letters(tmp_path / "dead.jsonl")
    assert "TypeError: cannot map" in letter["text"]
    runtime.close()


@pytest.fixture
def server(tmp_path):
    """`ragmon serve`'s app in this process (uvicorn in a thread), with a memory sink to look at."""
    settings = load_settings(environ={
        "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
        "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
        "RAGMON_OTLP__ASSEMBLY_WAIT_SECONDS": "0.5",
    })
    sink = MemorySink()
    runtime = build_runtime(settings, registry=CollectorRegistry(), extra_sinks=[sink])
    otlp = build_otlp(runtime)
    app = build_app(runtime.pipeline.process, runtime.registry, runtime.ready, otlp=otlp,
                    on_startup=otlp.start, on_shutdown=lambda: (otlp.shutdown(10), runtime.close()))
    with served_in_thread(app) as url:
        yield url, sink


def traces_seen(sink: MemorySink, at_least: int = 0, timeout: float = 10) -> dict[str, TraceEvent]:
    """The traces ``sink`` received, once there are ``at_least`` of them (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {o.event.trace_id: o.event for o in sink.observations if isinstance(o.event, TraceEvent)}
        if len(seen) >= at_least or time.monotonic() >= deadline:
            return seen
        time.sleep(0.1)


@pytest.mark.parametrize("exporter_class", [ProtobufSpanExporter, JsonSpanExporter], ids=["protobuf", "json"])
def test_the_sdk_exporters_deliver_traces_split_across_requests(server, exporter_class):
    url, sink = server
    provider = TracerProvider()
    # one request per span: every trace arrives in several requests and must be assembled
    provider.add_span_processor(SimpleSpanProcessor(exporter_class(endpoint=f"{url}/v1/traces")))
    emitter = Emitter(OpenInferenceTransport(provider), clock=lambda: NOW)
    ids = [full_trace(emitter) for _ in range(3)]
    emitter.feedback(ids[0], "thumb", "down")
    provider.force_flush()
    seen = traces_seen(sink, at_least=3)
    assert set(seen) == set(ids)
    event = seen[ids[0]]
    assert [r.retriever for r in event.retrievals] == ["bm25", "vector", "reranker"]
    assert event.caller.id == "u-123" and event.answer.citations == ["leave#4"]
    assert [o.source for o in sink.observations if o.event.trace_id in ids][0] == "otlp"
    feedback = [o.event for o in sink.observations if isinstance(o.event, FeedbackEvent)]
    assert [(f.trace_id, f.kind, f.value) for f in feedback] == [(ids[0], "thumb", "down")]
    assert feedback[0] and sink.observations[-1].signals is not None
    provider.shutdown()


def test_the_transport_of_its_own_makes_and_exports_its_spans_with_the_sdk(server):
    url, sink = server
    transport = OpenInferenceTransport.otlp(f"{url}/v1/traces", service_name="rag-app")
    assert type(transport._provider).__module__ == "opentelemetry.sdk.trace"
    emitter = Emitter(transport, clock=lambda: NOW)
    ids = [full_trace(emitter) for _ in range(2)]
    emitter.feedback(ids[1], "thumb", "up")
    transport.shutdown()  # what the batch processor holds is exported first
    seen = traces_seen(sink, at_least=2)
    assert set(seen) == set(ids)
    event = seen[ids[0]]
    assert [(r.retriever, [p.id for p in r.passages]) for r in event.retrievals] == [
        ("bm25", ["leave#4", "travel#1"]), ("vector", ["leave#4"]), ("reranker", ["leave#4"])]
    assert (event.tenant, event.query, event.caller.id, event.caller.groups, event.conversation_id) == (
        "acme", "How many vacation days carry over?", "u-123", ["staff", "hr"], "c-77")
    assert event.answer.citations == ["leave#4"] and event.usage.input_tokens == 1200
    feedback = [o.event for o in sink.observations if isinstance(o.event, FeedbackEvent)]
    assert [(f.trace_id, f.kind, f.value) for f in feedback] == [(ids[1], "thumb", "up")]


def test_the_transport_of_its_own_names_the_extra_it_needs(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if the SDK were not installed
    with pytest.raises(ImportError, match=r"no module 'opentelemetry\.sdk\.trace'.*pip install 'ragmon\[otel\]'"):
        OpenInferenceTransport.otlp("http://127.0.0.1:9/v1/traces")


def test_error_statuses(tmp_path):
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'r.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "d.jsonl")})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    receiver = OtlpReceiver(TraceAssembler(5.0, max_traces=1, max_spans=2), lambda r, e: runtime.pipeline.process(r))
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready, otlp=receiver,
                                  max_body_bytes=20_000, token="t0ken"))
    auth = {"authorization": "Bearer t0ken"}
    provider, exporter = in_memory_provider()
    full_trace(Emitter(OpenInferenceTransport(provider)))
    body = encode_spans(exporter.get_finished_spans()).SerializeToString()
    protobuf = {**auth, "content-type": "application/x-protobuf"}

    unauthorized = client.post("/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
    assert unauthorized.status_code == 401
    assert client.post("/v1/traces", content=b"\xff\xff\xff\xff", headers=protobuf).status_code == 400
    assert client.post("/v1/traces", content=b"{not json", headers={**auth, "content-type": "application/json"}
                       ).status_code == 400
    assert client.post("/v1/traces", content=body, headers={**auth, "content-type": "text/plain"}).status_code == 415
    # a browser on another site's page, even holding the token: refused before anything is read
    assert client.post("/v1/traces", content=body, headers={**protobuf, "origin": "https://evil.example"}
                       ).status_code == 403
    assert client.post("/v1/traces", content=b"\x00" * 30_000, headers=protobuf).status_code == 413
    # five spans of one trace, two kept: 200 with partial success
    partial = client.post("/v1/traces", content=gzip.compress(body), headers={**protobuf, "content-encoding": "gzip"})
    assert partial.status_code == 200
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    answer = ExportTraceServiceResponse.FromString(partial.content)
    assert answer.partial_success.rejected_spans == 3 and "limit" in answer.partial_success.error_message
    # a second trace while the one slot is taken: 503 with Retry-After
    provider2, exporter2 = in_memory_provider()
    full_trace(Emitter(OpenInferenceTransport(provider2)))
    full = client.post("/v1/traces", content=encode_spans(exporter2.get_finished_spans()).SerializeToString(),
                       headers=protobuf)
    assert full.status_code == 503 and full.headers["retry-after"] == "2"
    # the JSON answer names partial success the JSON way
    json_body = msgspec.json.encode({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "00000000000000000000000000000000", "spanId": "0000000000000001", "name": "bad"}]}]}]})
    answered = client.post("/v1/traces", content=json_body, headers={**auth, "content-type": "application/json"})
    assert answered.status_code == 200 and answered.json()["partialSuccess"]["rejectedSpans"] == "1"
    runtime.close()


def test_genai_spans_made_directly_with_the_sdk_arrive_over_http(server):
    url, sink = server

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ProtobufSpanExporter(endpoint=f"{url}/v1/traces")))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("answer", attributes={"enduser.id": "u-5"}) as root:
        with tracer.start_as_current_span("retrieval", attributes={
                "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "handbook",
                "gen_ai.retrieval.query.text": "on-call rotation",
                "gen_ai.retrieval.documents": json.dumps([{"id": "hb-3#1", "score": 0.66}])}):
            pass
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat",
                                                              "gen_ai.usage.input_tokens": 90}):
            pass
    trace_id = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    deadline = time.monotonic() + 10
    while trace_id not in traces_seen(sink) and time.monotonic() < deadline:
        time.sleep(0.1)
    event = traces_seen(sink)[trace_id]
    assert (event.index.name, event.query, event.caller.id) == ("handbook", "on-call rotation", "u-5")
    assert [(p.id, p.score) for p in event.retrievals[0].passages] == [("hb-3#1", 0.66)]
    assert event.answer is None and event.usage.input_tokens == 90  # no answer text: outcome unknown
    provider.shutdown()


def test_unreadable_attributes_are_named_per_span_and_counted_and_a_trace_without_retrieval_is_only_counted(
        tmp_path):
    from ragmon.exporters.prometheus import metric_sum

    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'r.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "d.jsonl")})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    otlp = build_otlp(runtime)
    provider, exporter = in_memory_provider()
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": "q",
                                                         "metadata": "{broken"}), \
            tracer.start_as_current_span("retrieve", attributes={
                "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.score": "very", "retrieval.documents.1.document.id": "d2",
                "retrieval.documents.1.document.metadata": '{"acl": 7}'}):
        pass
    with tracer.start_as_current_span("SentenceSplitter._parse_nodes", attributes={"openinference.span.kind": "CHAIN"}):
        pass
    spans = exporter.get_finished_spans()
    answer = otlp.receive(encode_spans(spans).SerializeToString(), "application/x-protobuf")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    partial = ExportTraceServiceResponse.FromString(answer.body).partial_success
    assert answer.status == 200 and partial.rejected_spans == 0
    retrieve_id = format(spans[0].context.span_id, "016x")
    assert f"span {retrieve_id}: `retrieval.documents.0.document.score` is not a finite number" in partial.error_message
    assert "`retrieval.documents.1.document.metadata`: `acl` has a value of the wrong kind" in partial.error_message
    assert "`metadata` is not a JSON object" in partial.error_message and "very" not in partial.error_message
    count = lambda name, **labels: metric_sum(runtime.registry, name, **labels)  # noqa: E731
    assert [count("ragmon_malformed_span_attributes_total", attribute=a)
            for a in ("document.score", "document.metadata", "metadata")] == [1, 1, 1]
    otlp.shutdown(5)  # delivers what is assembled
    accepted, rejected = runtime.pipeline.stats.snapshot()
    assert accepted == {("otlp", "trace"): 1} and rejected == {}  # the trace kept; the ingestion run not processed
    assert count("ragmon_otlp_traces_without_retrieval_total") == 1
    runtime.close()
