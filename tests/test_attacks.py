"""Attacks a stranger would try, against `ragmon serve` as a process on loopback with its defaults
(and an ingest token): each runs for a few seconds and stops by itself. While it runs, a prober asks
`/healthz` and a real client sends real events; the server must neither freeze nor answer 500, and
the real client must be served. The figures (peak RSS, slowest `/healthz`, answers) are printed and
recorded in docs/reliability.md."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.ragmon_process import RagmonServer, scraped

TOKEN = "attack-test-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
NDJSON = {**AUTH, "content-type": "application/x-ndjson"}
NOT_FROZEN_SECONDS = 5.0  # a liveness guard, not a speed target: before, /healthz froze for 21-85 s


@dataclass
class Watch:
    """What the prober and the real client saw while an attack ran."""

    healthz_seconds: list[float] = field(default_factory=list)
    real_answers: Counter = field(default_factory=Counter)
    peak_rss_mb: float = 0.0

    def report(self, name: str) -> str:
        return (f"{name}: slowest /healthz {max(self.healthz_seconds):.3f} s over {len(self.healthz_seconds)} probes; "
                f"real ingest answers {dict(self.real_answers)}; peak RSS {self.peak_rss_mb:.0f} MB")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trace(n: int) -> bytes:
    return json.dumps({"type": "trace", "trace_id": f"real-{n}-{time.monotonic_ns()}", "time": time.time() - 1,
                       "query": "q", "index": {"name": "policies"}}).encode()


def under_attack(server: RagmonServer, attack: Callable[[threading.Event], None], seconds: float) -> Watch:
    """Run ``attack`` (it stops when the event is set) for ``seconds`` while probing and ingesting."""
    watch, stop = Watch(), threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                started = time.monotonic()
                assert client.get(f"{server.url}/healthz").status_code == 200
                watch.healthz_seconds.append(time.monotonic() - started)
                time.sleep(0.1)

    def ingest() -> None:
        with httpx.Client(timeout=60) as client:
            n = 0
            while not stop.is_set():
                answer = client.post(f"{server.url}/v1/events", content=trace(n), headers=NDJSON)
                watch.real_answers[answer.status_code] += 1
                n += 1
                time.sleep(0.1)

    workers = [threading.Thread(target=target, daemon=True) for target in (probe, ingest)]
    attacker = threading.Thread(target=attack, args=(stop,), daemon=True)
    for worker in (*workers, attacker):
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in (*workers, attacker):
        worker.join(60)
    watch.peak_rss_mb = peak_rss_mb(server.process.pid)
    print(watch.report(attack.__name__))
    return watch


@pytest.fixture
def server(tmp_path):
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=TOKEN) as running:
        yield running


@pytest.fixture
def impatient_server(tmp_path):
    """The body timeout shortened to 2 s, so that slow clients are let go within the test."""
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=TOKEN, RAGMON_HTTP__BODY_TIMEOUT_SECONDS="2") as running:
        yield running


def test_concatenated_empty_gzip_members_are_refused_without_freezing_the_server(server):
    bomb = gzip.compress(b"") * 100_000  # 2 MB: before, 21 s of decompression on the event loop
    statuses: Counter = Counter()

    def gzip_members(stop: threading.Event) -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                answer = client.post(f"{server.url}/v1/events", content=bomb,
                                     headers={**NDJSON, "content-encoding": "gzip"})
                statuses[answer.status_code] += 1
                assert "members" in answer.json()["error"]

    watch = under_attack(server, gzip_members, seconds=4)
    assert set(statuses) == {400} and statuses[400] >= 2
    assert max(watch.healthz_seconds) < NOT_FROZEN_SECONDS
    assert set(watch.real_answers) == {200}


def test_slow_bodies_hold_no_ingest_slot_and_time_out(impatient_server):
    """64 default slots: before, 64 clients trickling a byte a second got every real request a 503."""
    outcomes: Counter = Counter()

    def slowloris(stop: threading.Event) -> None:
        def one() -> None:
            sock = socket.create_connection(("127.0.0.1", impatient_server.port), timeout=10)
            sock.sendall(b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
                         b"Content-Length: 1000000\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
            sock.settimeout(0.3)
            answer = b""
            while not stop.is_set() and not answer:
                try:
                    sock.sendall(b" ")
                    answer = sock.recv(200)
                except TimeoutError:
                    continue
                except OSError:
                    break
            outcomes[answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/") else "open"] += 1
            sock.close()

        clients = [threading.Thread(target=one, daemon=True) for _ in range(80)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(30)

    watch = under_attack(impatient_server, slowloris, seconds=5)
    assert outcomes["408"] >= 70, outcomes  # each let go after the 2 s body timeout
    assert set(watch.real_answers) == {200} and watch.real_answers[200] >= 10
    assert max(watch.healthz_seconds) < NOT_FROZEN_SECONDS


def test_hostile_bodies_get_clear_statuses_never_500(server):
    with httpx.Client(timeout=30) as client:
        def post(body: bytes, **headers: str) -> httpx.Response:
            return client.post(f"{server.url}/v1/events", content=body, headers={**AUTH, **headers})

        deep = post(b"[" * 10_000, **{"content-type": "application/json"})  # before: 500 RecursionError
        assert deep.status_code == 400 and "nested too deep" in deep.json()["error"]
        cross_site = post(trace(1), **{"content-type": "text/plain", "origin": "https://evil.example"})
        assert cross_site.status_code == 403
        form = post(trace(2), **{"content-type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415
        unauthenticated = client.post(f"{server.url}/v1/events", content=trace(3),
                                      headers={"content-type": "application/x-ndjson"})
        assert unauthenticated.status_code == 401
        huge = post(json.dumps({"type": "trace", "trace_id": "t-huge", "time": time.time(), "query": "q",
                                "index": {"name": "policies"}, "usage": {"input_tokens": 10**30},
                                "latency_ms": {"total": 1e308}}).encode(), **{"content-type": "application/json"})
        assert huge.status_code == 200 and huge.json()["rejections"][0]["reason"] == "invalid_value"
        old = post(json.dumps([{"type": "document", "doc_id": f"d{i}", "version": "1", "modified_at": 0}
                               for i in range(2)]).encode(), **{"content-type": "application/json"})
        assert [r["reason"] for r in old.json()["rejections"]] == ["bad_timestamp"] * 2
    # nothing of the rejected magnitudes reached a counter, and no index looks decades stale
    assert scraped(server.url, "ragmon_tokens_total") == 0
    assert scraped(server.url, "ragmon_index_max_staleness_seconds") == 0


def test_a_client_retrying_the_same_traces_is_counted_once(server):
    """Before: the same 100 trace ids sent three times counted 300 answers and 300 violations."""
    now = time.time()
    body = b"\n".join(json.dumps({
        "type": "trace", "trace_id": f"retried-{n}", "time": now - 5, "query": "q", "tenant": "acme",
        "index": {"name": "policies"}, "caller": {"id": f"u-{n}", "groups": ["staff"]},
        "answer": {"text": "yes", "citations": []},
        "context": [{"id": f"payroll#{n}", "doc_id": "payroll", "acl": ["group:hr"]}]}).encode() for n in range(100))
    with httpx.Client(timeout=30) as client:
        answers = [client.post(f"{server.url}/v1/events", content=body, headers=NDJSON).json() for _ in range(3)]
    assert [(a["accepted"], a["duplicates"]) for a in answers] == [(100, 0), (100, 100), (100, 100)]
    assert scraped(server.url, "ragmon_answers_total") == 100
    assert scraped(server.url, "ragmon_permission_violations_total", stage="context") == 100
    assert scraped(server.url, "ragmon_duplicate_events_total", source="http") == 200
    assert scraped(server.url, "ragmon_samples_total", stratum="permission_violation") == 100


def otlp_flood_body(seed: int, megabytes: int = 15) -> bytes:
    """An OTLP protobuf request of about ``megabytes``: retriever spans of new traces, each with a
    3 KB document text."""
    import random

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    rng, now = random.Random(seed), time.time_ns()
    text = "lorem ipsum " * 256
    spans = [Span(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name="retrieve",
                  start_time_unix_nano=now - 10**9, end_time_unix_nano=now, attributes=[
                      KeyValue(key="openinference.span.kind", value=AnyValue(string_value="RETRIEVER")),
                      KeyValue(key="input.value", value=AnyValue(string_value=f"question {n}")),
                      KeyValue(key="retrieval.documents.0.document.id", value=AnyValue(string_value=f"d{n}")),
                      KeyValue(key="retrieval.documents.0.document.content", value=AnyValue(string_value=text))])
             for n in range(megabytes * 1024 * 1024 // 3200)]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
                                     ).SerializeToString()


@pytest.mark.slow
def test_otlp_bodies_faster_than_traces_are_assembled_are_refused_within_a_byte_budget(server):
    """Before: three clients sending 15 MB protobuf bodies took the server to 1.83 GB of memory."""
    bodies = [otlp_flood_body(seed) for seed in range(3)]
    statuses: Counter = Counter()

    def otlp_flood(stop: threading.Event) -> None:
        def client(body: bytes) -> None:
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    answer = http.post(f"{server.url}/v1/traces", content=body,
                                       headers={**AUTH, "content-type": "application/x-protobuf"})
                    statuses[answer.status_code] += 1

        clients = [threading.Thread(target=client, args=(body,), daemon=True) for body in bodies]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(60)

    watch = under_attack(server, otlp_flood, seconds=8)
    assert set(statuses) <= {200, 503} and statuses[503] > 0, statuses  # refused beyond the budget, never a 5xx bug
    assert set(watch.real_answers) == {200}
    assert max(watch.healthz_seconds) < NOT_FROZEN_SECONDS
    assert watch.peak_rss_mb < 1024, "the chart's memory limit"
    print(f"otlp_flood answers: {dict(statuses)}")


def test_a_megabyte_of_one_byte_lines_costs_no_memory_to_speak_of(server):
    """Before: +560 MB of memory and half a million dead letters."""
    with httpx.Client(timeout=60) as client:
        before = peak_rss_mb(server.process.pid)
        answer = client.post(f"{server.url}/v1/events", content=b"x\n" * 500_000, headers=NDJSON)
        after = peak_rss_mb(server.process.pid)
    assert answer.status_code == 413
    print(f"one-byte lines: peak RSS {before:.0f} MB before, {after:.0f} MB after")
    assert after - before < 50
