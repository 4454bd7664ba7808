"""ragmon's own traces (monitor/app/telemetry.py): a span per processed batch and per scheduled job
run, exported over OTLP/HTTP by the SDK to a real receiver; the bounded export queue; the refusal
of an endpoint that is the process's own port; nothing of the SDK when no endpoint is set."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import httpx
import msgspec
import pytest
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon import __version__
from ragmon.collectors.http import build_app
from ragmon.collectors.otlp_wire import parse_protobuf
from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.jobs import RETENTION, STALENESS_SCAN
from ragmon.monitor.app.wiring import build_jobs, build_otlp, build_runtime
from ragmon.monitor.config.settings import ConfigError, load_settings
from ragmon.monitor.config.telemetry import TelemetryConfig
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.memory import MemorySink
from ragmon.monitor.core.records import Privilege, RawRecord
from tests.ragmon_process import RagmonServer, scraped, served_in_thread
from tests.services.harness import free_port

QUERY, CALLER, PASSAGE = "QUERY-7f3a how many days", "CALLER-7f3a", "PASSAGE-7f3a five days carry over"


def environ(tmp_path, **env: str) -> dict[str, str]:
    return {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_SCHEDULER__BATCH_DIR": str(tmp_path / "batches"), **env}


def trace(trace_id: str) -> bytes:
    return msgspec.json.encode({
        "type": "trace", "trace_id": trace_id, "time": time.time(), "query": QUERY, "tenant": "acme",
        "caller": {"id": CALLER, "groups": ["staff"]}, "index": {"name": "policies"},
        "retrievals": [{"retriever": "bm25", "passages": [{"id": "p1", "score": 1.0, "text": PASSAGE}]}]})


class Tap:
    """ragmon's OTLP receiver, keeping every request body it answers and the spans in it."""

    def __init__(self, receiver) -> None:
        self.receiver = receiver
        self.bodies: list[bytes] = []

    def receive(self, body: bytes, content_type: str):
        self.bodies.append(body)
        return self.receiver.receive(body, content_type)

    def spans(self):
        return [span for body in self.bodies for span in parse_protobuf(body)]


@pytest.fixture
def receiver(tmp_path):
    """A second ragmon's HTTP app with its OTLP receiver, served by uvicorn on a port of its own."""
    runtime = build_runtime(load_settings(environ=environ(tmp_path / "receiver")), registry=CollectorRegistry())
    otlp = build_otlp(runtime)
    tap = Tap(otlp)
    app = build_app(runtime.pipeline.process, runtime.registry, runtime.ready, otlp=tap, on_startup=otlp.start,
                    on_shutdown=lambda: (otlp.shutdown(10), runtime.close()),
                    observe_request=runtime.metrics.http_requests.observe)
    with served_in_thread(app) as url:
        yield url, tap, runtime


def test_batch_and_job_spans_reach_an_otlp_receiver_with_their_counts(tmp_path, receiver):
    url, tap, receiving = receiver
    (tmp_path / "sender").mkdir()
    settings = load_settings(environ=environ(tmp_path / "sender", RAGMON_TELEMETRY__OTLP_ENDPOINT=f"{url}/v1/traces"))
    runtime = build_runtime(settings, registry=CollectorRegistry(), command="serve")
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready))
    # three traces, one of them twice, and two records that are dead-lettered
    first, second, third = "trace-7f3a-1", "trace-7f3a-2", "trace-7f3a-3"
    body = b"\n".join([trace(first), trace(second), trace(first), trace(third), b'{"type": "trace"}', b"not json"])
    answer = client.post("/v1/events", content=body, headers={"content-type": "application/x-ndjson"}).json()
    assert (answer["accepted"], answer["rejected"], answer["duplicates"]) == (4, 2, 1)
    runtime.pipeline.process([RawRecord("kafka", trace("trace-7f3a-4"), privilege=Privilege.TRUSTED)])
    jobs = build_jobs(runtime)
    assert jobs.run(STALENESS_SCAN)

    def broken_disk(before: float) -> int:
        raise OSError(f"cannot prune {CALLER}")

    jobs.prune_dead_letters = broken_disk
    assert not jobs.run(RETENTION)
    runtime.close()  # the shutdown flushes what waits for export

    spans = tap.spans()
    batches = [s.attributes for s in spans if s.name == "ragmon.batch"]
    assert batches == [
        {"ragmon.batch.source": "http", "ragmon.batch.records": 6, "ragmon.batch.accepted": 4,
         "ragmon.batch.dead_lettered": 2, "ragmon.batch.duplicates": 1, "ragmon.batch.outcome": "processed"},
        {"ragmon.batch.source": "kafka", "ragmon.batch.records": 1, "ragmon.batch.accepted": 1,
         "ragmon.batch.dead_lettered": 0, "ragmon.batch.duplicates": 0, "ragmon.batch.outcome": "processed"}]
    jobs_seen = [s.attributes for s in spans if s.name == "ragmon.job"]
    assert jobs_seen == [{"ragmon.job.name": "staleness-scan", "ragmon.job.outcome": "ok"},
                         {"ragmon.job.name": "retention", "ragmon.job.outcome": "failed", "error.type": "OSError"}]
    assert len(spans) == 4 and all(s.end_ns > s.start_ns and s.parent_id == "" for s in spans)
    resource = spans[0].resource
    assert (resource["service.name"], resource["service.version"], resource["ragmon.command"]) == (
        "ragmon", __version__, "serve")
    for secret in (QUERY, CALLER, PASSAGE, first):
        assert not any(secret.encode() in b for b in tap.bodies), secret
    assert metric_sum(runtime.registry, "ragmon_telemetry_spans_total", outcome="exported") == 4
    # the receiving ragmon took them as traces with no retrieval in them: counted, not processed
    deadline = time.monotonic() + 10
    while metric_sum(receiving.registry, "ragmon_otlp_traces_without_retrieval_total") < 4:
        assert time.monotonic() < deadline, "the receiver never assembled the four spans"
        time.sleep(0.1)
    assert receiving.pipeline.stats.snapshot() == ({}, {})


