"""The HTTP port's own metrics (collectors/http_metrics.py): requests and their durations by route
and status; a path nobody serves folds into `other`, whatever it is; the process's metrics."""

from __future__ import annotations

import json
import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from ragmon.collectors.http import build_app
from ragmon.monitor.app.wiring import build_otlp, build_runtime
from ragmon.monitor.config.settings import load_settings
from tests.collectors.test_http import NOW, trace
from tests.ragmon_process import RagmonServer, scraped

TOKEN = "s3cret-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
NDJSON = {**AUTH, "content-type": "application/x-ndjson"}


@pytest.fixture
def runtime(tmp_path):
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")})
    runtime = build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())
    yield runtime
    runtime.close()


def series(registry: CollectorRegistry, name: str, **match: str) -> dict[tuple[str, str], float]:
    """The samples of ``name`` (matching ``match``) by (route, status), read from the exposition."""
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in match.items()):
                found[(sample.labels["route"], sample.labels["status"])] = sample.value
    return found


def test_requests_are_counted_and_timed_by_route_template_and_status(runtime):
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready, token=TOKEN,
                                  otlp=build_otlp(runtime), max_body_bytes=4096,
                                  observe_request=runtime.metrics.http_requests.observe))
    good = "\n".join(json.dumps(trace(i)) for i in range(3)).encode()
    assert client.post("/v1/events", content=good, headers=NDJSON).status_code == 200
    assert client.post("/v1/events", content=good, headers=NDJSON).status_code == 200
    assert client.post("/v1/events", content=good, headers={"content-type": "application/x-ndjson"}
                       ).status_code == 401
    assert client.post("/v1/events", content=b"x" * 5000, headers=NDJSON).status_code == 413
    assert client.post("/v1/events", content=b"[1, 2", headers={**AUTH, "content-type": "application/json"}
                       ).status_code == 400
    assert client.post("/v1/traces", content=b"\xff\xff\xff", headers={**AUTH, "content-type":
                                                                       "application/x-protobuf"}).status_code == 400
    assert client.get("/v1/events").status_code == 405  # a known route, the wrong method
    assert client.get("/v1/events?query=text").status_code == 405  # the query is not part of the route
    strangers = [f"/{uuid.uuid4().hex}/{uuid.uuid4().hex}" for _ in range(20)]
    for path in strangers:
        assert client.post(path, content=b"{}", headers=NDJSON).status_code == 404
    assert client.get("/metrics/", follow_redirects=False).status_code == 307  # not the route /metrics
    assert client.get("/healthz").status_code == 200

    counted = series(runtime.registry, "ragmon_http_request_duration_seconds_count")
    assert counted == {("/v1/events", "200"): 2, ("/v1/events", "401"): 1, ("/v1/events", "413"): 1,
                       ("/v1/events", "400"): 1, ("/v1/traces", "400"): 1, ("/v1/events", "405"): 2,
                       ("other", "404"): 20, ("other", "307"): 1, ("/healthz", "200"): 1}
    inf = {key: value for key, value in series(runtime.registry, "ragmon_http_request_duration_seconds_bucket",
                                               le="+Inf").items()}
    assert inf == counted
    assert 0 < series(runtime.registry, "ragmon_http_request_duration_seconds_sum")[("/v1/events", "200")] < 10
    exposition = generate_latest(runtime.registry).decode()
    assert not any(path.split("/")[1] in exposition for path in strangers)


def test_process_metrics_come_with_the_served_metrics(tmp_path):
    with RagmonServer(tmp_path) as server:
        assert scraped(server.url, "process_resident_memory_bytes") > 10e6
        assert scraped(server.url, "process_cpu_seconds_total") > 0
        assert scraped(server.url, "process_open_fds") > 0
        assert scraped(server.url, "python_info") == 1
        answered = lambda route: scraped(server.url, "ragmon_http_request_duration_seconds_count",  # noqa: E731
                                         route=route, status="200")
        assert answered("/metrics") >= 4 and answered("/readyz") >= 1


def test_reads_of_one_trace_are_counted_by_their_route_template_never_by_the_id():
    """A trace id is the sender's: ``/api/v1/traces/<id>`` and ``/traces/<id>`` count under their
    templates, so reading many traces adds no series and names none of them."""
    from tests.collectors.test_http_read import FakeReads

    observed: list[tuple[str, int]] = []
    client = TestClient(build_app(lambda records: None, CollectorRegistry(), lambda: True, read_api=FakeReads(),
                                  observe_request=lambda route, status, seconds: observed.append((route, status))))
    ids = [f"bob@example.com-{uuid.uuid4().hex}" for _ in range(5)]
    for trace_id in ids:
        assert client.get(f"/api/v1/traces/{trace_id}").status_code == 200
        assert client.get(f"/traces/{trace_id}").status_code == 200
    assert client.get("/api/v1/findings").status_code == 200
    assert client.get("/api/v1/tracesX").status_code == 404
    assert observed == [*[("/api/v1/traces/{trace_id}", 200), ("/traces/{trace_id}", 200)] * 5,
                        ("/api/v1/findings", 200), ("other", 404)]
