"""Bytes to events: one typed, validating pass (msgspec), then the limits and normalization
(timestamps to Unix seconds, document ids to their join key: ``monitor/core/doc_ids.py``).

Every way a record can be wrong ends as :class:`~ragmon.monitor.core.errors.InvalidInput` with a closed-enum
reason and a detail that names the field by its JSON path. Details never quote field content:
they are written to logs and dead-letter records, and the content may be a user's question.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

import msgspec

from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.acl import BadAcl, read_acl
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.errors import InvalidInput, Reason
from ragmon.monitor.core.model import (
    EVENT_TYPES,
    FEEDBACK_KINDS,
    MAX_TURN,
    DocumentEvent,
    Event,
    FeedbackEvent,
    IndexEvent,
    Passage,
    TraceEvent,
)
from ragmon.monitor.core.times import ACCEPTED, MILLISECONDS_FROM, BadTime, TimeReader

_AT = re.compile(r" - at `(?P<path>[^`]*)`$")
_BACKTICKED = re.compile(r"`([^`]*)`")


def _classify(error: msgspec.ValidationError) -> InvalidInput:
    """Turn msgspec's validation message into a reason and a content-free detail."""
    message = str(error)
    at = _AT.search(message)
    path = at.group("path") if at else "$"
    head = message[: at.start()] if at else message
    if head.startswith("Object missing required field"):
        name = _BACKTICKED.search(head)
        field = f"{path}.{name.group(1)}" if name else path
        return InvalidInput(Reason.MISSING_FIELD, f"missing required field `{field}`", field)
    if path == "$.type" and head.startswith("Invalid value"):
        kinds = ", ".join(EVENT_TYPES)
        return InvalidInput(Reason.UNKNOWN_TYPE, f"`$.type` is not one of {kinds}", path)
    if _is_time_path(path) and head.startswith(("Expected", "Number out of range")):
        return InvalidInput(Reason.BAD_TIMESTAMP, f"`{path}` must be {ACCEPTED}", path)
    if path == "$" and head.startswith("Expected `object`"):
        return InvalidInput(Reason.NOT_AN_OBJECT, "`$`: an event must be a JSON object", path)
    if head.startswith("Invalid enum value"):
        allowed = ", ".join(FEEDBACK_KINDS) if path.endswith(".kind") else "up, down"
        return InvalidInput(Reason.INVALID_VALUE, f"`{path}` is not one of {allowed}", path)
    if head.startswith("Expected"):
        # e.g. "Expected `str`, got `int`": type names only, never the value itself
        return InvalidInput(Reason.WRONG_TYPE, f"`{path}`: {head[0].lower()}{head[1:]}", path)
    return InvalidInput(Reason.INVALID_VALUE, f"`{path}`: invalid value", path)


def _well_formed(data: bytes) -> bool:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        return "out of range" in str(error)  # valid JSON syntax, a number no float can hold
    except RecursionError:
        return False
    return True


def _is_time_path(path: str) -> bool:
    return path.endswith(("time", "_at"))


def _names_shared(trace: TraceEvent) -> TraceEvent:
    """The trace with its tenant and index name replaced by the one string of each name alive
    (``sys.intern``; a name no longer held by anything is freed as any string is). Every trace
    decodes them anew, and the memories of recent traces hold them by the hundred thousand: two
    copies of a short name a trace were about 25 MB at 200,000 recent traces."""
    trace.tenant = sys.intern(trace.tenant)
    trace.index.name = sys.intern(trace.index.name)
    return trace


