"""OTLP trace payloads (protobuf or JSON) to plain spans, and plain spans to ragmon events.

Two conventions are understood, in any mix within one trace:

- **OpenInference**: ``openinference.span.kind`` = CHAIN / RETRIEVER / RERANKER / LLM, documents
  as ``retrieval.documents.N.document.{id,score,content,metadata}`` and
  ``reranker.output_documents.N.document.*``, ``input.value``, ``output.value``, ``user.id``,
  ``session.id``, and ``metadata`` (a JSON string: tenant, groups, index, index_version,
  retriever, abstained, citations; per document: doc_id, doc_version, span, acl, indexed_at,
  source_modified_at, embedding_model).
- **OTel GenAI**: ``gen_ai.operation.name`` = retrieval (``gen_ai.retrieval.documents``,
  ``gen_ai.retrieval.query.text``, ``gen_ai.data_source.id``) and chat / text_completion
  (``gen_ai.usage.*``, ``gen_ai.output.messages``), ``user.id`` / ``enduser.id``,
  ``gen_ai.conversation.id``.

A span carrying ``ragmon.feedback.trace_id`` is a feedback event (kind, value in
``ragmon.feedback.kind`` / ``.value``), not part of a trace.
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
class Span:
    trace_id: str  # 32 hex digits
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


# --- parsing -------------------------------------------------------------------------------------


def _any_value(value) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def parse_protobuf(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RuntimeWarning) as error:
        raise PayloadError(f"not an OTLP protobuf trace export: {type(error).__name__}") from None
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _any_value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(Span(
                    span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name,
                    span.start_time_unix_nano, span.end_time_unix_nano,
                    {kv.key: _any_value(kv.value) for kv in span.attributes}, resource))
    return spans


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


def parse_json(body: bytes) -> list[Span]:
    try:
        data = msgspec.json.decode(body)
        spans = []
        for resource_spans in data.get("resourceSpans") or []:
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            for scope_spans in resource_spans.get("scopeSpans") or []:
                for span in scope_spans.get("spans") or []:
                    spans.append(Span(
                        _json_id(span.get("traceId")), _json_id(span.get("spanId")), _json_id(span.get("parentSpanId")),
                        str(span.get("name", "")), int(span.get("startTimeUnixNano") or 0),
                        int(span.get("endTimeUnixNano") or 0), _attributes(span.get("attributes")), resource))
        return spans
    except PayloadError:
        raise
    except (msgspec.DecodeError, AttributeError, TypeError, ValueError, KeyError) as error:
        raise PayloadError(f"not an OTLP JSON trace export: {type(error).__name__}") from None


# --- mapping -------------------------------------------------------------------------------------

_PASSAGE_KEYS = ("doc_id", "doc_version", "span", "acl", "indexed_at", "source_modified_at", "embedding_model")
_CHAT = ("chat", "text_completion", "generate_content")


_json = msgspec.json.Decoder().decode  # JSON inside attribute values; several times faster than json.loads


def _parsed(value: str) -> Any:
    """JSON inside an attribute value; None when it is not JSON (or nested beyond reason)."""
    try:
        return _json(value)
    except (ValueError, RecursionError):
        return None


def _metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        parsed = _parsed(value)
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _documents(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The passages flattened into ``<prefix>.<n>.document.<field>`` attributes, in order of n."""
    found: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for key, value in attributes.items():
        if not key.startswith(head):
            continue
        # string methods, not a regular expression: this runs for every attribute of every passage
        number, dot, field = key[len(head):].partition(".document.")
        if dot and field and number.isdecimal():
            found.setdefault(int(number), {})[field] = value
    passages = []
    for _, document in sorted(found.items()):
        passage: dict[str, Any] = {"id": str(document.get("id", ""))}
        if document.get("score") is not None:
            passage["score"] = document["score"]
        if document.get("content") is not None:
            passage["text"] = document["content"]
        meta = _metadata(document.get("metadata"))
        passage.update({k: meta[k] for k in _PASSAGE_KEYS if meta.get(k) is not None})
        passages.append(passage)
    return passages


