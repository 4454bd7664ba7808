"""The HTTP port: /v1/events in its three body shapes, errors and back-pressure, metrics, health."""

from __future__ import annotations

import gzip
import json
import threading

import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.http import MAX_REJECTIONS_LISTED, build_app
from ragmon.collectors.http_access import ExposureRefused, check_exposure
from ragmon.exporters.prometheus import metric_sum
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
JSON = {"content-type": "application/json"}


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
    array = client.post("/v1/events", content=json.dumps([trace(1), trace(2)]), headers=JSON)
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
    answer = client.post("/v1/events", content=body, headers={"content-encoding": "gzip", **JSON})
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
    ids=["truncated", "too-big", "gzip-bomb", "not-gzip", "brotli"],  # a gzip header holds the time
)
def test_bad_bodies_get_clear_statuses(runtime, body, headers, status):
    answer = client_for(runtime, max_body_bytes=1000).post("/v1/events", content=body, headers={**JSON, **headers})
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]


def test_an_unusable_body_is_dead_lettered_and_counted(runtime, tmp_path):
    client = client_for(runtime)
    assert client.post("/v1/events", content=b'[{"type": "trace"', headers=JSON).status_code == 400
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
    answer = client_for(runtime).post("/v1/events", content=body[:-12], headers={"content-encoding": "gzip", **JSON})
    assert answer.status_code == 400 and "truncated" in answer.json()["error"]


# --- who may send, and how much ------------------------------------------------------------------


def test_the_scheduler_serves_no_ingest_with_or_without_a_token(runtime):
    client = client_for(runtime, token="s3cret", ingest=False)
    for headers in ({}, {"authorization": "Bearer s3cret"}):
        assert client.post("/v1/events", json=trace(1), headers=headers).status_code in (404, 405)
        assert client.post("/v1/traces", content=b"", headers=headers).status_code in (404, 405)
    assert client.get("/metrics").status_code == 200
    assert runtime.pipeline.stats.snapshot() == ({}, {})


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_only_json_and_ndjson_bodies_reach_the_pipeline(runtime, content_type):
    headers = {"content-type": content_type} if content_type else {}
    answer = client_for(runtime).post("/v1/events", content=json.dumps(trace(1)), headers=headers)
    assert answer.status_code == 415 and "application/x-ndjson" in answer.json()["error"]
    assert runtime.pipeline.stats.snapshot() == ({}, {})


def test_a_request_from_a_browser_origin_is_refused_unless_the_origin_is_allowed(runtime):
    client = client_for(runtime, allowed_origins=["https://ops.example"])
    cross_site = client.post("/v1/events", content=json.dumps(trace(1)),
                             headers={"origin": "https://evil.example", "content-type": "text/plain"})
    assert cross_site.status_code == 403
    assert client.post("/v1/events", json=trace(2), headers={"origin": "https://evil.example"}).status_code == 403
    assert client.post("/v1/events", json=trace(2), headers={"origin": "null"}).status_code == 403
    assert runtime.pipeline.stats.snapshot() == ({}, {})
    assert client.post("/v1/events", json=trace(3), headers={"origin": "https://ops.example"}).status_code == 200


def test_a_metrics_token_guards_metrics(runtime):
    client = client_for(runtime, metrics_token="m3trics")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"authorization": "Bearer m3trics"}).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_a_body_nested_too_deep_is_a_400_and_a_dead_letter(runtime, tmp_path):
    client = client_for(runtime)
    answer = client.post("/v1/events", content=b"[" * 10_000, headers=JSON)
    assert answer.status_code == 400 and "nested too deep" in answer.json()["error"]
    assert [letter["reason"] for letter in read_dead_letters(tmp_path / "dead.jsonl")] == ["malformed_json"]


def test_too_many_events_in_one_request_are_refused_whole_naming_the_limit(runtime):
    client = client_for(runtime, max_records=5)
    lines = b"\n".join(json.dumps(trace(i)).encode() for i in range(6))
    ndjson = client.post("/v1/events", content=lines, headers={"content-type": "application/x-ndjson"})
    assert ndjson.status_code == 413 and "more than 5 events" in ndjson.json()["error"]
    array = client.post("/v1/events", json=[trace(i) for i in range(6)])
    assert array.status_code == 413 and "6 events" in array.json()["error"]
    blank_lines_are_no_events = b"\n\n\n".join(json.dumps(trace(i)).encode() for i in range(5))
    assert client.post("/v1/events", content=blank_lines_are_no_events,
                       headers={"content-type": "application/x-ndjson"}).json()["accepted"] == 5
    assert runtime.pipeline.stats.snapshot()[0] == {("http", "trace"): 5}


