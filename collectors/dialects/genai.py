"""The OTel GenAI semantic conventions: ``gen_ai.operation.name`` says what a span is; a
``retrieval`` lists ``gen_ai.retrieval.documents`` (``{id, score, ...}`` objects, structured or as
JSON text; extra properties are metadata) for ``gen_ai.retrieval.query.text`` over
``gen_ai.data_source.id``; a ``chat`` (or other generation) has ``gen_ai.output.messages`` and
``gen_ai.usage.*``; the conversation is ``gen_ai.conversation.id``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects.base import Dialect, Problems
from ragmon.collectors.semconv import json_object, parse_json_text, scalar_text
from ragmon.collectors.span_reading import RawDocument, make_document

_DOCUMENT_KEYS = frozenset(("id", "score", "content", "metadata"))


class GenAI(Dialect):
    name = "genai"
    markers: ClassVar[tuple[str, ...]] = (sc.GENAI_OPERATION,)

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        a = span.attributes
        if a.get(sc.GENAI_OPERATION) != sc.GENAI_RETRIEVAL:
            return None, []
        # without the (opt-in) documents attribute the span does not say what it found
        return "retriever", documents_of(a, problems) if sc.GENAI_DOCUMENTS in a else None

    def own_list_name(self, span: Any, kind: str) -> str:
        return span.name  # "retrieval {gen_ai.data_source.id}": the whole name says which store

    def list_question(self, span: Any) -> str | None:
        return scalar_text(span.attributes.get(sc.GENAI_QUERY))

    def is_generation(self, span: Any) -> bool:
        return span.attributes.get(sc.GENAI_OPERATION) in sc.GENAI_GENERATION

    def generation_answer(self, span: Any) -> str | None:
        return output_text(span.attributes.get(sc.GENAI_OUTPUT_MESSAGES))

    def tokens(self, span: Any) -> tuple[Any, Any]:
        a = span.attributes
        return a.get(sc.GENAI_INPUT_TOKENS), a.get(sc.GENAI_OUTPUT_TOKENS)

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f"a span of {sc.GENAI_OPERATION} {sc.GENAI_RETRIEVAL}",)


def documents_of(attributes: Mapping[str, Any], problems: Problems) -> list[RawDocument]:
    """``gen_ai.retrieval.documents``, structured or JSON text: its extra properties (besides id,
    score, content) are metadata."""
    value = attributes.get(sc.GENAI_DOCUMENTS)
    if isinstance(value, str):
        value = parse_json_text(value)
        if not isinstance(value, list):
            problems.append((sc.GENAI_DOCUMENTS, f"`{sc.GENAI_DOCUMENTS}` is not a JSON array"))
    documents = []
    for i, item in enumerate(value if isinstance(value, list | tuple) else []):
        if isinstance(item, dict):
            metadata = {**json_object(item.get("metadata")),
                        **{k: v for k, v in item.items() if k not in _DOCUMENT_KEYS}}
            documents.append(make_document(item.get("id"), item.get("score"), item.get("content"),
                                           metadata, f"{sc.GENAI_DOCUMENTS}[{i}]", problems))
    return documents


def output_text(value: Any) -> str | None:
    """The first text part of ``gen_ai.output.messages`` (structured or JSON text), or the value
    itself when it is plain text. JSON text cut short (an SDK's attribute length limit) is no
    answer: the start of the messages' JSON is not what the model said."""
    if isinstance(value, str):
        parsed = parse_json_text(value)
        if parsed is None:
            return value if value and value.lstrip()[:1] not in ("[", "{") else None  # plain text
        value = parsed
    for message in value if isinstance(value, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "text" and part.get("content"):
                return str(part["content"])
    return None
