"""The HTTP port: /v1/events in its three body shapes, errors and back-pressure, metrics, health."""

from __future__ import annotations

import gzip
import json
import threading

import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.http import build_app
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import BatchResult
from tests.collectors.contract import (  # noqa: F401  (the contract tests run here)
    SourceHarness,
    test_a_refused_batch_is_retried_and_nothing_is_lost,
    test_invalid_input_is_dead_lettered_then_acknowledged,
    test_nothing_is_acknowledged_while_processing_is_refused,
    test_records_are_acknowledged_only_after_process_returned,
)

NOW = 1_796_000_000.0


class HttpHarness(SourceHarness):
    """A client posting NDJSON batches; a record is acknowledged when its request got 200. Like
    an OTLP exporter, the client retries a 503 a few times, then gives up."""

    def __init__(self) -> None:
        self.acked = 0

    def run(self, payloads, process) -> None:
        client = TestClient(build_app(process, CollectorRegistry(), lambda: True))
        for start in range(0, len(payloads), self.batch_size):
            batch = payloads[start:start + self.batch_size]
            for _ in range(4):
                answer = client.post("/v1/events", content=b"\n".join(batch),
                                     headers={"content-type": "application/x-ndjson"})
                if answer.status_code != 503:
                    break
            if answer.status_code != 200:
                return  # an exporter drops nothing it was not told was taken; it stops here
            self.acked += len(batch)

    def acknowledged(self) -> int:
        return self.acked


@pytest.fixture
def source_harness() -> SourceHarness:
    return HttpHarness()


def trace(i: int) -> dict:
    return {"type": "trace", "trace_id": f"t{i}", "time": NOW - 10, "query": "q", "tenant": "acme",
            "index": {"name": "policies"}, "answer": {"text": "yes", "citations": []},
            "context": [{"id": "p1", "doc_id": "d1", "acl": ["tenant:acme"]}]}


@pytest.fixture
def runtime(tmp_path):
    settings = load_settings(environ={
        "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
        "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
    })
    runtime = build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())
    yield runtime
    runtime.close()


def client_for(runtime, **options) -> TestClient:
    return TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready, **options))


def test_array_object_and_ndjson_bodies(runtime):
    client = client_for(runtime)
    array = client.post("/v1/events", content=json.dumps([trace(1), trace(2)]))
    single = client.post("/v1/events", json=trace(3))
    ndjson = client.post("/v1/events", content=b"\n".join(json.dumps(trace(i)).encode() for i in (4, 5, 6)),
                         headers={"content-type": "application/x-ndjson"})
    assert [r.status_code for r in (array, single, ndjson)] == [200, 200, 200]
    assert [r.json()["accepted"] for r in (array, single, ndjson)] == [2, 1, 3]
    metrics = client.get("/metrics").text
    assert 'ragmon_events_total{source="http",type="trace"} 6.0' in metrics
    assert 'ragmon_answers_total{index="policies",outcome="answered",tenant="acme"} 6.0' in metrics


def test_each_rejection_is_reported_by_position_and_dead_lettered(runtime, tmp_path):
    client = client_for(runtime)
    body = [trace(1), {"type": "trace", "trace_id": "x"}, trace(3), {"type": "nope"}]
    answer = client.post("/v1/events", json=body).json()
    assert answer["accepted"] == 2 and answer["rejected"] == 2
    assert [(r["index"], r["reason"]) for r in answer["rejections"]] == [(1, "missing_field"), (3, "unknown_type")]
    letters = read_dead_letters(tmp_path / "dead.jsonl")
    assert [(d["source"], d["reason"], d["origin"]["item"]) for d in letters] == [
        ("http", "missing_field", 1), ("http", "unknown_type", 3)]