class Decoder:
    """Decodes one raw record into an :data:`~ragmon.monitor.core.model.Event`, enforcing :class:`Limits`.

    ``clock`` returns the current Unix time; it decides what counts as a future timestamp.
    ``times`` reads every time of an event (``events.time_zone`` decides times without an offset;
    without it they are refused). Thread-safe: holds no per-call state.
    """

    def __init__(self, limits: Limits, clock: Callable[[], float], times: TimeReader | None = None) -> None:
        self._decoder = msgspec.json.Decoder(Event)
        self._limits = limits
        self._clock = clock
        self._times = times if times is not None else TimeReader()

    def decode(self, data: bytes, size: int | None = None) -> Event:
        """Return the validated event with every timestamp as float Unix seconds.

        ``size`` is the record's real size when a source kept only its head (``data`` cut short).
        Raises :class:`InvalidInput` and nothing else, whatever the bytes.
        """
        size = len(data) if size is None else size
        if size > self._limits.max_event_bytes:
            raise InvalidInput(
                Reason.TOO_LARGE,
                f"record is {size} bytes, the limit is {self._limits.max_event_bytes}",
            )
        try:
            event = self._decoder.decode(data)
        except msgspec.ValidationError as error:
            # Typed decoding stops at the first wrong type; a record that is also not JSON at
            # all is reported as malformed, the more basic fault.
            if not _well_formed(data):
                raise InvalidInput(Reason.MALFORMED_JSON, "not valid JSON") from None
            raise _classify(error) from None
        except msgspec.DecodeError as error:
            raise InvalidInput(Reason.MALFORMED_JSON, str(error)) from None
        except RecursionError:
            raise InvalidInput(Reason.MALFORMED_JSON, "JSON nesting is too deep") from None
        now = self._clock()
        if isinstance(event, TraceEvent) and self._trace_fits(event, now + self._limits.max_clock_skew_seconds):
            return _names_shared(event)
        # Not a trace, or a trace that breaks a limit: the thorough pass names the field.
        event = _Checker(self._limits, now, self._times).event(event)
        return _names_shared(event) if isinstance(event, TraceEvent) else event

    def _trace_fits(self, trace: TraceEvent, latest: float) -> bool:
        """The hot path: the same limits as :class:`_Checker` applies to a trace, without
        building field paths, and timestamps normalized in place. False sends the trace to
        :class:`_Checker`, which finds and names the broken field (or accepts it)."""
        max_id = self._limits.max_id_length
        max_text = self._limits.max_text_length
        max_items = self._limits.max_passages_per_list
        if not 0 < len(trace.trace_id) <= max_id or not 0 < len(trace.tenant) <= max_id:
            return False
        if not 0 < len(trace.index.name) <= max_id or len(trace.query) > max_text:
            return False
        if (trace.index.version is not None and len(trace.index.version) > max_id) or (
            trace.conversation_id is not None and len(trace.conversation_id) > max_id
        ):
            return False
        if trace.turn is not None and not 1 <= trace.turn <= MAX_TURN:
            return False
        time_ = trace.time
        if time_.__class__ is not float or time_ >= MILLISECONDS_FROM:  # type: ignore[operator]
            time_ = _seconds_or_none(self._times, time_)
            if time_ is None:
                return False  # left as it came: the checker names it
            trace.time = time_
        if not 0 <= time_ <= latest:
            return False
        caller = trace.caller
        if caller is not None:
            if caller.id is not None and len(caller.id) > max_id:
                return False
            if not _principals_fit(caller.groups, max_id, max_items):
                return False
        if len(trace.retrievals) > self._limits.max_retrieval_lists:
            return False
        for retrieval in trace.retrievals:
            if not 0 < len(retrieval.retriever) <= max_id:
                return False
            if retrieval.query is not None and len(retrieval.query) > max_text:
                return False
            if not _passages_fit(retrieval.passages, max_id, max_text, max_items, latest, self._times):
                return False
        if trace.context is not None and not _passages_fit(trace.context, max_id, max_text, max_items, latest,
                                                           self._times):
            return False
        answer = trace.answer
        if answer is not None:
            if answer.text is not None and len(answer.text) > max_text:
                return False
            if not _principals_fit(answer.citations, max_id, max_items):  # same bounds as ids
                return False
        latency = trace.latency_ms
        limits = self._limits
        if latency is not None and not all(
            value is None or 0 <= value <= limits.max_latency_ms
            for value in (latency.retrieve, latency.rerank, latency.generate, latency.total)
        ):
            return False
        usage = trace.usage
        return usage is None or (
            (usage.input_tokens is None or 0 <= usage.input_tokens <= limits.max_tokens)
            and (usage.output_tokens is None or 0 <= usage.output_tokens <= limits.max_tokens)
            and (usage.cost_usd is None or 0 <= usage.cost_usd <= limits.max_cost_usd)
        )


def _seconds_or_none(times: TimeReader, value: object) -> float | None:
    try:
        return times.seconds(value)
    except BadTime:
        return None


def _acl_or_none(value: object) -> list[str] | None:
    try:
        return read_acl(value)
    except BadAcl:
        return None


def _principals_fit(items: list[str] | None, max_id: int, max_items: int) -> bool:
    if items is None:
        return True
    if len(items) > max_items:
        return False
    return all(0 < len(item) <= max_id for item in items)


