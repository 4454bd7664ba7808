"""ragmon's own traces, on the OpenTelemetry SDK: a span per processed batch (``ragmon.batch``)
and per scheduled job run (``ragmon.job``), exported over OTLP/HTTP to ``telemetry.otlp_endpoint``
(docs/deployment.md, "Self-telemetry").

Built only when that endpoint is set (:func:`build_telemetry`): otherwise no tracer provider
exists and the pipeline and the jobs run exactly as without this module.

The export never holds the pipeline: a finished span waits in a bounded queue for the SDK's
``BatchSpanProcessor``, whose own thread encodes and sends; a span finding the queue full is
dropped and counted, and every exported or failed span is counted too
(``ragmon_telemetry_spans_total{outcome}``). :meth:`SelfTelemetry.shutdown` sends what waits.

A span carries counts and closed-set names only (source, job, outcome, the type of an error):
never a caller id, a query, passage text, or an error's message, which may quote the values of
a database statement.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from ragmon import __version__
from ragmon.monitor.config.telemetry import TelemetryConfig
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import BatchResult

BATCH_SPAN, JOB_SPAN = "ragmon.batch", "ragmon.job"
# span attributes
SOURCE, RECORDS, ACCEPTED = "ragmon.batch.source", "ragmon.batch.records", "ragmon.batch.accepted"
DEAD_LETTERED, DUPLICATES = "ragmon.batch.dead_lettered", "ragmon.batch.duplicates"
BATCH_OUTCOME = "ragmon.batch.outcome"  # processed | refused (Retryable: to be retried) | failed
JOB, JOB_OUTCOME = "ragmon.job.name", "ragmon.job.outcome"  # outcome: ok | failed
ERROR_TYPE = "error.type"  # OpenTelemetry's name for it
COMMAND = "ragmon.command"  # resource attribute: serve, scheduler, replay, ...

Report = Callable[[str, int], None]  # (outcome: exported | failed | dropped, spans)


class BatchTracer:
    """A span per processed batch: the pipeline's :class:`~ragmon.monitor.core.pipeline.BatchObserver`.
    The span lasts while the batch holds the pipeline (decoding, stages, durable sinks, dead
    letters, metrics), not while it waited for the pipeline's lock."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def begin(self, source: str, records: int) -> Span:
        return self._tracer.start_span(BATCH_SPAN, attributes={SOURCE: source, RECORDS: records})

    def end(self, span: Span, result: BatchResult | None, error: BaseException | None) -> None:
        if result is not None:
            span.set_attributes({ACCEPTED: result.accepted, DEAD_LETTERED: result.rejected,
                                 DUPLICATES: result.duplicates, BATCH_OUTCOME: "processed"})
        else:
            _failed(span, error)
            span.set_attribute(BATCH_OUTCOME, "refused" if isinstance(error, Retryable) else "failed")
        span.end()


class JobTracer:
    """A span per scheduled job run (``monitor/app/jobs.py``), with the job's name and outcome."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def begin(self, job: str) -> Span:
        return self._tracer.start_span(JOB_SPAN, attributes={JOB: job})

    def end(self, span: Span, error: BaseException | None = None) -> None:
        if error is None:
            span.set_attribute(JOB_OUTCOME, "ok")
        else:
            _failed(span, error)
            span.set_attribute(JOB_OUTCOME, "failed")
        span.end()


def _failed(span: Span, error: BaseException | None) -> None:
    name = type(error).__name__ if error is not None else "unknown"
    span.set_attribute(ERROR_TYPE, name)
    span.set_status(Status(StatusCode.ERROR, name))  # the type only: a message may quote data


class SelfTelemetry:
    """The tracer provider of one ragmon process and the two tracers made from it."""

    def __init__(self, provider: TracerProvider, timeout: float) -> None:
        self.provider = provider
        self._timeout = timeout
        tracer = provider.get_tracer("ragmon", __version__)
        self.batches = BatchTracer(tracer)
        self.jobs = JobTracer(tracer)

    def shutdown(self) -> bool:
        """Export what waits, then stop the export thread; False when that took longer than the
        export timeout (the process then stops without waiting for it: a collector that does not
        answer must not hold a shutdown)."""
        stopping = threading.Thread(target=self.provider.shutdown, name="ragmon-telemetry-shutdown", daemon=True)
        stopping.start()
        stopping.join(self._timeout)
        return not stopping.is_alive()


def build_telemetry(config: TelemetryConfig, command: str, report: Report,
                    exporter: SpanExporter | None = None) -> SelfTelemetry | None:
    """ragmon's own tracing for the process running ``command``, or None when
    ``telemetry.otlp_endpoint`` is not set. ``exporter`` replaces the OTLP/HTTP exporter (tests);
    ``report`` counts spans by outcome. The endpoint was checked against this process's own port
    by the caller (``TelemetryConfig.loop_problem``)."""
    if config.otlp_endpoint is None and exporter is None:
        return None
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        headers = {"authorization": f"Bearer {config.otlp_token.get_secret_value()}"} if config.otlp_token else None
        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint, headers=headers, timeout=config.timeout_seconds)
    # OTEL_RESOURCE_ATTRIBUTES (e.g. the pod's name, set by the chart's users) are merged in; ours win
    resource = Resource.create({"service.name": "ragmon", "service.version": __version__, COMMAND: command,
                                "service.instance.id": str(uuid.uuid4())})
    # shut down by Runtime.close within the export timeout, not by an exit hook that could wait longer
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BoundedExport(exporter, config, report))
    return SelfTelemetry(provider, config.timeout_seconds)


class BoundedExport(SpanProcessor):
    """The SDK's ``BatchSpanProcessor`` behind a gate that counts what it drops.

    The SDK's queue drops silently (a log line) when full; the gate admits a finished span only
    while fewer than ``max_queue_spans`` wait, so the SDK's queue (as large) never drops, and every
    span is counted once: dropped here, or exported or failed by :class:`_CountingExporter`."""

    def __init__(self, exporter: SpanExporter, config: TelemetryConfig, report: Report) -> None:
        self._limit = config.max_queue_spans
        self._waiting = 0
        self._lock = threading.Lock()
        self._report = report
        self._batch = BatchSpanProcessor(
            _CountingExporter(exporter, self._taken, report), max_queue_size=config.max_queue_spans,
            schedule_delay_millis=config.export_interval_seconds * 1000,
            max_export_batch_size=config.max_export_spans, export_timeout_millis=config.timeout_seconds * 1000)

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context.trace_flags.sampled:
            return  # the batch processor exports sampled spans only (OTEL_TRACES_SAMPLER may sample)
        with self._lock:
            admitted = self._waiting < self._limit
            if admitted:
                self._waiting += 1
        if admitted:
            self._batch.on_end(span)
        else:
            self._report("dropped", 1)

    def _taken(self, spans: int) -> None:
        """Spans left the queue for an export (counted early: the gate errs on dropping)."""
        with self._lock:
            self._waiting -= spans

    def shutdown(self) -> None:
        self._batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)


class _CountingExporter(SpanExporter):
    """Tells the gate when spans leave the queue and counts each export's spans by outcome."""

    def __init__(self, exporter: SpanExporter, taken: Callable[[int], None], report: Report) -> None:
        self._exporter = exporter
        self._taken = taken
        self._report = report

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._taken(len(spans))
        try:
            result = self._exporter.export(spans)
        except Exception:
            self._report("failed", len(spans))
            raise  # the batch processor logs it
        self._report("exported" if result is SpanExportResult.SUCCESS else "failed", len(spans))
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)
