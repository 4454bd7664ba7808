"""The spans of one OTel trace to one ragmon trace event, by the rules that make real instrumented
apps read right (docs/events.md has the table per framework).

- **Retrieval lists.** Each RETRIEVER span, GenAI ``retrieval`` span and vector-store query span
  (``db.query.result`` events) reports a list; each RERANKER span its output list. Nested spans of
  one retrieval are one list (``ragmon.collectors.span_levels``). Lists are ordered by when their span
  ended.
- **Passages** are named by :class:`~ragmon.collectors.passage_ids.PassageNamer`; one that nothing names
  is dropped from its list and counted, never failing the trace.
- **Context**: the ids in ``ragmon.context.document_ids`` when the app set it; else the last
  reranker output; else the last non-empty retrieval list.
- **Caller**: ``user.id`` / ``enduser.id``; groups from ``metadata.groups`` or
  ``ragmon.caller.groups``; tenant from ``metadata.tenant`` or the resource's ``ragmon.tenant``.
- A span set with no retrieval at all (an ingestion run, a bare LLM call) is not a question
  answered from an index: it maps to no event, and the receiver counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ragmon.collectors import semconv as sc
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.passage_ids import PassageNamer
from ragmon.collectors.semconv import finite_number, json_object, scalar_text, string_list
from ragmon.collectors.span_levels import MAX_DEPTH, Level, level_of, nest, resolve
from ragmon.collectors.span_reading import RawDocument

#: Keys under which frameworks put the question in a JSON input (Haystack, DSPy, LlamaIndex internals).
QUERY_KEYS = ("query", "question", "query_str", "input")
#: Keys under which frameworks put the answer in a JSON output (DSPy predictions).
ANSWER_KEYS = ("answer", "response", "output")
_FIELDS = frozenset(sc.PASSAGE_FIELDS)


@dataclass
class Mapped:
    """What the spans of one trace map to: ``event`` (None when they hold no retrieval at all),
    how many passage ids were derived (by how), and how many passages nothing named."""

    event: dict[str, Any] | None
    derived: Counter[str] = field(default_factory=Counter)
    unmapped: int = 0


def feedback_event(span: Span) -> dict[str, Any] | None:
    """The feedback a span carries, if it is a ragmon feedback span."""
    trace_id = span.attributes.get(sc.FEEDBACK_TRACE_ID)
    if not trace_id:
        return None
    event: dict[str, Any] = {"type": "feedback", "trace_id": str(trace_id),
                             "kind": span.attributes.get(sc.FEEDBACK_KIND), "time": span.start_ns / 1e9}
    if span.attributes.get(sc.FEEDBACK_VALUE) is not None:
        event["value"] = span.attributes[sc.FEEDBACK_VALUE]
    return event


class SpanMapper:
    """Maps assembled traces; ``namer`` holds the configured passage-id key orders."""

    def __init__(self, namer: PassageNamer | None = None) -> None:
        self._namer = namer or PassageNamer()

    def map(self, spans: list[Span]) -> Mapped:
        spans = sorted(spans, key=lambda s: s.start_ns)
        by_id = {s.span_id: s for s in spans}
        root = next((s for s in spans if not s.parent_id or s.parent_id not in by_id), spans[0])
        levels = [level for level in map(level_of, spans) if level is not None]
        explicit_context = _first(string_list(s.attributes.get(sc.CONTEXT_DOCUMENT_IDS)) for s in [root, *spans])
        if not levels and explicit_context is None:
            return Mapped(None)
        tops = nest(levels, by_id)
        mapped = Mapped({})
        lists = sorted((merged for top in tops for merged in resolve(top)),
                       key=lambda level: (level.span.end_ns, level.span.start_ns))
        retrievals = [{"retriever": level.name, "passages": self._passages(level.documents, mapped)}
                      for level in lists]
        _share_fields(retrievals)
        mapped.event = self._event(root, spans, by_id, tops, retrievals, lists, explicit_context)
        return mapped

    def _passages(self, documents: list[RawDocument], mapped: Mapped) -> list[dict[str, Any]]:
        passages = []
        for document in documents:
            passage_id, derived = self._namer.passage_id(document)
            if passage_id is None:
                mapped.unmapped += 1
                continue
            if derived is not None:
                mapped.derived[derived] += 1
            passage: dict[str, Any] = {"id": passage_id}
            if document.score is not None:
                passage["score"] = document.score
            if document.content is not None:
                passage["text"] = document.content
            passage.update(document.fields)
            if "doc_id" not in passage and document.metadata:
                doc_id = self._namer.doc_id(document.metadata)
                if doc_id is not None:
                    passage["doc_id"] = doc_id
            passages.append(passage)
        return passages

    def _event(self, root: Span, spans: list[Span], by_id: dict[str, Span], tops: list[Level],
               retrievals: list[dict[str, Any]], lists: list[Level], explicit_context: list[str] | None
               ) -> dict[str, Any]:
        generations = _outermost([s for s in spans if _is_generation(s)], by_id)
        meta: dict[str, Any] = {}
        for span in [*reversed(spans), root]:  # the root's metadata wins, then earlier spans
            meta.update(json_object(span.attributes.get(sc.METADATA)))
        precedence = [root, *spans]  # for caller and conversation: the root's attribute, else the earliest span's

        index = meta.get("index") if isinstance(meta.get("index"), str) else None
        index = index or _first(scalar_text(s.attributes.get(sc.GENAI_DATA_SOURCE)) for s in spans)
        tenant = scalar_text(meta.get("tenant"))
        event: dict[str, Any] = {
            "type": "trace", "trace_id": root.trace_id, "time": root.start_ns / 1e9,
            "tenant": str(tenant or root.resource.get(sc.TENANT) or "default"),
            "query": _query(root, spans, [top.span for top in tops]) or "",
            "index": {"name": str(index or meta.get("index_name") or root.resource.get("service.name") or "default")},
            "retrievals": retrievals,
            "latency_ms": _latency(root, tops, generations),
        }
        context = _context(retrievals, lists, explicit_context)
        last = retrievals[-1]["passages"] if retrievals else None
        if last is None or (context is not last and (context or last)):
            event["context"] = context  # absent, the context is the last list (docs/events.md): not sent twice
        if meta.get("index_version"):
            event["index"]["version"] = str(meta["index_version"])
        caller_id = _first(scalar_text(s.attributes.get(sc.USER_ID)) for s in precedence) or _first(
            scalar_text(s.attributes.get(sc.ENDUSER_ID)) for s in precedence)
        groups = string_list(meta.get("groups"))
        if groups is None:
            groups = _first(string_list(s.attributes.get(sc.CALLER_GROUPS)) for s in precedence)
        if caller_id or groups:
            event["caller"] = {"groups": groups or []}
            if caller_id:
                event["caller"]["id"] = caller_id
        conversation = _first(scalar_text(s.attributes.get(sc.SESSION_ID)) for s in precedence) or _first(
            scalar_text(s.attributes.get(sc.GENAI_CONVERSATION)) for s in precedence)
        if conversation:
            event["conversation_id"] = conversation
        answer = _answer(root, spans, generations)
        if answer is not None or "abstained" in meta:
            citations = string_list(meta.get("citations"))
            event["answer"] = {"text": answer, "citations": citations or []}
            if isinstance(meta.get("abstained"), bool):
                event["answer"]["abstained"] = meta["abstained"]
        usage = _usage(spans, generations)
        if usage:
            event["usage"] = usage
        return event


# --- the rest of the event -----------------------------------------------------------------------


def _share_fields(retrievals: list[dict[str, Any]]) -> None:
    """A passage reported without any passage field takes those of another copy of it in the
    trace: a reranker's output often carries ids, content and scores only (Haystack's rankers),
    while the retriever's list had the document's id, version and ACL, which an alert must name."""
    copies: dict[str, list[dict[str, Any]]] = {}
    for retrieval in retrievals:
        for passage in retrieval["passages"]:
            copies.setdefault(passage["id"], []).append(passage)
    for same in copies.values():
        if len(same) < 2:
            continue
        bare, source = [], None
        for passage in same:
            if not passage.keys() & _FIELDS:
                bare.append(passage)
            elif source is None:
                source = passage
        if bare and source is not None:
            fields = {key: source[key] for key in source.keys() & _FIELDS}
            for passage in bare:
                passage.update(fields)


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _value_text(span: Span, value_key: str, mime_key: str, keys: tuple[str, ...]) -> str | None:
    """A span's input or output as text: the value itself, or for JSON the first string under
    one of ``keys`` (at the top or one level down)."""
    value = span.attributes.get(value_key)
    if not isinstance(value, str) or not value:
        return None
    if span.attributes.get(mime_key) != sc.JSON_MIME_TYPE:
        return value
    data = json_object(value)
    for scope in [data, *(v for v in data.values() if isinstance(v, dict))]:
        found = next((scope[k] for k in keys if isinstance(scope.get(k), str) and scope[k]), None)
        if found is not None:
            return found
    return None


def _is_chain(span: Span) -> bool:
    return str(span.attributes.get(sc.SPAN_KIND, "")).upper() in (sc.CHAIN, sc.AGENT)


def _query(root: Span, spans: list[Span], retrieval_spans: list[Span]) -> str | None:
    if _is_chain(root):
        query = _value_text(root, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, QUERY_KEYS)
        if query is not None:
            return query
    for span in sorted(retrieval_spans, key=lambda s: s.start_ns):
        a = span.attributes
        query = (_value_text(span, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, QUERY_KEYS) or scalar_text(a.get(sc.GENAI_QUERY))
                 or scalar_text(a.get(sc.RERANKER_QUERY)))
        if query is not None:
            return query
    return None


def _is_generation(span: Span) -> bool:
    """A model call. Haystack's prompt builders are reported as LLM spans too: a span with a
    prompt template and no model, invocation parameters or output messages is not one."""
    a = span.attributes
    if a.get(sc.GENAI_OPERATION) in sc.GENAI_GENERATION:
        return True
    if str(a.get(sc.SPAN_KIND, "")).upper() != sc.LLM:
        return False
    return sc.LLM_PROMPT_TEMPLATE not in a or any(
        key in a for key in (sc.LLM_MODEL_NAME, sc.LLM_INVOCATION_PARAMETERS, sc.LLM_OUTPUT_MESSAGE))


def _genai_answer(value: Any) -> str | None:
    if isinstance(value, str):
        parsed = sc.parse_json_text(value)
        if parsed is None:
            return value or None  # plain text
        value = parsed
    for message in value if isinstance(value, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "text" and part.get("content"):
                return str(part["content"])
    return None


def _answer(root: Span, spans: list[Span], generations: dict[str, Span]) -> str | None:
    """The root chain's output when it is the answer; else the last generation's output."""
    if _is_chain(root):
        answer = _value_text(root, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, ANSWER_KEYS)
        if answer is not None:
            return answer
    for span in sorted((s for s in spans if s.span_id in generations), key=lambda s: s.end_ns, reverse=True):
        a = span.attributes
        answer = (scalar_text(a.get(sc.LLM_OUTPUT_MESSAGE)) or _genai_answer(a.get(sc.GENAI_OUTPUT_MESSAGES))
                  or (scalar_text(a.get(sc.OUTPUT_VALUE)) if a.get(sc.OUTPUT_MIME_TYPE) != sc.JSON_MIME_TYPE else None))
        if answer is not None:
            return answer
    return None


def _context(retrievals: list[dict[str, Any]], lists: list[Level], explicit: list[str] | None
             ) -> list[dict[str, Any]]:
    if explicit is not None:
        if retrievals and [p["id"] for p in retrievals[-1]["passages"]] == explicit:
            return retrievals[-1]["passages"]  # the last list, as ragmon's emitter names it
        known: dict[str, dict[str, Any]] = {}
        for retrieval in reversed(retrievals):  # the latest list's copy of a passage (the reranked one) first
            for passage in retrieval["passages"]:
                known.setdefault(passage["id"], passage)
        return [known.get(passage_id, {"id": passage_id}) for passage_id in explicit]
    reranked = [r for r, level in zip(retrievals, lists, strict=True) if level.kind == "reranker"]
    if reranked:
        return reranked[-1]["passages"]
    return next((r["passages"] for r in reversed(retrievals) if r["passages"]), [])


def _outermost(spans: Iterable[Span], by_id: dict[str, Span]) -> dict[str, Span]:
    """Each of ``spans`` (by span id) mapped to its outermost ancestor among them (itself when it
    has none): nested calls of one generation counted once."""
    ids = {span.span_id for span in spans}
    outer: dict[str, Span] = {}
    for span in spans:
        top, parent, seen = span, by_id.get(span.parent_id), 0
        while parent is not None and seen < MAX_DEPTH:
            if parent.span_id in ids:
                top = parent
            parent, seen = by_id.get(parent.parent_id), seen + 1
        outer[span.span_id] = top
    return outer


def _latency(root: Span, tops: list[Level], generations: dict[str, Span]) -> dict[str, float]:
    latency = {
        "retrieve": sum(top.span.duration_ms for top in tops if top.kind == "retriever"),
        "rerank": sum(top.span.duration_ms for top in tops if top.kind == "reranker"),
        "generate": sum(span.duration_ms for span in {s.span_id: s for s in generations.values()}.values()),
    }
    return {**{k: round(v, 3) for k, v in latency.items() if v}, "total": round(root.duration_ms, 3)}


def _count(value: Any) -> int | None:
    """A token count as an integer; None for what is not a finite non-negative number."""
    number = finite_number(value)
    return int(number) if number is not None and number >= 0 else None


def _usage(spans: list[Span], generations: dict[str, Span]) -> dict[str, int]:
    """Tokens per generation: nested spans of one call (LlamaIndex's ``predict`` -> ``complete``)
    may each report it, so each outermost generation counts the largest figure in its subtree."""
    per_call: dict[str, dict[str, int]] = {}
    for span in spans:
        call = generations.get(span.span_id)
        if call is None:
            continue
        figures = per_call.setdefault(call.span_id, {})
        for name, keys in (("input_tokens", (sc.LLM_PROMPT_TOKENS, sc.GENAI_INPUT_TOKENS)),
                           ("output_tokens", (sc.LLM_COMPLETION_TOKENS, sc.GENAI_OUTPUT_TOKENS))):
            value = _first(_count(span.attributes.get(k)) for k in keys)
            if value is not None:
                figures[name] = max(figures.get(name, 0), value)
    usage: dict[str, int] = {}
    for figures in per_call.values():
        for name, value in figures.items():
            usage[name] = usage.get(name, 0) + value
    return usage