def _passages_fit(passages: list[Passage], max_id: int, max_text: int, max_items: int, latest: float,
                  times: TimeReader) -> bool:
    if len(passages) > max_items:
        return False
    for passage in passages:
        if not 0 < len(passage.id) <= max_id:
            return False
        doc_id = passage.doc_id
        if doc_id is not None:
            if len(doc_id) > max_id:
                return False
            passage.doc_id = join_key(doc_id)
        if passage.doc_version is not None and len(passage.doc_version) > max_id:
            return False
        if passage.embedding_model is not None and len(passage.embedding_model) > max_id:
            return False
        if passage.text is not None and len(passage.text) > max_text:
            return False
        acl = passage.acl
        if acl is not None:
            if acl.__class__ is not list:
                acl = _acl_or_none(acl)
                if acl is None:
                    return False
                passage.acl = acl
            if not _principals_fit(acl, max_id, max_items):  # type: ignore[arg-type]
                return False
        span = passage.span
        if span is not None and not 0 <= span[0] <= span[1]:
            return False
        when = passage.indexed_at
        if when is not None:
            if when.__class__ is not float or when >= MILLISECONDS_FROM:  # type: ignore[operator]
                when = _seconds_or_none(times, when)
                if when is None:
                    return False
                passage.indexed_at = when
            if not 0 <= when <= latest:
                return False
        when = passage.source_modified_at
        if when is not None:
            if when.__class__ is not float or when >= MILLISECONDS_FROM:  # type: ignore[operator]
                when = _seconds_or_none(times, when)
                if when is None:
                    return False
                passage.source_modified_at = when
            if not 0 <= when <= latest:
                return False
    return True