def test_a_refused_batch_is_a_span_with_its_error_type_and_no_message(tmp_path):
    exporter = InMemorySpanExporter()
    store = MemorySink("store", durable=True)
    store.fail_with = Retryable(f"store down while writing {CALLER}")
    runtime = build_runtime(load_settings(environ=environ(tmp_path)), registry=CollectorRegistry(),
                            extra_sinks=[store], command="replay", span_exporter=exporter)
    with pytest.raises(Retryable):
        runtime.pipeline.process([RawRecord("file", trace("trace-7f3a-1"), privilege=Privilege.TRUSTED)])
    runtime.close()
    [span] = exporter.get_finished_spans()
    assert dict(span.attributes) == {"ragmon.batch.source": "file", "ragmon.batch.records": 1,
                                     "ragmon.batch.outcome": "refused", "error.type": "Retryable"}
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "Retryable"
    assert not span.events and span.resource.attributes["ragmon.command"] == "replay"


class Stuck(SpanExporter):
    """A collector that does not answer until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans) -> SpanExportResult:
        self.release.wait(30)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def test_a_collector_that_does_not_answer_never_holds_the_pipeline_and_drops_are_counted(tmp_path):
    exporter = Stuck()
    settings = load_settings(environ=environ(tmp_path, RAGMON_TELEMETRY__MAX_QUEUE_SPANS="3",
                                             RAGMON_TELEMETRY__MAX_EXPORT_SPANS="3"))
    runtime = build_runtime(settings, registry=CollectorRegistry(), command="serve", span_exporter=exporter)
    started = time.monotonic()
    for i in range(40):
        runtime.pipeline.process([RawRecord("http", trace(f"trace-{i}"))])
    assert time.monotonic() - started < 5  # 40 batches with their sinks, none waiting for the collector
    count = lambda outcome: metric_sum(runtime.registry, "ragmon_telemetry_spans_total", outcome=outcome)  # noqa: E731
    # at most one export held by the collector and one queue of three more: the rest is dropped
    assert count("dropped") >= 40 - 6 and count("exported") == 0
    exporter.release.set()
    runtime.close()
    assert count("exported") == exporter.exported and count("exported") + count("dropped") == 40


@pytest.mark.parametrize(("endpoint", "host", "port", "refused"), [
    ("http://127.0.0.1:4318/v1/traces", "127.0.0.1", 4318, True),
    ("http://localhost:4318/v1/traces", "127.0.0.1", 4318, True),
    ("http://[::1]:4318/v1/traces", "127.0.0.1", 4318, True),
    ("http://127.0.0.2:4318/v1/traces", "localhost", 4318, True),
    ("http://[::ffff:127.0.0.1]:4318/v1/traces", "::1", 4318, True),
    ("http://localhost:4318/v1/traces", "0.0.0.0", 4318, True),
    ("http://10.1.2.3:4318/v1/traces", "10.1.2.3", 4318, True),
    ("http://127.0.0.1:80/v1/traces", "127.0.0.1", 80, True),
    ("http://127.0.0.1/v1/traces", "127.0.0.1", 80, True),  # the scheme's port
    ("http://localhost:4318/v1/traces", "127.0.0.1", 4319, False),
    ("http://otel-collector:4318/v1/traces", "0.0.0.0", 4318, False),
    ("http://localhost:4318/v1/traces", "10.1.2.3", 4318, False),  # that process is not on loopback
    ("https://127.0.0.1/v1/traces", "127.0.0.1", 80, False),
])
def test_an_endpoint_that_is_the_process_own_port_is_refused(endpoint, host, port, refused):
    problem = TelemetryConfig(otlp_endpoint=endpoint).loop_problem(host, port)
    assert (problem is not None) == refused, problem


def test_the_own_port_is_refused_by_the_runtime_and_by_the_commands(tmp_path):
    port = free_port()
    settings = load_settings(environ=environ(tmp_path, RAGMON_HTTP__PORT=str(port),
                                             RAGMON_TELEMETRY__OTLP_ENDPOINT=f"http://localhost:{port}/v1/traces"))
    with pytest.raises(ConfigError, match=r"^telemetry\.otlp_endpoint: http://localhost:\d+/v1/traces is this process"):
        build_runtime(settings, registry=CollectorRegistry(), command="serve")
    env = {**RagmonServer(tmp_path).env, "RAGMON_TELEMETRY__OTLP_ENDPOINT": f"http://127.0.0.1:{port}/v1/traces"}
    checked = subprocess.run([sys.executable, "-m", "ragmon", "config", "check"], capture_output=True, text=True,
                             env={**env, "RAGMON_HTTP__PORT": str(port)}, timeout=60)
    assert checked.returncode == 2 and "telemetry.otlp_endpoint" in checked.stderr, checked.stderr
    # the configured port is another, but --port serves this one
    served = subprocess.run([sys.executable, "-m", "ragmon", "serve", "--port", str(port)], capture_output=True,
                            text=True, env=env, timeout=60)
    assert served.returncode == 2 and "telemetry.otlp_endpoint" in served.stderr, served.stderr


def test_without_an_endpoint_nothing_of_the_sdk_is_loaded(tmp_path):
    code = f"""
