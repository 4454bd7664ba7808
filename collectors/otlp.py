"""The OTLP/HTTP trace receiver: ``POST /v1/traces`` (protobuf or JSON, optionally gzip).

The spans of one OTel trace can arrive in several requests, so spans wait in a bounded
assembler until no new span of their trace came for ``wait`` seconds, or for ``root_grace``
seconds once its root span (the one without a parent, which ends and is exported last) has come;
the trace is then mapped
to one ragmon trace event (``ragmon.collectors.span_mapping``) and goes through the pipeline like any
other record (decoded, validated, dead-lettered if wrong), or is forwarded to the traces topic. A
span set with no retrieval in it maps to no event; it, and a trace read without a caller or a
context, is counted by its instrumentation scope and explained (``ragmon.collectors.unread``).

Answers follow OTLP: 200 with ``partial_success`` counting the spans it could not take and naming
each attribute it could not read (the span is kept: only that attribute's contribution is lost),
400 for a body that is not an export, 413 too large, 415 other content types, 503 with
``Retry-After`` when the assembler is full. Spans are held in memory between the 200 and their trace's delivery;
a graceful shutdown delivers them all, a crash loses at most those not yet delivered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragmon.collectors.otlp_wire import PayloadError, Span, parse_json, parse_protobuf
from ragmon.collectors.semconv import FEEDBACK_TRACE_ID
from ragmon.collectors.span_mapping import Mapped, SpanMapper, feedback_event
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.core.retry import GaveUp, RetryPolicy, until_accepted

log = logging.getLogger(__name__)
SOURCE = "otlp"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

BACKOFF = RetryPolicy(initial=0.5, maximum=10.0)
Deliver = Callable[[list[RawRecord], list[dict[str, Any]]], None]  # (records, the events they encode)
MAX_PROBLEMS_LISTED = 20  # attribute problems named in one answer; all of them are counted


class MappingReport(Protocol):
    """Where the receiver reports what it could not take as given (metrics, in `ragmon serve`)."""

    def malformed_attributes(self, attributes: list[str]) -> None:
        """One entry per malformed attribute, by its name in ``semconv.CHECKED_ATTRIBUTES``."""

    def mapped(self, mapped: Mapped) -> None:
        """A trace was mapped: derived ids, unmapped passages, or no retrieval at all."""


class NoReport:
    def malformed_attributes(self, attributes: list[str]) -> None:
        pass

    def mapped(self, mapped: Mapped) -> None:
        pass


class TraceWatch(Protocol):
    """What sees every assembled trace beside its delivery (``collectors.unread.watch.UnreadWatch``)."""

    def observe(self, spans: list[Span], event: dict[str, Any] | None, unmapped: int) -> None:
        """One trace's spans and the event they mapped to (None: no retrieval)."""

    def flush(self) -> None:
        """Once per delivery round, after the round's traces were observed."""


class NoWatch:
    def observe(self, spans: list[Span], event: dict[str, Any] | None, unmapped: int) -> None:
        pass

    def flush(self) -> None:
        pass


class AssemblerFull(Exception):
    """No room for another trace: the client should retry later."""


@dataclass
class _Pending:
    spans: list[Span] = field(default_factory=list)
    last_seen: float = 0.0
    rooted: bool = False  # its root span has arrived
    wire_bytes: float = 0.0  # its spans' share of the request bodies they came in