class _Checker:
    """The limits msgspec's static types cannot express (they are configurable), plus
    timestamp normalization. One instance per record."""

    __slots__ = ("_limits", "_latest", "_now", "_times")

    def __init__(self, limits: Limits, now: float, times: TimeReader) -> None:
        self._limits = limits
        self._now = now
        self._latest = now + limits.max_clock_skew_seconds
        self._times = times

    def event(self, event: Event) -> Event:
        if isinstance(event, TraceEvent):
            self._trace(event)
        elif isinstance(event, FeedbackEvent):
            self._id(event.trace_id, "$.trace_id")
            event.time = self._now if event.time is None else self._time(event.time, "$.time")
            self._text(event.comment, "$.comment")
        elif isinstance(event, DocumentEvent):
            self._id(event.doc_id, "$.doc_id")
            event.doc_id = join_key(event.doc_id)
            self._id(event.version, "$.version")
            self._id(event.tenant, "$.tenant")
            event.modified_at = self._catalog_time(event.modified_at, "$.modified_at")
            event.acl = self._acl(event.acl, "$.acl")
        elif isinstance(event, IndexEvent):
            self._id(event.index, "$.index")
            self._id(event.doc_id, "$.doc_id")
            event.doc_id = join_key(event.doc_id)
            self._id(event.version, "$.version")
            self._id(event.embedding_model, "$.embedding_model", required=False)
            event.indexed_at = self._catalog_time(event.indexed_at, "$.indexed_at")
            event.acl = self._acl(event.acl, "$.acl")
        return event

    def _trace(self, trace: TraceEvent) -> None:
        limits = self._limits
        self._id(trace.trace_id, "$.trace_id")
        trace.time = self._time(trace.time, "$.time")
        self._id(trace.tenant, "$.tenant")
        self._id(trace.conversation_id, "$.conversation_id", required=False)
        if trace.turn is not None and not 1 <= trace.turn <= MAX_TURN:
            raise InvalidInput(Reason.INVALID_VALUE, f"`$.turn` must be from 1 to {MAX_TURN}", "$.turn")
        self._id(trace.index.name, "$.index.name")
        self._id(trace.index.version, "$.index.version", required=False)
        self._text(trace.query, "$.query")
        if trace.caller is not None:
            self._id(trace.caller.id, "$.caller.id", required=False)
            self._principals(trace.caller.groups, "$.caller.groups")
        if len(trace.retrievals) > limits.max_retrieval_lists:
            raise InvalidInput(
                Reason.TOO_MANY_PASSAGES,
                f"`$.retrievals` has {len(trace.retrievals)} lists, the limit is "
                f"{limits.max_retrieval_lists}",
                "$.retrievals",
            )
        for i, retrieval in enumerate(trace.retrievals):
            self._id(retrieval.retriever, f"$.retrievals[{i}].retriever")
            self._text(retrieval.query, f"$.retrievals[{i}].query")
            self._passages(retrieval.passages, f"$.retrievals[{i}].passages")
        if trace.context is not None:
            self._passages(trace.context, "$.context")
        if trace.answer is not None:
            self._text(trace.answer.text, "$.answer.text")
            self._count(trace.answer.citations, "$.answer.citations")
            for i, citation in enumerate(trace.answer.citations):
                self._id(citation, f"$.answer.citations[{i}]")
        limits = self._limits
        if trace.usage is not None:
            for name in ("input_tokens", "output_tokens"):
                self._within(getattr(trace.usage, name), limits.max_tokens, f"$.usage.{name}", "limits.max_tokens")
            self._within(trace.usage.cost_usd, limits.max_cost_usd, "$.usage.cost_usd", "limits.max_cost_usd")
        if trace.latency_ms is not None:
            for stage in ("retrieve", "rerank", "generate", "total"):
                self._within(getattr(trace.latency_ms, stage), limits.max_latency_ms, f"$.latency_ms.{stage}",
                             "limits.max_latency_ms")

    @staticmethod
    def _within(value: float | None, ceiling: float, path: str, setting: str) -> None:
        """A count, a duration or a cost: from 0 up to its ceiling (counters only ever grow)."""
        if value is None:
            return
        if value < 0:
            raise InvalidInput(Reason.INVALID_VALUE, f"`{path}` is negative", path)
        if value > ceiling:
            raise InvalidInput(Reason.INVALID_VALUE, f"`{path}` exceeds {ceiling:g} ({setting})", path)

    def _passages(self, passages: list[Passage], path: str) -> None:
        self._count(passages, path)
        for i, passage in enumerate(passages):
            where = f"{path}[{i}]"
            self._id(passage.id, f"{where}.id")
            self._id(passage.doc_id, f"{where}.doc_id", required=False)
            if passage.doc_id:
                passage.doc_id = join_key(passage.doc_id)
            self._id(passage.doc_version, f"{where}.doc_version", required=False)
            self._id(passage.embedding_model, f"{where}.embedding_model", required=False)
            self._text(passage.text, f"{where}.text")
            passage.acl = self._acl(passage.acl, f"{where}.acl")
            if passage.span is not None and not 0 <= passage.span[0] <= passage.span[1]:
                raise InvalidInput(
                    Reason.INVALID_VALUE, f"`{where}.span` must be [start, end] with 0 <= start <= end",
                    f"{where}.span",
                )
            if passage.indexed_at is not None:
                passage.indexed_at = self._time(passage.indexed_at, f"{where}.indexed_at")
            if passage.source_modified_at is not None:
                passage.source_modified_at = self._time(
                    passage.source_modified_at, f"{where}.source_modified_at"
                )

    def _count(self, items: list, path: str) -> None:
        if len(items) > self._limits.max_passages_per_list:
            raise InvalidInput(
                Reason.TOO_MANY_PASSAGES,
                f"`{path}` has {len(items)} items, the limit is {self._limits.max_passages_per_list}",
                path,
            )

    def _acl(self, acl: list[str] | str | None, path: str) -> list[str] | None:
        """An ACL read by the one rule of ``ragmon.monitor.core.acl``, its principals bounded."""
        if acl is None:
            return None
        try:
            principals = read_acl(acl)
        except BadAcl as error:
            raise InvalidInput(Reason.INVALID_VALUE, f"`{path}` {error}", path) from None
        self._principals(principals, path)
        return principals

    def _principals(self, principals: list[str] | None, path: str) -> None:
        if principals is None:
            return
        self._count(principals, path)
        for i, principal in enumerate(principals):
            self._id(principal, f"{path}[{i}]")

    def _id(self, value: str | None, path: str, required: bool = True) -> None:
        if value is None:
            return
        if not value:
            if required:
                raise InvalidInput(Reason.INVALID_VALUE, f"`{path}` must not be empty", path)
            return
        if len(value) > self._limits.max_id_length:
            raise InvalidInput(
                Reason.TOO_LONG,
                f"`{path}` is {len(value)} characters, the limit is {self._limits.max_id_length}",
                path,
            )

    def _text(self, value: str | None, path: str) -> None:
        if value is not None and len(value) > self._limits.max_text_length:
            raise InvalidInput(
                Reason.TOO_LONG,
                f"`{path}` is {len(value)} characters, the limit is {self._limits.max_text_length}",
                path,
            )

    def _catalog_time(self, value: str | float, path: str) -> float:
        """A time of the catalog: a timestamp no earlier than ``limits.min_catalog_time``."""
        seconds = self._time(value, path)
        floor = self._limits.min_catalog_time
        if seconds < floor.timestamp():
            raise InvalidInput(Reason.BAD_TIMESTAMP, f"`{path}` is before {floor.date().isoformat()} "
                               "(limits.min_catalog_time)", path)
        return seconds

    def _time(self, value: str | float, path: str) -> float:
        try:
            seconds = self._times.seconds(value)
        except BadTime as error:
            raise InvalidInput(Reason.BAD_TIMESTAMP, f"`{path}` {error}", path) from None
        if seconds < 0:
            raise InvalidInput(
                Reason.BAD_TIMESTAMP, f"`{path}` must not be before 1970", path
            )
        if seconds > self._latest:
            raise InvalidInput(
                Reason.FUTURE_TIMESTAMP,
                f"`{path}` is {seconds - self._latest + self._limits.max_clock_skew_seconds:.0f} s "
                f"in the future (allowed skew {self._limits.max_clock_skew_seconds:.0f} s)",
                path,
            )
        return seconds