import sys
from prometheus_client import CollectorRegistry
from ragmon.monitor.app.wiring import build_jobs, build_runtime
from ragmon.monitor.config.settings import load_settings
runtime = build_runtime(load_settings(environ={environ(tmp_path)!r}), registry=CollectorRegistry(), command="serve")
assert runtime.telemetry is None and build_jobs(runtime).tracer is None
print(sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk")))
runtime.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.integration
def test_ragmon_serve_and_scheduler_export_their_spans_to_another_ragmon_at_shutdown(tmp_path):
    """Two processes: `serve` and `scheduler` tracing themselves into a second `ragmon serve`. The
    export interval is longer than the test, so only the flush at shutdown can deliver."""
    (tmp_path / "receiver").mkdir()
    (tmp_path / "serve").mkdir()
    (tmp_path / "scheduler").mkdir()
    with RagmonServer(tmp_path / "receiver") as receiving:
        endpoint = {"RAGMON_TELEMETRY__OTLP_ENDPOINT": f"{receiving.url}/v1/traces",
                    "RAGMON_TELEMETRY__EXPORT_INTERVAL_SECONDS": "600"}
        count = lambda: scraped(receiving.url, "ragmon_otlp_traces_without_retrieval_total")  # noqa: E731
        with RagmonServer(tmp_path / "serve", RAGMON_SCHEDULER__EMBEDDED="false", **endpoint) as serving:
            for i in range(3):
                answer = httpx.post(f"{serving.url}/v1/events", content=trace(f"trace-7f3a-{i}"),
                                    headers={"content-type": "application/json"})
                assert answer.status_code == 200
            time.sleep(1.5)
            assert count() == 0  # still waiting in the export queue
            assert serving.stop() is not None
        wait_for(lambda: count() == 3, "the three batch spans")
        scheduler = RagmonServer(tmp_path / "scheduler", "scheduler",
                                 RAGMON_SCHEDULER__STALENESS_INTERVAL_SECONDS="1", **endpoint).start()
        try:
            runs_of = lambda: scraped(scheduler.url, "ragmon_job_runs_total", scheduled_job="staleness-scan")  # noqa: E731
            wait_for(lambda: runs_of() >= 2, "two scans")
        finally:
            scheduler.stop()
        runs = scheduler.log_path.read_text().count("job staleness-scan done")
        assert runs >= 2
        wait_for(lambda: count() == 3 + runs, f"{runs} job spans")
        assert scraped(receiving.url, "ragmon_http_request_duration_seconds_count", route="/v1/traces",
                       status="200") == 2


def wait_for(condition, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