def _genai_documents(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        value = _parsed(value)
    if not isinstance(value, list):
        return []
    passages = []
    for item in value:
        if isinstance(item, dict) and item.get("id") is not None:
            passage = {"id": str(item["id"])}
            if item.get("score") is not None:
                passage["score"] = item["score"]
            passages.append(passage)
    return passages


def _genai_answer(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            value = _json(value)
        except (ValueError, RecursionError):
            return value  # plain text
    for message in value if isinstance(value, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "text" and part.get("content"):
                return str(part["content"])
    return None


def _count(value: Any) -> int | None:
    """A token count as an integer; None for what is not a finite number."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def feedback_event(span: Span) -> dict[str, Any] | None:
    """The feedback a span carries, if it is a ragmon feedback span."""
    trace_id = span.attributes.get("ragmon.feedback.trace_id")
    if not trace_id:
        return None
    event: dict[str, Any] = {"type": "feedback", "trace_id": str(trace_id),
                             "kind": span.attributes.get("ragmon.feedback.kind"), "time": span.start_ns / 1e9}
    if span.attributes.get("ragmon.feedback.value") is not None:
        event["value"] = span.attributes["ragmon.feedback.value"]
    return event


def _attribute(spans: list[Span], key: str) -> Any:
    """The first value of attribute ``key`` that is not None, in the order of ``spans``."""
    for span in spans:
        value = span.attributes.get(key)
        if value is not None:
            return value
    return None


def trace_event(spans: list[Span]) -> dict[str, Any]:
    """All spans of one OTel trace as one ragmon trace event (validated later by the decoder)."""
    spans = sorted(spans, key=lambda s: s.start_ns)
    ids = {s.span_id for s in spans}
    root = next((s for s in spans if not s.parent_id or s.parent_id not in ids), spans[0])
    meta: dict[str, Any] = {}
    for span in [*reversed(spans), root]:  # the root's metadata wins, then earlier spans
        meta.update(_metadata(span.attributes.get("metadata")))
    precedence = [root, *spans]  # for caller and conversation: the root's attribute, else the earliest span's

    retrievals, latency, usage = [], {"retrieve": 0.0, "rerank": 0.0, "generate": 0.0}, {}
    query = answer = None
    index = meta.get("index") if isinstance(meta.get("index"), str) else None
    for span in spans:
        a = span.attributes
        kind = str(a.get("openinference.span.kind", "")).upper()
        operation = a.get("gen_ai.operation.name")
        own = _metadata(a.get("metadata"))
        if kind == "RETRIEVER":
            retrievals.append({"retriever": own.get("retriever") or span.name,
                               "passages": _documents(a, "retrieval.documents")})
            latency["retrieve"] += span.duration_ms
            query = query or a.get("input.value")
        elif kind == "RERANKER":
            retrievals.append({"retriever": own.get("retriever") or span.name or "reranker",
                               "passages": _documents(a, "reranker.output_documents")})
            latency["rerank"] += span.duration_ms
            query = query or a.get("reranker.query")
        elif operation == "retrieval":
            retrievals.append({"retriever": own.get("retriever") or span.name,
                               "passages": _genai_documents(a.get("gen_ai.retrieval.documents"))})
            latency["retrieve"] += span.duration_ms
            query = query or a.get("gen_ai.retrieval.query.text")
            index = index or a.get("gen_ai.data_source.id")
        elif kind == "LLM" or operation in _CHAT:
            latency["generate"] += span.duration_ms
            answer = a.get("output.value") or _genai_answer(a.get("gen_ai.output.messages")) or answer
            for name, keys in (("input_tokens", ("llm.token_count.prompt", "gen_ai.usage.input_tokens")),
                               ("output_tokens", ("llm.token_count.completion", "gen_ai.usage.output_tokens"))):
                value = next((n for n in (_count(a.get(k)) for k in keys) if n is not None), None)
                if value is not None:
                    usage[name] = usage.get(name, 0) + value
    if str(root.attributes.get("openinference.span.kind", "")).upper() in ("CHAIN", "AGENT"):
        query = root.attributes.get("input.value", query)
        answer = root.attributes.get("output.value", answer)

    event: dict[str, Any] = {
        "type": "trace", "trace_id": root.trace_id, "time": root.start_ns / 1e9,
        "tenant": str(meta.get("tenant") or root.resource.get("ragmon.tenant") or "default"),
        "query": "" if query is None else str(query),
        "index": {"name": str(index or meta.get("index_name") or root.resource.get("service.name") or "default")},
        "retrievals": retrievals,
        "latency_ms": {**{k: round(v, 3) for k, v in latency.items() if v}, "total": round(root.duration_ms, 3)},
    }
    if meta.get("index_version"):
        event["index"]["version"] = str(meta["index_version"])
    caller_id = _attribute(precedence, "user.id") or _attribute(precedence, "enduser.id")
    groups = meta.get("groups")
    if caller_id or groups:
        event["caller"] = {"groups": [str(g) for g in groups] if isinstance(groups, list) else []}
        if caller_id:
            event["caller"]["id"] = str(caller_id)
    conversation = _attribute(precedence, "session.id") or _attribute(precedence, "gen_ai.conversation.id")
    if conversation:
        event["conversation_id"] = str(conversation)
    if answer is not None or "abstained" in meta:
        citations = meta.get("citations")
        event["answer"] = {"text": None if answer is None else str(answer),
                           "citations": [str(c) for c in citations] if isinstance(citations, list) else []}
        if isinstance(meta.get("abstained"), bool):
            event["answer"]["abstained"] = meta["abstained"]
    if usage:
        event["usage"] = usage
    return event