class TraceAssembler:
    """Groups spans by trace id until their trace has been quiet for ``wait`` seconds.

    Holds at most ``max_traces`` traces, ``max_spans`` spans per trace and ``max_bytes`` of the
    request bodies the held spans came in (each span weighs its request's size divided by its span
    count); a request that would start more traces than there is room for, or go over the bytes,
    is refused whole (:class:`AssemblerFull`), spans over a trace's bound are counted as rejected.
    """

    def __init__(self, wait: float, max_traces: int, max_spans: int, clock: Callable[[], float] = time.monotonic,
                 root_grace: float | None = None, max_bytes: int | None = None):
        """``root_grace``: how long a trace whose root span arrived waits for stragglers (other
        services' spans); at most ``wait``, which it defaults to."""
        self._wait = wait
        self._root_grace = wait if root_grace is None else min(root_grace, wait)
        self._max_traces = max_traces
        self._max_spans = max_spans
        self._clock = clock
        self._max_bytes = max_bytes
        self._bytes = 0.0
        self._traces: OrderedDict[str, _Pending] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, spans: list[Span], wire_bytes: int = 0) -> int:
        """Take ``spans`` (which came in ``wire_bytes`` of request body); return how many were
        rejected. Raises :class:`AssemblerFull`."""
        now = self._clock()
        weight = wire_bytes / len(spans) if spans else 0.0
        with self._lock:
            new = {s.trace_id for s in spans} - self._traces.keys()
            if len(self._traces) + len(new) > self._max_traces:
                raise AssemblerFull(f"{len(self._traces)} traces are being assembled")
            if (full := self.refuses(wire_bytes)) is not None:
                raise AssemblerFull(full)
            rejected = 0
            for span in spans:
                pending = self._traces.get(span.trace_id)
                if pending is None:
                    pending = self._traces[span.trace_id] = _Pending()
                if len(pending.spans) >= self._max_spans:
                    rejected += 1
                    continue
                pending.spans.append(span)
                pending.wire_bytes += weight
                self._bytes += weight
                pending.last_seen = now
                if not span.parent_id:
                    pending.rooted = True
                self._traces.move_to_end(span.trace_id)
            return rejected

    def refuses(self, wire_bytes: int) -> str | None:
        """Why a request body of ``wire_bytes`` would be refused whatever its spans (the held bytes
        are at their bound), else None: :meth:`add` would raise :class:`AssemblerFull` with it."""
        held = self._bytes  # one float read: no lock needed for a hint that add() checks again
        if self._max_bytes is not None and held + wire_bytes > self._max_bytes:
            return f"{held / 1e6:.1f} MB of spans are being assembled (otlp.max_pending_bytes)"
        return None

    def due(self, everything: bool = False) -> list[list[Span]]:
        """Remove and return the traces quiet for ``wait`` seconds, or for ``root_grace`` seconds
        with their root span in (all of them if ``everything``), oldest first."""
        now = self._clock()
        horizon, rooted_horizon = now - self._wait, now - self._root_grace
        with self._lock:
            ready = []
            for trace_id, pending in self._traces.items():  # in order of their last span
                if pending.last_seen > rooted_horizon and not everything:
                    break  # this one and all after it heard from too recently
                if everything or pending.rooted or pending.last_seen <= horizon:
                    ready.append(trace_id)
            taken = [self._traces.pop(trace_id) for trace_id in ready]
            self._bytes = max(0.0, self._bytes - sum(pending.wire_bytes for pending in taken))
            return [pending.spans for pending in taken]

    def __len__(self) -> int:
        return len(self._traces)


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


def _mapped(mapper: SpanMapper, spans: list[Span]) -> Mapped:
    """The trace event of ``spans``. Should the mapping fail (a bug: it is meant to take any
    attribute values), the trace is not dropped: it becomes an event without its required fields,
    which the pipeline dead-letters with the error beside the trace id, and the failure is logged."""
    try:
        return mapper.map(spans)
    except Exception as error:
        # The message may quote attribute values (queries, passages): it goes to the dead letter,
        # which is access-controlled like the data, and only the error's type to the log.
        log.error("could not map the spans of an OTLP trace to a trace event (%s); dead-lettered",
                  type(error).__name__)
        log.debug("mapping failure", exc_info=True)
        return Mapped({"type": "trace", "trace_id": spans[0].trace_id,
                       "mapping_error": f"{type(error).__name__}: {error}"})


