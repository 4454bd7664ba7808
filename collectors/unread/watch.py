"""What the OTLP receiver does with each assembled trace besides delivering it: count it by its
instrumentation scope as read or not, and explain the ones ragmon could not read, or read without
a caller or without a context (docs/events.md, "Traces ragmon cannot read").

- **Counted**, every trace, by its scope (:func:`trace_scope`): read or without retrieval, and for
  a read one what it lacked (``TraceReport``: the metrics, in ``ragmon serve``).
- **Said**: a WARNING once an hour per scope and per thing missing (at most
  :data:`MAX_WARNED_SCOPES` scopes a kind; the rest share one line), naming the scope, the
  closest dialect and what it lacked: no value of the trace.
- **Kept**: a row per such trace (``keep``: the unread store), with its bounded, redacted digest
  (``digest``) and the closest dialect (``closest``). A trace shaped like one kept in the last
  :data:`REPEAT_SECONDS` (same scope, tenant, span names and kinds, same thing missing) is only
  counted, as is one over the rate (``per_minute``, a minute's worth of burst). Rows are written
  once per delivery round (:meth:`UnreadWatch.flush`); a store that refuses them loses them,
  counted: an explanation never holds up traces.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ragmon.collectors import semconv as sc
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.unread.closest import CALLER, CONTEXT, RETRIEVAL, Closest, DialectGuess, RegistryDialects
from ragmon.collectors.unread.digest import digest
from ragmon.collectors.unread.names import ShownNames
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.rate_limit import TokenBucket

log = logging.getLogger(__name__)

REPEAT_SECONDS = 3600.0  # a trace shaped like one kept this recently is only counted
WARN_SECONDS = 3600.0
MAX_SHAPES = 10_000  # shapes remembered (the oldest forgotten first)
MAX_WARNED_SCOPES = 256  # scopes warned about apart, per thing missing; the rest share one line
OTHER_SCOPES = "(other scopes)"
NAME_LENGTH = 256  # the width of the stored tenant, scope and trace id columns
LACKED_LENGTH = 1024
STORED, REPEATED, RATE_LIMITED, FAILED = "stored", "repeated", "rate_limited", "failed"
_CONSEQUENCE = {
    RETRIEVAL: "yield no retrieval and go no further (no signal, no sample, no finding)",
    CALLER: "are read without a caller: their permission checks see the tenant only",
    CONTEXT: "are read without a context: nothing reached the model that ragmon could judge",
}

Keep = Callable[[list[dict[str, Any]]], None]  # stores rows; raises Retryable when it cannot


class TraceReport(Protocol):
    """Where the counts go (``exporters/instruments.Metrics`` in ``ragmon serve``)."""

    def otlp_trace(self, scope: str, read: bool, missing: Sequence[str]) -> None:
        """One trace of ``scope`` (a shown name): ``read`` into a trace event or not; ``missing``:
        what a read one lacked (``caller``, ``context``)."""

    def unread_digests(self, outcome: str, n: int) -> None:
        """``n`` digests stored, repeated, rate_limited or failed."""


def trace_root(spans: Sequence[Span]) -> Span:
    """The root span: the earliest span whose parent is not in the trace."""
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if not span.parent_id or span.parent_id not in ids]
    return min(roots or spans, key=lambda span: span.start_ns)


def trace_scope(spans: Sequence[Span]) -> str:
    """The instrumentation scope a trace is counted under: the one most of its spans came from (a
    web framework's one server span does not hide the RAG framework's many), a tie going to the
    root span's scope, then to the first by name."""
    scopes = {span.scope for span in spans}
    if len(scopes) == 1:  # nearly always: one instrumentation made the whole trace
        return spans[0].scope
    counts = Counter(span.scope for span in spans)
    top = max(counts.values())
    tied = sorted(name for name, n in counts.items() if n == top)
    root = trace_root(spans).scope
    return root if root in tied else tied[0]


def _context(event: dict[str, Any]) -> list[Any]:
    """The passages the model saw: the event's context, else its last retrieval list."""
    if "context" in event:
        return event["context"] or []
    retrievals = event.get("retrievals") or []
    return retrievals[-1].get("passages") or [] if retrievals else []


