"""OpenInference (Arize): ``openinference.span.kind`` on every span; documents flattened into
``retrieval.documents.N.document.{id,score,content,metadata}`` on RETRIEVER spans and
``reranker.output_documents.N.document.*`` on RERANKER spans; a chain's ``input.value`` and
``output.value`` (plain or JSON by ``*.mime_type``); ``llm.*`` on model calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects.base import (
    ANSWER_KEYS,
    QUERY_KEYS,
    Dialect,
    Problems,
    metadata_of,
    short_name,
    value_text,
)
from ragmon.collectors.semconv import json_object, scalar_text
from ragmon.collectors.span_reading import RawDocument, make_document

#: What OpenInference writes in place of a value its TraceConfig hides (openinference-instrumentation's
#: ``config.py``: ``REDACTED_VALUE = "__REDACTED__"``, written by ``TraceConfig.mask`` for
#: ``input.value`` and ``reranker.query`` under OPENINFERENCE_HIDE_INPUTS, ``output.value`` under
#: HIDE_OUTPUTS, a retrieval document's content and metadata under HIDE_RETRIEVAL_DOCUMENTS or
#: HIDE_OUTPUTS, an output message's content under HIDE_OUTPUT_TEXT). It is no data: read as absent,
#: so a hidden question is no question, a hidden answer no answer, and hidden content names no passage.
REDACTED = "__REDACTED__"

_KINDS = {sc.RETRIEVER: ("retriever", sc.RETRIEVAL_DOCUMENTS), sc.RERANKER: ("reranker", sc.RERANKER_OUTPUT_DOCUMENTS)}
#: Attribute keys whose split into (document number, field) is remembered, per list prefix: the
#: same keys recur in every span of a kind (``retrieval.documents.3.document.id``). The keys are the
#: sender's, so the memory is bounded by their number and length (under 1 MB a prefix): a longer key
#: is split every time it comes
MAX_CACHED_KEYS = 4096
MAX_CACHED_KEY_LENGTH = 128
_KEY_PARTS: dict[str, dict[str, tuple[str, str] | None]] = {prefix: {} for _, prefix in _KINDS.values()}
_NEW = object()


class OpenInference(Dialect):
    name = "openinference"
    scopes: ClassVar[tuple[str, ...]] = ("openinference.instrumentation.",)
    markers: ClassVar[tuple[str, ...]] = (sc.SPAN_KIND,)

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        a = span.attributes
        kind = a.get(sc.SPAN_KIND)
        found = _KINDS.get(kind) if type(kind) is str else None
        if found is None and kind is not None:
            found = _KINDS.get(str(kind).upper())
        if found is None:
            return None, []
        documents = documents_of(a, found[1], problems)
        if found[0] == "retriever":
            documents = _with_output_ids(a, documents)
        return found[0], documents or None  # no attribute for an empty list: it cannot say it found nothing

    def own_list_name(self, span: Any, kind: str) -> str:
        a = span.attributes
        if kind == "reranker":
            model = a.get(sc.RERANKER_MODEL_NAME)
            return (model if isinstance(model, str) and model else short_name(span.name)) or "reranker"
        langchain = metadata_of(span).get(sc.LANGCHAIN_RETRIEVER_NAME)
        return langchain if isinstance(langchain, str) and langchain else short_name(span.name)

    def list_question(self, span: Any) -> str | None:
        return (_shown(value_text(span, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, QUERY_KEYS))
                or _shown(scalar_text(span.attributes.get(sc.RERANKER_QUERY))))

    def is_chain(self, span: Any) -> bool:
        return str(span.attributes.get(sc.SPAN_KIND, "")).upper() in (sc.CHAIN, sc.AGENT)

    def root_question(self, span: Any) -> str | None:
        return _shown(value_text(span, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, QUERY_KEYS))

    def root_answer(self, span: Any) -> str | None:
        return _shown(value_text(span, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, ANSWER_KEYS))

    def is_generation(self, span: Any) -> bool:
        """A model call. Haystack's prompt builders are reported as LLM spans too: a span with a
        prompt template and no model, invocation parameters or output messages is not one."""
        a = span.attributes
        if str(a.get(sc.SPAN_KIND, "")).upper() != sc.LLM:
            return False
        return sc.LLM_PROMPT_TEMPLATE not in a or any(
            key in a for key in (sc.LLM_MODEL_NAME, sc.LLM_INVOCATION_PARAMETERS, sc.LLM_OUTPUT_MESSAGE))

    def generation_answer(self, span: Any) -> str | None:
        a = span.attributes
        # each hidden on its own: HIDE_OUTPUT_TEXT hides the message but leaves output.value
        return _shown(scalar_text(a.get(sc.LLM_OUTPUT_MESSAGE))) or (
            _shown(scalar_text(a.get(sc.OUTPUT_VALUE))) if a.get(sc.OUTPUT_MIME_TYPE) != sc.JSON_MIME_TYPE else None)

    def tokens(self, span: Any) -> tuple[Any, Any]:
        a = span.attributes
        return a.get(sc.LLM_PROMPT_TOKENS), a.get(sc.LLM_COMPLETION_TOKENS)

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f"a span of {sc.SPAN_KIND} {sc.RETRIEVER} or {sc.RERANKER}",)


def documents_of(attributes: Mapping[str, Any], prefix: str, problems: Problems) -> list[RawDocument]:
    """The documents flattened into ``<prefix>.<n>.document.<field>`` attributes, in order of n."""
    found: dict[str, dict[str, Any]] = {}
    head = prefix + "."
    parts_of = _KEY_PARTS.get(prefix)
    if parts_of is None:  # a prefix of no list kind: nothing remembered
        parts_of = {}
    for key, value in attributes.items():
        # one lookup for a key seen before: this runs for every attribute of every passage
        parts = parts_of.get(key, _NEW)
        if parts is _NEW:
            parts = _document_key(key, head)
            if len(parts_of) < MAX_CACHED_KEYS and len(key) <= MAX_CACHED_KEY_LENGTH:
                parts_of[key] = parts
        if parts is not None:
            number, name = parts
            document = found.get(number)
            if document is None:
                document = found[number] = {}
            document[name] = value
    documents = []
    for n in sorted(found, key=int):
        d = found[n]
        content, metadata = d.get("content"), d.get("metadata")
        # compared inline, not through _shown: this runs for every passage
        documents.append(make_document(d.get("id"), d.get("score"), None if content == REDACTED else content,
                                       None if metadata == REDACTED else metadata, f"{head}{n}.document", problems))
    return documents


def _document_key(key: str, head: str) -> tuple[str, str] | None:
    """``(number, field)`` of a ``<head><number>.document.<field>`` key; None for any other key."""
    if not key.startswith(head):
        return None
    # string methods, not a regular expression
    number, dot, name = key[len(head):].partition(".document.")
    return (number, name) if dot and name and number.isdecimal() else None


def _shown(value: Any) -> Any:
    """``value``, or None where OpenInference hid it (one string compare where a value is read)."""
    return None if value == REDACTED else value


def _with_output_ids(attributes: dict[str, Any], documents: list[RawDocument]) -> list[RawDocument]:
    """LangChain's retriever spans carry each Document's content and metadata but not its id; the
    span's JSON ``output.value`` lists the Documents with their ids. They are taken when the lists
    agree document by document."""
    if not documents or all(d.id for d in documents) or attributes.get(sc.OUTPUT_MIME_TYPE) != sc.JSON_MIME_TYPE:
        return documents
    listed = json_object(attributes.get(sc.OUTPUT_VALUE)).get("documents")
    if not isinstance(listed, list) or len(listed) != len(documents):
        return documents
    pairs = list(zip(listed, documents, strict=True))
    if not all(isinstance(item, dict) and item.get("page_content") == d.content for item, d in pairs):
        return documents
    for item, document in pairs:
        if not document.id and isinstance(item.get("id"), str | int) and not isinstance(item.get("id"), bool):
            document.id = str(item["id"]) or None
    return documents