class OtlpReceiver:
    """Parses export requests into the assembler; a background thread delivers quiet traces. A
    :class:`~ragmon.monitor.core.pipeline.Source`: it never stops on its own and is always ready."""

    error: BaseException | None = None

    def __init__(self, assembler: TraceAssembler, deliver: Deliver, *, interval: float = 0.5,
                 retry: RetryPolicy = BACKOFF, mapper: SpanMapper | None = None,
                 report: MappingReport | None = None, watch: TraceWatch | None = None) -> None:
        self._assembler = assembler
        self._deliver = deliver
        self._mapper = mapper or SpanMapper()
        self._report = report or NoReport()
        self._watch = watch or NoWatch()
        self._interval = interval
        self._retry = retry
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._encode = msgspec.json.Encoder().encode
        self._undelivered: list[dict[str, Any]] = []  # refused while stopping: for the final flush

    def receive(self, body: bytes, content_type: str) -> Answer:
        media = content_type.split(";")[0].strip().lower()
        if media not in (PROTOBUF, JSON):
            return self._answer(media if media == JSON else PROTOBUF, 415, f"unsupported content type {media!r}")
        # Full by the bytes held, the request is refused whatever it holds: before it is parsed and
        # its spans read, which is most of the cost of a request, paid again at each of the client's
        # retries while the assembler stays full (as often as once a request under a sustained load)
        if (full := self._assembler.refuses(len(body))) is not None:
            return self._answer(media, 503, full, {"Retry-After": "2"})
        try:
            spans = parse_protobuf(body) if media == PROTOBUF else parse_json(body)
        except PayloadError as error:
            return self._answer(media, 400, str(error))
        valid = [s for s in spans if len(s.trace_id) == 32 and s.trace_id.strip("0")]
        rejected = len(spans) - len(valid)
        feedback = [s for s in valid if s.attributes.get(FEEDBACK_TRACE_ID)]
        traced = [s for s in valid if not s.attributes.get(FEEDBACK_TRACE_ID)]
        problems = []
        for span in traced:  # read once, here, so that the answer can name what could not be used
            span.reading = self._mapper.dialects.read(span)
            problems.extend((span.span_id, *problem) for problem in span.reading.problems)
        try:
            rejected += self._assembler.add(traced, len(body))
        except AssemblerFull as error:
            return self._answer(media, 503, str(error), {"Retry-After": "2"})
        if feedback:
            events = [e for e in map(feedback_event, feedback) if e is not None]
            try:
                self._deliver(self._records(events), events)
            except Retryable as error:
                return self._answer(media, 503, str(error), {"Retry-After": "5"})
        if problems:
            self._report.malformed_attributes([attribute for _, attribute, _ in problems])
        return self._answer(media, 200, _partial_message(rejected, problems), rejected=rejected)

    def ready(self) -> bool:
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="otlp-assembler", daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float) -> bool:
        """Stop, then deliver every trace still being assembled."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._flush(everything=True)
        return self._thread is None or not self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._flush()
            except Exception as error:  # a bug must not end delivery for every later trace
                log.error("delivering assembled traces failed (%s)", type(error).__name__)
                log.debug("delivery failure", exc_info=True)

    def _flush(self, everything: bool = False) -> None:
        events, self._undelivered = self._undelivered, []
        for spans in self._assembler.due(everything):
            mapped = _mapped(self._mapper, spans)
            self._report.mapped(mapped)
            self._explaining(self._watch.observe, spans, mapped.event, mapped.unmapped)
            if mapped.event is not None:
                events.append(mapped.event)
        self._explaining(self._watch.flush)
        if not events:
            return
        records = self._records(events)

        def wait(delay: float) -> bool:
            if self._stop.is_set() and not everything:
                return False
            time.sleep(delay)
            return True

        try:
            until_accepted(lambda: self._deliver(records, events), self._retry, wait,
                           lambda error, delay: log.warning("assembled traces refused (%s); retrying in %.1f s",
                                                            error, delay))
        except GaveUp:
            self._undelivered = events  # stopping: the final flush at shutdown delivers them first

    @staticmethod
    def _explaining(call: Callable[..., None], *args: Any) -> None:
        try:
            call(*args)
        except Exception as error:  # a bug explaining a trace must not keep it, or later ones, from delivery
            log.error("could not explain an assembled OTLP trace (%s)", type(error).__name__)
            log.debug("explaining failure", exc_info=True)

    def _records(self, events: list[dict[str, Any]]) -> list[RawRecord]:
        # an OTLP client holds the ingest token: its traces' letters say so (they change no catalog anyway)
        return [RawRecord(SOURCE, self._encode(e), {"otel_trace": e.get("trace_id")}, privilege=Privilege.INGEST)
                for e in events]

    def _answer(self, media: str, status: int, message: str, headers: dict[str, str] | None = None,
                rejected: int = 0) -> Answer:
        if media == JSON:
            body: dict[str, Any] = {}
            if status == 200:
                if message:
                    body["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
            else:
                body = {"code": status, "message": message}
            return Answer(status, msgspec.json.encode(body), JSON, headers or {})
        if status == 200:
            response = ExportTraceServiceResponse()
            if message:  # OTLP: a message with no rejected spans is a warning
                response.partial_success.rejected_spans = rejected
                response.partial_success.error_message = message
            return Answer(status, response.SerializeToString(), PROTOBUF, headers or {})
        # Errors carry a google.rpc.Status in protobuf; a plain message is what clients log.
        return Answer(status, message.encode(), "text/plain", headers or {})


def _partial_message(rejected: int, problems: list[tuple[str, str, str]]) -> str:
    """What ``partial_success.error_message`` says: spans refused, then each malformed attribute
    by span id (the span itself was kept)."""
    parts = [f"{rejected} spans rejected (invalid trace id, or over the spans-per-trace limit)"] if rejected else []
    if problems:
        listed = "; ".join(f"span {span_id}: {detail}" for span_id, _, detail in problems[:MAX_PROBLEMS_LISTED])
        more = f"; and {len(problems) - MAX_PROBLEMS_LISTED} more" if len(problems) > MAX_PROBLEMS_LISTED else ""
        parts.append(f"{len(problems)} attributes could not be read and were ignored ({listed}{more})")
    return ". ".join(parts)
