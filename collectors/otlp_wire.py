"""OTLP trace export requests (protobuf or JSON) to plain :class:`Span` objects.

Only what the mapping to ragmon events needs is kept: ids, name, times, attributes, the
resource's attributes, span events (vector stores such as Chroma report each result as a
``db.query.result`` event), and the instrumentation scope's name and version (which say the span's
dialect: ``ragmon.collectors.dialects``). Attribute values become plain Python values: strings, numbers,
booleans, bytes, lists, and dicts for key-value lists. The span's kind is kept to describe a trace
ragmon cannot read (``ragmon.collectors.unread``).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class PayloadError(Exception):
    """The request body is not an OTLP trace export."""


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Span:
    trace_id: str  # 32 hex digits
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    reading: Any = None  # what ragmon.collectors.dialects.Dialects.read made of it, once it was read
    scope: str = ""  # the instrumentation scope's name (one string shared by the spans of a scope)
    scope_version: str = ""
    kind: int = 0  # OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


# --- protobuf ------------------------------------------------------------------------------------


def _any_value(value) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _protobuf_attributes(value.kvlist_value.values)
    return getattr(value, kind)


def _protobuf_attributes(pairs) -> dict[str, Any]:
    """Protobuf KeyValues as a dict. Most values are strings: a non-empty ``string_value`` is taken
    as it is, without asking which kind the value holds (a value of another kind reads as "", as does
    an empty string, and those go through :func:`_any_value`); a quarter of the cost, per attribute."""
    out: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        out[pair.key] = value.string_value or _any_value(value)
    return out


def parse_protobuf(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RuntimeWarning) as error:
        raise PayloadError(f"not an OTLP protobuf trace export: {type(error).__name__}") from None
    spans = []
    for resource_spans in request.resource_spans:
        resource = _protobuf_attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope, version = scope_spans.scope.name, scope_spans.scope.version
            for span in scope_spans.spans:
                events = [SpanEvent(e.name, e.time_unix_nano, _protobuf_attributes(e.attributes))
                          for e in span.events]
                spans.append(Span(
                    span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name,
                    span.start_time_unix_nano, span.end_time_unix_nano,
                    _protobuf_attributes(span.attributes), resource, events, scope=scope, scope_version=version,
                    kind=span.kind))
    return spans


# --- JSON ----------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [_json_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv.get("key"): _json_value(kv.get("value")) for kv in (inner or {}).get("values", [])}
    if kind == "bytesValue":
        return base64.b64decode(inner)
    return inner


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
          "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}


def _json_kind(value: Any) -> int:
    """A span kind: OTLP/JSON writes the enum as its number; its name is taken too. Anything else
    is unspecified (0): the kind only describes a span, it never fails one."""
    if type(value) is int:
        return value if 0 <= value <= 5 else 0
    return _KINDS.get(value, 0) if isinstance(value, str) else 0


def _json_id(value: Any) -> str:
    """OTLP/JSON ids are hex; accept base64 too, as some exporters send it."""
    if not value:
        return ""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]+", value) and len(value) in (16, 32):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, TypeError, ValueError):
        raise PayloadError("a span id is neither hex nor base64") from None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv["key"]: _json_value(kv.get("value")) for kv in items or [] if isinstance(kv, dict) and "key" in kv}


def _json_events(items: Any) -> list[SpanEvent]:
    return [SpanEvent(str(e.get("name", "")), int(e.get("timeUnixNano") or 0), _attributes(e.get("attributes")))
            for e in items or [] if isinstance(e, dict)]


def parse_json(body: bytes) -> list[Span]:
    try:
        data = msgspec.json.decode(body)
        spans = []
        for resource_spans in data.get("resourceSpans") or []:
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            for scope_spans in resource_spans.get("scopeSpans") or []:
                scope = scope_spans.get("scope") or {}
                name, version = _json_text(scope.get("name")), _json_text(scope.get("version"))
                for span in scope_spans.get("spans") or []:
                    spans.append(Span(
                        _json_id(span.get("traceId")), _json_id(span.get("spanId")), _json_id(span.get("parentSpanId")),
                        str(span.get("name", "")), int(span.get("startTimeUnixNano") or 0),
                        int(span.get("endTimeUnixNano") or 0), _attributes(span.get("attributes")), resource,
                        _json_events(span.get("events")), scope=name, scope_version=version,
                        kind=_json_kind(span.get("kind"))))
        return spans
    except PayloadError:
        raise
    except (msgspec.DecodeError, AttributeError, TypeError, ValueError, KeyError) as error:
        raise PayloadError(f"not an OTLP JSON trace export: {type(error).__name__}") from None