class UnreadWatch:
    """Counts, says and keeps, as the module's docstring tells. Called from the receiver's
    delivery thread; thread-safe."""

    def __init__(self, shown: Callable[[str], str], report: TraceReport, keep: Keep, *, per_minute: float = 10.0,
                 dialects: DialectGuess | None = None, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``shown``: ``Redactor.shown_id``; ``dialects``: what tells the closest dialect (the
        receiver's dialect registry); ``clock`` stamps the rows, ``monotonic`` drives the rate, the
        repeats and the warnings."""
        self._shown = shown
        self._names = ShownNames(shown)
        self._report = report
        self._keep = keep
        self._dialects = dialects or RegistryDialects()
        self._clock = clock
        self._monotonic = monotonic
        self._bucket = TokenBucket(per_minute / 60, max(1.0, per_minute), monotonic)
        self._shapes: OrderedDict[int, float] = OrderedDict()
        self._warned: dict[tuple[str, str], float] = {}  # (scope, what) -> when it was said
        self._warned_scopes: Counter[str] = Counter()  # scopes warned about apart, per what
        self._pending: dict[str, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def observe(self, spans: Sequence[Span], event: dict[str, Any] | None, unmapped: int = 0) -> None:
        """One assembled trace and the trace event it mapped to (None: no retrieval in it);
        ``unmapped``: passages the mapping left out. An event holding a ``mapping_error`` is a
        dead letter, counted there: not here."""
        if not spans or (event is not None and "mapping_error" in event):
            return
        scope = self._names.name(trace_scope(spans))
        if event is None:
            missing: tuple[str, ...] = (RETRIEVAL,)
        else:
            missing = tuple(what for what, lacking in ((CALLER, "caller" not in event),
                                                       (CONTEXT, not _context(event))) if lacking)
        self._report.otlp_trace(scope, event is not None, missing)
        if not missing:
            return
        now = self._monotonic()
        with self._lock:
            for what in missing:
                closest = None
                if self._due_warning(scope, what, now):
                    closest = self._dialects.closest(spans, what, unmapped)
                    self._warn(scope, what, closest)
                shape = self._shape(spans, event, scope, what)
                outcome = self._admit(shape, now)
                if outcome is not None:
                    self._report.unread_digests(outcome, 1)
                    continue
                row = self._row(spans, event, scope, what, closest or self._dialects.closest(spans, what, unmapped))
                self._pending[row["key"]] = (shape, row)

    def flush(self) -> None:
        """Store the rows kept since the last flush; a store that refuses them loses them,
        counted as failed (their shapes may be kept again)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            self._keep([row for _, row in pending.values()])
        except Retryable as error:
            with self._lock:
                for shape, _ in pending.values():
                    self._shapes.pop(shape, None)
            log.warning("%d digests of OTLP traces ragmon could not read were not stored: %s", len(pending), error)
            self._report.unread_digests(FAILED, len(pending))
            return
        self._report.unread_digests(STORED, len(pending))

    # -- under the lock --------------------------------------------------------------------------

    def _due_warning(self, scope: str, what: str, now: float) -> bool:
        key = (scope, what)
        if key not in self._warned:
            if self._warned_scopes[what] >= MAX_WARNED_SCOPES:
                key = (OTHER_SCOPES, what)
            else:
                self._warned_scopes[what] += 1
        last = self._warned.get(key)
        if last is not None and now - last < WARN_SECONDS:
            return False
        self._warned[key] = now
        return True

    def _warn(self, scope: str, what: str, closest: Closest) -> None:
        dialect = f"closest dialect {closest.dialect}" if closest.dialect else "no dialect ragmon reads"
        log.warning("OTLP traces of instrumentation scope %s %s (%s; it lacked %s). `ragmon otlp unread` and "
                    "GET /api/v1/unread list them; said once an hour per scope", scope, _CONSEQUENCE[what], dialect,
                    closest.lacked)

    def _admit(self, shape: int, now: float) -> str | None:
        """None when a trace of ``shape`` is to be kept, else the outcome it is counted under."""
        seen = self._shapes.get(shape)
        if seen is not None and now - seen < REPEAT_SECONDS:
            return REPEATED
        if not self._bucket.take():
            return RATE_LIMITED
        self._shapes[shape] = now
        self._shapes.move_to_end(shape)
        while len(self._shapes) > MAX_SHAPES:
            self._shapes.popitem(last=False)
        return None

    @staticmethod
    def _shape(spans: Sequence[Span], event: dict[str, Any] | None, scope: str, what: str) -> int:
        tenant = event.get("tenant") if event is not None else _resource_tenant(spans)
        return hash((what, scope, tenant, frozenset((s.scope, s.name, s.kind) for s in spans)))

    def _row(self, spans: Sequence[Span], event: dict[str, Any] | None, scope: str, what: str,
             closest: Closest) -> dict[str, Any]:
        root = trace_root(spans)
        tenant = event.get("tenant") if event is not None else _resource_tenant(spans)
        trace_id = self._shown(root.trace_id)[:NAME_LENGTH]
        return {
            "key": hashlib.sha256(f"{trace_id}\0{what}".encode()).hexdigest(), "trace_id": trace_id,
            "time": root.start_ns / 1e9, "recorded_at": self._clock(),
            "tenant": self._shown(tenant)[:NAME_LENGTH] if isinstance(tenant, str) and tenant else "",
            "scope": scope[:NAME_LENGTH], "missing": what, "dialect": closest.dialect or "",
            "lacked": closest.lacked[:LACKED_LENGTH], "spans": len(spans), "digest": digest(spans, self._names),
        }


def _resource_tenant(spans: Sequence[Span]) -> str | None:
    """The tenant an unread trace names: the resource's ``ragmon.tenant`` (of the root span first)."""
    for span in (trace_root(spans), *spans):
        tenant = span.resource.get(sc.TENANT)
        if isinstance(tenant, str) and tenant:
            return tenant
    return None