def test_gzip_bodies_are_accepted(runtime):
    client = client_for(runtime)
    body = gzip.compress(json.dumps([trace(1), trace(2)]).encode())
    answer = client.post("/v1/events", content=body, headers={"content-encoding": "gzip"})
    assert answer.status_code == 200 and answer.json()["accepted"] == 2


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"[" + json.dumps(trace(1)).encode() + b",", {}, 400),  # a truncated array
        (b"x" * 2000, {}, 413),
        (gzip.compress(b"[" + b" " * 5000 + b"]"), {"content-encoding": "gzip"}, 413),  # a gzip bomb, small
        (b"not gzip", {"content-encoding": "gzip"}, 400),
        (b"{}", {"content-encoding": "br"}, 415),
    ],
)
def test_bad_bodies_get_clear_statuses(runtime, body, headers, status):
    answer = client_for(runtime, max_body_bytes=1000).post("/v1/events", content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]


def test_an_unusable_body_is_dead_lettered_and_counted(runtime, tmp_path):
    client = client_for(runtime)
    assert client.post("/v1/events", content=b'[{"type": "trace"').status_code == 400
    assert read_dead_letters(tmp_path / "dead.jsonl")[0]["reason"] == "malformed_json"
    assert 'ragmon_rejected_events_total{reason="malformed_json",source="http"} 1.0' in client.get("/metrics").text


def test_bearer_token_guards_ingest_but_not_metrics(runtime):
    client = client_for(runtime, token="s3cret")
    assert client.post("/v1/events", json=trace(1)).status_code == 401
    assert client.post("/v1/events", json=trace(1), headers={"authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/v1/events", json=trace(1), headers={"authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/metrics").status_code == 200


def test_a_refusing_pipeline_answers_503_with_retry_after():
    def refuse(records):
        raise Retryable("database down")

    client = TestClient(build_app(refuse, CollectorRegistry(), lambda: False))
    answer = client.post("/v1/events", json=trace(1))
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200


def test_too_many_pending_requests_answer_503():
    entered, release = threading.Event(), threading.Event()

    def slow(records):
        entered.set()
        release.wait(10)
        return BatchResult(accepted=len(records))

    client = TestClient(build_app(slow, CollectorRegistry(), lambda: True, max_pending=1))
    results = []
    worker = threading.Thread(target=lambda: results.append(client.post("/v1/events", json=trace(1))))
    worker.start()
    assert entered.wait(5)
    refused = client.post("/v1/events", json=trace(2))
    release.set()
    worker.join(10)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert results[0].status_code == 200


def test_ready_when_the_database_answers(runtime):
    assert client_for(runtime).get("/readyz").status_code == 200


def test_a_pretty_printed_single_object_is_one_event(runtime):
    answer = client_for(runtime).post("/v1/events", content=json.dumps(trace(1), indent=2),
                                      headers={"content-type": "application/json"})
    assert answer.status_code == 200 and (answer.json()["accepted"], answer.json()["rejected"]) == (1, 0)


def test_ndjson_sent_as_plain_json_is_split_into_lines(runtime):
    body = b"\n".join(json.dumps(trace(i)).encode() for i in (1, 2))
    answer = client_for(runtime).post("/v1/events", content=body, headers={"content-type": "application/json"})
    assert answer.json()["accepted"] == 2


def test_every_member_of_a_multi_member_gzip_body_counts(runtime):
    body = gzip.compress(json.dumps(trace(1)).encode() + b"\n") + gzip.compress(json.dumps(trace(2)).encode())
    answer = client_for(runtime).post("/v1/events", content=body, headers={
        "content-encoding": "gzip", "content-type": "application/x-ndjson"})
    assert answer.status_code == 200 and answer.json()["accepted"] == 2


def test_a_truncated_gzip_body_is_refused(runtime):
    body = gzip.compress(json.dumps([trace(1), trace(2)]).encode())
    answer = client_for(runtime).post("/v1/events", content=body[:-12], headers={"content-encoding": "gzip"})
    assert answer.status_code == 400 and "truncated" in answer.json()["error"]
