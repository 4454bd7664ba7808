"""Fuzzing the ingest: 100k mutated events (truncated, wrong types, huge strings, deep nesting,
invalid UTF-8, NaN, future times, flipped bytes, ...) through `/v1/events` and through a Kafka
topic, 100k mutated traces as OpenInference spans through `/v1/traces`, and mutated OTLP request
bodies. No crash, no hang, no 5xx; every event accounted for as accepted or dead-lettered with a
closed-enum reason (or, for spans without a valid trace id, refused in the OTLP answer)."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import time
import uuid
from collections import Counter, deque
from concurrent.futures import ProcessPoolExecutor

import msgspec
import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.http import build_app
from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.simulate import Simulator
from ragmon.monitor.app.wiring import build_otlp, build_runtime, build_sources
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.errors import Reason
from tests.collectors.kafka_support import committed, end_offsets, new_topic, produce, read_all, wait_for
from tests.ragmon_process import collected_as_served

EVENTS = int(os.environ.get("FUZZ_EVENTS", 100_000))  # fewer to profile a path; the suite runs 100k
BATCH = 1000


def mutate(rng: random.Random, event: dict) -> bytes:
    """One mutation of a valid trace event, chosen at random (or none: a tenth stay valid)."""
    encode = msgspec.json.encode
    how = rng.randrange(13)
    data = encode(event)
    if how == 0:
        return data[: rng.randrange(len(data))]  # truncated
    if how == 1:
        key = rng.choice(list(event))
        return encode({**event, key: rng.choice([None, 7, 1.5, True, [], {}, "x", [1, "a"], {"k": None}])})
    if how == 2:
        return encode({**event, "query": "q" * rng.randrange(65_537, 200_000)})  # huge: over the 65,536 limit
    if how == 3:
        depth = rng.randrange(200, 20_000)
        return data[:-1] + b', "deep": ' + b"[" * depth + b"]" * depth + b"}"  # deep nesting
    if how == 4:
        cut = rng.randrange(len(data))
        return data[:cut] + bytes([rng.choice([0x80, 0xC3, 0xFF, 0xFE, 0xED])]) + data[cut:]  # invalid UTF-8
    if how == 5:
        return data.replace(b'"score":', b'"score":NaN,"x":', 1) if b'"score":' in data else data + b"NaN"
    if how == 6:
        return encode({**event, "time": rng.choice([4e9, "2099-01-01T00:00:00Z", -1e20, 1e308])})  # future, odd
    if how == 7:
        data = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)  # flipped bytes
        return bytes(data)
    if how == 8:
        return encode({**event, "retrievals": [{"retriever": "v", "passages": [{"id": str(i)} for i in
                                                                               range(rng.randrange(400, 3000))]}]})
    if how == 9:
        return rng.choice([b"", b"null", b"[]", b"{}", b"1e999", b'"text"', b"\x00" * 64, b"{" * 5000])
    if how == 10:
        return encode({**event, "trace_id": rng.choice(["", "x" * 1000, "\u0000", "é" * 300])})
    if how == 11:
        return encode({**event, "type": rng.choice(["span", "TRACE", 1, None, "document"])})
    return data  # valid


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-pipeline")
def test_a_hundred_thousand_mutated_events_through_the_http_ingest(tmp_path):
    rng = random.Random(1234)
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
                                      # the letters are all read back: rotated (64 MB files), none deleted
                                      "RAGMON_DEAD_LETTER__KEEP_FILES": "1000",
                                      "RAGMON_HTTP__MAX_BODY_BYTES": str(512 * 1024 * 1024)})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready,
                                  max_body_bytes=settings.http.max_body_bytes))
    simulator = Simulator(seed=3, start=time.time() - 86400, rate=5.0)
    traces = [e for e in simulator.traffic(3000) if e["type"] == "trace"]
    accepted = rejected = duplicates = 0
    started = time.monotonic()
    with collected_as_served():  # the server runs in this process: its collector as in `ragmon serve`
        for _ in range(EVENTS // BATCH):
            events = [mutate(rng, rng.choice(traces)) for _n in range(BATCH)]
            # NDJSON splits on newlines: a mutation holding one would change the count, so none may
            events = [e.replace(b"\n", b" ") for e in events]
            answer = client.post("/v1/events", content=b"\n".join(events),
                                 headers={"content-type": "application/x-ndjson"})
            assert answer.status_code == 200, answer.text[:300]
            body = answer.json()
            blank = sum(1 for e in events if not e.strip())  # blank lines are not events
            assert body["accepted"] + body["rejected"] == BATCH - blank
            assert all(r["reason"] in {reason.value for reason in Reason} for r in body["rejections"])
            accepted += body["accepted"]
            rejected += body["rejected"]
            duplicates += body["duplicates"]  # the mutations reuse 3,000 traces' ids: many arrive again
    elapsed = time.monotonic() - started
    letters = read_dead_letters(tmp_path / "dead.jsonl")
    assert len(letters) == rejected
    reasons = Counter(letter["reason"] for letter in letters)
    assert set(reasons) <= {reason.value for reason in Reason}
    assert len(reasons) >= 8 and accepted > 5000
    counted_accepted, counted_rejected = runtime.pipeline.stats.snapshot()
    # every accepted event is counted once: as an event, or as a duplicate of one
    assert sum(counted_accepted.values()) + sum(runtime.pipeline.stats.duplicates.values()) == accepted
    assert sum(runtime.pipeline.stats.duplicates.values()) == duplicates > 0
    assert sum(counted_rejected.values()) == rejected
    runtime.close()
    print(f"\n{EVENTS} mutated events in {elapsed:.0f} s: {accepted} accepted, {rejected} dead-lettered, "
          f"reasons {dict(reasons)}")


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-otlp")
def test_mutated_otlp_bodies_get_4xx_or_partial_success_never_a_crash(tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    rng = random.Random(99)
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
                                      "RAGMON_OTLP__ASSEMBLY_WAIT_SECONDS": "0.05"})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    otlp = build_otlp(runtime)
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready, otlp=otlp))

    def body(n: int) -> bytes:
        attributes = [KeyValue(key="openinference.span.kind", value=AnyValue(string_value="RETRIEVER")),
                      KeyValue(key="input.value", value=AnyValue(string_value=f"question {n}")),
                      KeyValue(key="retrieval.documents.0.document.id", value=AnyValue(string_value=f"d{n}")),
                      KeyValue(key="retrieval.documents.0.document.score", value=AnyValue(double_value=0.5))]
        span = Span(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name="retrieve",
                    start_time_unix_nano=time.time_ns() - 10**9, end_time_unix_nano=time.time_ns(),
                    attributes=attributes)
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
        return request.SerializeToString()

    statuses = Counter()
    try:
        for n in range(3000):
            data = bytearray(body(n))
            for _ in range(rng.randrange(0, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.2:
                data = data[: rng.randrange(len(data) + 1)]
            kind = rng.choice(["application/x-protobuf", "application/x-protobuf", "application/json"])
            payload = bytes(data) if kind.endswith("protobuf") else json.dumps({"resourceSpans": [
                {"scopeSpans": [{"spans": [{"traceId": rng.randbytes(16).hex()[: rng.randrange(33)],
                                            "name": rng.choice(["", "x", None])}]}]}]}).encode()
            answer = client.post("/v1/traces", content=payload, headers={"content-type": kind})
            statuses[answer.status_code] += 1
            assert answer.status_code in (200, 400), (answer.status_code, answer.text[:200])
    finally:
        otlp.shutdown(timeout=10)
        runtime.close()
    assert statuses[200] > 100 and statuses[400] > 100


def mutate_spans(rng: random.Random, template: list, trace_id: bytes, into) -> int:
    """One trace's OpenInference spans under a new trace id, with one mutation chosen at random (or
    none: a tenth stay valid), copied straight into ``into`` (a request's repeated spans field: each
    span is copied once, not once here and again into the request). Returns how many of them the
    receiver must refuse (a bad trace id refuses them all)."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList

    how = rng.randrange(13)
    kept = template
    if how == 7:
        kept = [next(s for s in template if not s.parent_span_id)]  # the root alone
    elif how == 8:
        kept = [s for s in template if s.parent_span_id]  # no root: the earliest span stands for it
    first = len(into)
    for original in kept:
        into.add().CopyFrom(original)
    spans = into[first:]  # the request's own spans: what is changed below is what is sent
    for span in spans:
        span.trace_id = trace_id
    root = next((s for s in spans if not s.parent_span_id), None)
    children = [s for s in spans if s.parent_span_id]

    def put(span, key: str, value: AnyValue) -> None:
        for kv in span.attributes:
            if kv.key == key:
                kv.value.CopyFrom(value)
                return
        span.attributes.append(KeyValue(key=key, value=value))

    if how == 0:
        bad = rng.choice([b"", b"\0" * 16, trace_id[:15], trace_id + b"x"])
        for span in spans:
            span.trace_id = bad
        return len(spans)
    if how == 1:
        put(root, "input.value", AnyValue(string_value="q" * rng.randrange(65_537, 100_000)))  # over the limit
    elif how == 2:
        value = AnyValue(string_value="leaf")
        for _ in range(rng.randrange(5, 30)):  # within protobuf's nesting limit (100 messages deep)
            value = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=value)]))
        put(rng.choice(spans), rng.choice(["metadata", "input.value", "user.id"]), value)
    elif how == 3:
        for span in children:
            put(span, "retrieval.documents.0.document.score",
                AnyValue(double_value=rng.choice([float("nan"), float("inf"), -float("inf"), 1e308])))
    elif how == 4:
        when = rng.choice([time.time_ns() + 400 * 86400 * 10**9, 2**64 - 1, 1])
        for span in spans:
            span.start_time_unix_nano, span.end_time_unix_nano = when, when
    elif how == 5:
        span = rng.choice(spans)
        key = rng.choice(["retrieval.documents.0.document.id", "retrieval.documents.1.document.score", "metadata",
                          "openinference.span.kind", "user.id", "output.value"])
        put(span, key, rng.choice([AnyValue(int_value=7), AnyValue(bool_value=True), AnyValue(double_value=0.5),
                                   AnyValue(string_value="high"), AnyValue()]))
    elif how == 6:
        put(root, "input.value", AnyValue(bytes_value=bytes([0xFF, 0xFE, 0xC3, 0x28]) * rng.randrange(1, 50)))
    elif how == 9:
        for span in spans:
            span.end_time_unix_nano = span.start_time_unix_nano - rng.randrange(1, 10**12)
    elif how == 10:
        span = rng.choice(spans)  # documents of other numbers added: 600 is over the passages limit
        for i in range(100, 100 + rng.choice([3, 600])):  # made in place: no message built to be copied
            span.attributes.add(key=f"retrieval.documents.{i}.document.id").value.string_value = "d"
        put(span, "retrieval.documents.99999999999999999999.document.id", AnyValue(string_value="far"))
    elif how == 11:
        put(root, "metadata", AnyValue(string_value=rng.choice(["{", "[1,2]", '{"tenant": 5, "groups": "x"}',
                                                                '{"index": {"a": 1}, "citations": 3}'])))
    return 0


