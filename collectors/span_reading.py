"""Reading a span as it arrives: its documents, in the shape every convention of
``ragmon.collectors.semconv`` reports them, and the attributes ragmon uses but cannot (each named in the
answer to the request that brought the span, never failing its trace).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ragmon.collectors.semconv import (
    CALLER_GROUPS,
    CONTEXT_DOCUMENT_IDS,
    DB_OPERATIONS,
    DB_RESULT,
    DB_RESULT_EVENT,
    DB_SYSTEMS,
    GENAI_DOCUMENTS,
    GENAI_OPERATION,
    GENAI_RETRIEVAL,
    METADATA,
    PASSAGE_FIELDS,
    RERANKER,
    RERANKER_OUTPUT_DOCUMENTS,
    RETRIEVAL_DOCUMENTS,
    RETRIEVER,
    SPAN_KIND,
    VECTOR_SEARCHES,
    finite_number,
    json_object,
    parse_json_text,
    scalar_text,
    string_list,
)


@dataclass(slots=True)
class RawDocument:
    """One document as a span reports it, before it is named as a passage. ``fields`` holds the
    passage fields of its metadata (:data:`PASSAGE_FIELDS`) in their native types."""

    id: str | None = None
    score: float | None = None
    content: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SpanReading:
    """What ragmon reads from one span: ``kind`` is ``retriever`` or ``reranker`` for a span that
    reports a list of documents (else None), and ``problems`` names each attribute it could not
    use as ``(attribute, what is wrong)``, never quoting the value."""

    kind: str | None
    documents: list[RawDocument]
    problems: list[tuple[str, str]]


def _name(value: Any) -> str | None:
    if type(value) is str:
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _span(value: Any) -> list[int] | None:
    if isinstance(value, str):
        value = parse_json_text(value)
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and 0 <= value[0] <= value[1]):
        return list(value)
    return None


def _principals(value: Any) -> list[str] | None:
    """A list of principals; a string is a comma-separated list (stores such as Chroma keep only
    scalar metadata)."""
    if type(value) is list and all(type(v) is str for v in value):
        return value
    if isinstance(value, str):
        parsed = parse_json_text(value) if value.startswith("[") else None
        value = parsed if parsed is not None else [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _time(value: Any) -> float | None:
    """Unix seconds, from a number or an ISO 8601 time with an offset."""
    if type(value) is float or type(value) is int:
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if 0 <= number < math.inf else None
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return None
        value = parsed.timestamp()
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    return None


_FIELD_NAMES = frozenset(PASSAGE_FIELDS)
_NAME_FIELDS = frozenset(("doc_id", "doc_version", "embedding_model"))
_TIME_FIELDS = frozenset(("indexed_at", "source_modified_at"))
_STRINGS = frozenset((str,))
_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "doc_id": _name, "doc_version": _name, "embedding_model": _name, "span": _span, "acl": _principals,
    "indexed_at": _time, "source_modified_at": _time,
}


def passage_fields(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The passage fields (:data:`PASSAGE_FIELDS`) a document's metadata carries, in their native
    types, and the names of those present with a value of the wrong kind (left out, so that one
    odd field never fails the whole trace)."""
    fields: dict[str, Any] = {}
    wrong: list[str] = []
    if not metadata:
        return fields, wrong
    for key in metadata.keys() & _FIELD_NAMES:  # most documents carry few of them, or none
        value = metadata[key]
        kind = type(value)
        # the values as ragmon's emitter and most applications write them, taken without a call
        if (kind is str and value and key in _NAME_FIELDS) or (
                kind is float and key in _TIME_FIELDS and 0 <= value < math.inf) or (
                kind is list and key == "acl" and set(map(type, value)) <= _STRINGS):
            fields[key] = value
        elif value is not None:
            clean = _FIELD_CHECKS[key](value)
            if clean is None:
                wrong.append(key)
            else:
                fields[key] = clean
    return fields, wrong


# --- reading -----------------------------------------------------------------------------------