def test_a_megabyte_of_one_byte_lines_is_refused_before_it_becomes_records(runtime):
    """Before: half a million junk records, 560 MB more memory and a dead letter each."""
    answer = client_for(runtime).post("/v1/events", content=b"x\n" * 500_000,
                                      headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 413 and "more than 10000 events" in answer.json()["error"]
    assert runtime.pipeline.stats.snapshot() == ({}, {})


def test_rejections_are_listed_up_to_a_limit_then_counted(runtime):
    body = b"\n".join([b'{"type": "nothing"}'] * (MAX_REJECTIONS_LISTED + 50))
    answer = client_for(runtime).post("/v1/events", content=body, headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 200
    result = answer.json()
    assert result["rejected"] == MAX_REJECTIONS_LISTED + 50
    assert len(result["rejections"]) == MAX_REJECTIONS_LISTED and result["rejections_not_listed"] == 50


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host):
    assert check_exposure(host, None, allow_unauthenticated=False) is False


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "ragmon.internal"])
def test_another_address_needs_a_token_or_an_explicit_allowance(host):
    with pytest.raises(ExposureRefused, match="http.token"):
        check_exposure(host, None, allow_unauthenticated=False)
    assert check_exposure(host, "s3cret", allow_unauthenticated=False) is False
    assert check_exposure(host, None, allow_unauthenticated=True) is True


def document(doc_id: str, version: str, acl: list[str]) -> dict:
    return {"type": "document", "doc_id": doc_id, "version": version, "modified_at": NOW - 100, "tenant": "acme",
            "acl": acl}


def leak_of(doc_id: str) -> dict:
    return {"type": "trace", "trace_id": "t-leak", "time": NOW - 10, "query": "q", "tenant": "acme",
            "index": {"name": "policies"}, "caller": {"id": "u-1", "groups": ["staff"]},
            "answer": {"text": "yes", "citations": []}, "context": [{"id": f"{doc_id}#1", "doc_id": doc_id}]}


def test_a_forged_catalog_event_cannot_hide_the_next_leak(runtime, tmp_path):
    """The attack: a client holding only the ingest token re-publishes a document as readable by
    everyone, so that the next real leak of it is not counted."""
    client = client_for(runtime, token="ingest", catalog_token="catalog", guard_catalog=True)
    as_ingest, as_catalog = {"authorization": "Bearer ingest"}, {"authorization": "Bearer catalog"}
    assert client.post("/v1/events", json=document("payroll", "1", ["group:hr"]), headers=as_catalog).json()[
        "accepted"] == 1
    forged = client.post("/v1/events", json=[document("payroll", "2", ["*"])], headers=as_ingest).json()
    assert (forged["accepted"], [r["reason"] for r in forged["rejections"]]) == (0, ["not_permitted"])
    assert runtime.catalog.document("payroll").acl == ("group:hr",)
    assert client.post("/v1/events", json=leak_of("payroll"), headers=as_ingest).json()["accepted"] == 1
    assert metric_sum(runtime.registry, "ragmon_permission_violations_total", stage="context") == 1
    assert [letter["reason"] for letter in read_dead_letters(tmp_path / "dead.jsonl")] == ["not_permitted"]


def test_without_a_catalog_token_a_non_loopback_port_takes_no_catalog_events(runtime):
    client = client_for(runtime, token="ingest", guard_catalog=True)
    answer = client.post("/v1/events", json=[document("d1", "1", ["*"]), trace(1)],
                         headers={"authorization": "Bearer ingest"}).json()
    assert (answer["accepted"], answer["rejections"][0]["reason"]) == (1, "not_permitted")
    assert runtime.catalog.document("d1") is None
    # on loopback (the embedded default) the catalog may be written over HTTP
    loopback = client_for(runtime).post("/v1/events", json=document("d1", "1", ["*"])).json()
    assert loopback["accepted"] == 1 and runtime.catalog.document("d1") is not None


def test_request_bodies_held_at_once_are_bounded_process_wide(runtime):
    client = client_for(runtime, max_inflight_bytes=1000)
    body = b"\n".join(json.dumps(trace(i)).encode() for i in range(10))  # about 2 KB
    answer = client.post("/v1/events", content=body, headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert client.post("/v1/events", json=trace(1)).status_code == 200  # the budget was given back


def test_a_gzip_body_of_many_members_or_a_huge_ratio_is_refused(runtime):
    client = client_for(runtime)
    members = client.post("/v1/events", content=gzip.compress(b"") * 65,
                          headers={"content-encoding": "gzip", **JSON})
    assert members.status_code == 400 and "members" in members.json()["error"]
    bomb = client.post("/v1/events", content=gzip.compress(b"[" + b" " * 12_000_000 + b"]"),
                       headers={"content-encoding": "gzip", **JSON})
    assert bomb.status_code == 413 and "times the compressed size" in bomb.json()["error"]
    two = b"".join(gzip.compress(json.dumps(trace(i)).encode() + b"\n") for i in (1, 2))
    assert client.post("/v1/events", content=two, headers={"content-encoding": "gzip", "content-type":
                                                            "application/x-ndjson"}).json()["accepted"] == 2


def test_readiness_fails_once_every_slot_stays_busy():
    entered, release = threading.Event(), threading.Event()

    def slow(records):
        entered.set()
        release.wait(10)
        return BatchResult(accepted=len(records))

    client = TestClient(build_app(slow, CollectorRegistry(), lambda: True, max_pending=1, saturation_seconds=0.0))
    assert client.get("/readyz").status_code == 200
    worker = threading.Thread(target=lambda: client.post("/v1/events", json=trace(1)))
    worker.start()
    assert entered.wait(5)
    saturated = client.get("/readyz")
    release.set()
    worker.join(10)
    assert saturated.status_code == 503 and "slot" in saturated.text
    assert client.get("/readyz").status_code == 200