_SHAPES: list = []  # the traces the OTLP fuzz mutates, set before its request maker is forked


def _mutated_request(seed: int) -> tuple[bytes, int, int]:
    """One OTLP request of 100 mutated traces, the same for the same seed: its body, and the spans
    and the traces the receiver must refuse."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    refused_spans, refused_traces = 0, 0
    for _ in range(100):
        refused = mutate_spans(rng, rng.choice(_SHAPES), rng.randbytes(16), spans)
        refused_spans += refused
        refused_traces += refused > 0
    return request.SerializeToString(), refused_spans, refused_traces


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-otlp")
@pytest.mark.timeout(900)  # two processes: the slowest of the fuzzes
def test_a_hundred_thousand_mutated_traces_through_otlp(tmp_path, caplog):
    """OpenInference spans of 100k traces, each mutated (bad trace ids, huge and binary strings,
    nested attribute values, NaN and infinite scores, absurd times, wrong attribute types, missing
    or orphaned spans, oversized passage lists, broken metadata JSON), in OTLP protobuf requests of
    100 traces: every request answered 200; every trace either refused at the receiver (its spans
    counted in ``partial_success``), or delivered and then accepted or dead-lettered with a reason, or
    (its retrieval spans mutated away) counted as a trace without retrieval."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    from bench.otlp import otlp_bodies

    templates: dict[bytes, list] = {}
    for body in otlp_bodies(500):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    templates.setdefault(span.trace_id, []).append(span)
    _SHAPES[:] = templates.values()
    # The requests are made by a second process, a few ahead of the server, which works in this one:
    # the two cores each do one job. It is forked before this process starts any thread.
    requests = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    seeds = iter(range(2024, 2024 + EVENTS // 100))
    ahead = deque(requests.submit(_mutated_request, seed) for seed in itertools.islice(seeds, 4))
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
                                      "RAGMON_OTLP__ASSEMBLY_WAIT_SECONDS": "0.05",
                                      "RAGMON_DEAD_LETTER__KEEP_FILES": "1000",
                                      "RAGMON_HTTP__MAX_BODY_BYTES": str(256 * 1024 * 1024)})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    otlp = build_otlp(runtime)
    # entered: one event loop serves every request (a client not entered starts one per request)
    with TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready, otlp=otlp,
                              max_body_bytes=settings.http.max_body_bytes)) as client:
        otlp.start()
        refused_traces = refused_spans = answered_refused = waits = 0
        # The cyclic collector as `ragmon serve` sets it once built: under Python's defaults it scanned
        # the spans held for assembly again and again, some 30% of this process's CPU.
        with collected_as_served():
            started = time.monotonic()
            try:
                while ahead:
                    body, spans_refused, traces_refused = ahead.popleft().result()
                    ahead.extend(requests.submit(_mutated_request, seed) for seed in itertools.islice(seeds, 1))
                    refused_spans += spans_refused
                    refused_traces += traces_refused
                    while (answer := client.post("/v1/traces", content=body, headers={
                            "content-type": "application/x-protobuf"})).status_code == 503:
                        waits += 1  # the assembler is full: the client retries, as OTLP exporters do
                        time.sleep(0.05)
                    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
                    response = ExportTraceServiceResponse()
                    response.ParseFromString(answer.content)
                    answered_refused += response.partial_success.rejected_spans
            finally:
                requests.shutdown(cancel_futures=True)
                otlp.shutdown(timeout=30)  # delivers whatever is still being assembled
    elapsed = time.monotonic() - started
    accepted, rejected = runtime.pipeline.stats.snapshot()
    without_retrieval = metric_sum(runtime.registry, "ragmon_otlp_traces_without_retrieval_total")
    read = metric_sum(runtime.registry, "ragmon_otlp_traces_read_total")  # by scope: what the watch counted
    runtime.close()
    n_accepted = sum(n for (source, _), n in accepted.items() if source == "otlp")
    n_rejected = sum(n for (source, _), n in rejected.items() if source == "otlp")
    reasons = Counter({reason: n for (source, reason), n in rejected.items() if source == "otlp"})
    # Spans over the per-trace bound would also be refused; these traces stay far below it.
    assert answered_refused == refused_spans
    assert n_accepted + n_rejected + without_retrieval == EVENTS - refused_traces  # every trace accounted for
    assert read == n_accepted + n_rejected and "could not explain" not in caplog.text  # and explained
    assert set(reasons) <= {reason.value for reason in Reason} and n_accepted > EVENTS // 10 and len(reasons) >= 3
    letters = read_dead_letters(tmp_path / "dead.jsonl")
    assert Counter(letter["reason"] for letter in letters) == reasons
    print(f"\n{EVENTS} mutated traces through OTLP in {elapsed:.0f} s: {refused_traces} refused at the receiver, "
          f"{n_accepted} accepted, {n_rejected} dead-lettered, reasons {dict(reasons)}, "
          f"{without_retrieval:.0f} without retrieval; {waits} retries after 503")


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-pipeline")
@pytest.mark.integration
def test_a_hundred_thousand_mutated_events_through_kafka(kafka, tmp_path):
    """The same mutations as records of a traces topic (3 partitions): the consumer keeps going
    (the dead-letter ratio guard is off for this), commits the log end, and every record is counted
    as accepted or is in the dead-letter topic with a closed-enum reason and its origin."""
    rng = random.Random(4321)
    simulator = Simulator(seed=4, start=time.time() - 86400, rate=5.0)
    traces = [e for e in simulator.traffic(3000) if e["type"] == "trace"]
    values = [mutate(rng, rng.choice(traces)) for _ in range(EVENTS)]
    topic, dlq, catalog = new_topic(kafka, 3, "fuzz"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    produce(kafka, topic, values)
    group = f"fuzz-{uuid.uuid4().hex[:6]}"
    settings = load_settings(environ={
        "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
        "RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
        "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq, "RAGMON_KAFKA__CATALOG_TOPIC": catalog,
        "RAGMON_KAFKA__GROUP_ID": group, "RAGMON_KAFKA__MAX_DEAD_LETTER_RATIO": "1"})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    sources = build_sources(runtime)
    started = time.monotonic()
    with collected_as_served():  # the consumer runs in this process: its collector as in `ragmon serve`
        for source in sources:
            source.start()
        try:
            ends = end_offsets(kafka, topic)
            wait_for(lambda: committed(kafka, group, topic) == ends, 300, "the group to commit the log end")
            assert all(source.error is None for source in sources)
        finally:
            for source in sources:
                assert source.shutdown(timeout=30)
    elapsed = time.monotonic() - started
    accepted, rejected = runtime.pipeline.stats.snapshot()
    duplicates = sum(runtime.pipeline.stats.duplicates.values())  # the mutations reuse 3,000 traces' ids
    runtime.close()
    n_accepted, n_rejected = sum(accepted.values()), sum(rejected.values())
    assert n_accepted + duplicates + n_rejected == EVENTS and n_accepted + duplicates > 5000
    letters = read_all(kafka, dlq, timeout=120)
    reasons = Counter(dict(m.headers)["ragmon.reason"].decode() for m in letters)
    assert reasons == Counter({reason: n for (_, reason), n in rejected.items()})  # each once, none lost
    assert set(reasons) <= {reason.value for reason in Reason} and len(reasons) >= 8
    assert len({(dict(m.headers)["ragmon.origin.partition"], dict(m.headers)["ragmon.origin.offset"])
                for m in letters}) == n_rejected
    print(f"\n{EVENTS} mutated events through Kafka in {elapsed:.0f} s: {n_accepted} accepted, "
          f"{n_rejected} dead-lettered, reasons {dict(reasons)}")