def read_span(span: Any) -> SpanReading:
    """Read a span's documents and check the attributes ragmon uses, in one pass. JSON text that
    parses replaces the attribute's value in place, so nothing is parsed twice."""
    a = span.attributes
    problems: list[tuple[str, str]] = []
    value = a.get(METADATA)
    if isinstance(value, str):
        parsed = parse_json_text(value)
        if isinstance(parsed, dict):
            a[METADATA] = parsed
        else:
            problems.append((METADATA, f"`{METADATA}` is not a JSON object"))
    for key in (CONTEXT_DOCUMENT_IDS, CALLER_GROUPS):
        if key in a and string_list(a[key]) is None:
            problems.append((key, f"`{key}` is not a list of strings"))
    kind = str(a.get(SPAN_KIND, "")).upper()
    if kind == RETRIEVER:
        return SpanReading("retriever", _openinference_documents(a, RETRIEVAL_DOCUMENTS, problems), problems)
    if kind == RERANKER:
        return SpanReading("reranker", _openinference_documents(a, RERANKER_OUTPUT_DOCUMENTS, problems), problems)
    if a.get(GENAI_OPERATION) == GENAI_RETRIEVAL:
        return SpanReading("retriever", _genai_documents(a, problems), problems)
    system = next((a[key] for key in DB_SYSTEMS if a.get(key)), None)
    if system is not None:
        documents = _result_event_documents(span.events, problems)
        operation = next((a[key] for key in DB_OPERATIONS if a.get(key)), None)
        if documents or (str(system).lower(), str(operation).lower()) in VECTOR_SEARCHES:
            return SpanReading("retriever", documents, problems)
    return SpanReading(None, [], problems)


def _document(id_: Any, score: Any, content: Any, metadata: Any, where: str, problems: list[tuple[str, str]],
              metadata_attribute: str = "document.metadata") -> RawDocument:
    """One document from its parts; ``where`` names it in problems (``retrieval.documents.3.document``)."""
    number = finite_number(score) if score is not None else None
    if score is not None and number is None:
        problems.append(("document.score", f"`{where}.score` is not a finite number"))
    if type(metadata) is str:
        parsed = parse_json_text(metadata)
        if type(parsed) is not dict:
            problems.append((metadata_attribute, f"`{where}.metadata` is not a JSON object"))
        metadata = parsed
    metadata = metadata if type(metadata) is dict else {}
    fields, wrong = passage_fields(metadata)
    if wrong:
        problems.extend((metadata_attribute, f"`{where}.metadata`: `{name}` has a value of the wrong kind")
                        for name in wrong)
    return RawDocument(scalar_text(id_), number, content if isinstance(content, str) else None, metadata, fields)


def _openinference_documents(attributes: Mapping[str, Any], prefix: str,
                             problems: list[tuple[str, str]]) -> list[RawDocument]:
    """The documents flattened into ``<prefix>.<n>.document.<field>`` attributes, in order of n."""
    found: dict[str, dict[str, Any]] = {}
    head = prefix + "."
    cut = len(head)
    for key, value in attributes.items():
        if not key.startswith(head):
            continue
        # string methods, not a regular expression: this runs for every attribute of every passage
        number, dot, name = key[cut:].partition(".document.")
        if dot and name and number.isdecimal():
            document = found.get(number)
            if document is None:
                document = found[number] = {}
            document[name] = value
    documents = []
    for n in sorted(found, key=int):
        d = found[n]
        documents.append(_document(d.get("id"), d.get("score"), d.get("content"), d.get("metadata"),
                                   f"{head}{n}.document", problems))
    return documents


def _genai_documents(attributes: Mapping[str, Any], problems: list[tuple[str, str]]) -> list[RawDocument]:
    """``gen_ai.retrieval.documents``, structured or JSON text: its extra properties (besides id,
    score, content) are metadata."""
    value = attributes.get(GENAI_DOCUMENTS)
    if isinstance(value, str):
        value = parse_json_text(value)
        if not isinstance(value, list):
            problems.append((GENAI_DOCUMENTS, f"`{GENAI_DOCUMENTS}` is not a JSON array"))
    documents = []
    for i, item in enumerate(value if isinstance(value, list | tuple) else []):
        if isinstance(item, dict):
            metadata = {**json_object(item.get("metadata")),
                        **{k: v for k, v in item.items() if k not in ("id", "score", "content", "text", "metadata")}}
            documents.append(_document(item.get("id"), item.get("score"), item.get("content", item.get("text")),
                                       metadata, f"{GENAI_DOCUMENTS}[{i}]", problems))
    return documents


def _result_event_documents(span_events: Iterable[Any], problems: list[tuple[str, str]]) -> list[RawDocument]:
    """Vector-store results reported as ``db.query.result`` span events with
    ``db.query.result.*`` attributes. A distance is not a score (lower is better, on the scale of
    the store's metric): only a reported score is kept."""
    return [_document(e.attributes.get(DB_RESULT + "id"), e.attributes.get(DB_RESULT + "score"),
                      e.attributes.get(DB_RESULT + "document"), e.attributes.get(DB_RESULT + "metadata"),
                      DB_RESULT_EVENT, problems, metadata_attribute="db.query.result.metadata")
            for e in span_events if e.name == DB_RESULT_EVENT and any(k.startswith(DB_RESULT) for k in e.attributes)]


