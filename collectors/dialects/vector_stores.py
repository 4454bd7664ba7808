"""Vector-store instrumentations (OpenLLMetry's opentelemetry-instrumentation-chromadb and its
kin): a span per store call with ``db.system`` (or ``db.system.name``) and ``db.operation``, and one
span event per result:

- ``db.query.result`` with ``db.query.result.{id,score,distance,document,metadata}`` (Chroma, Marqo,
  Pinecone). Pinecone's metadata is Python's ``repr`` of a dict (``str(metadata)``; ``None`` without
  any), read as Milvus's entities are, its ``text`` field the passage text;
- ``db.search.result`` with ``db.search.result.{id,score,distance,entity}`` and
  ``db.search.query.id`` (Milvus). The entity is the search's output fields written as Python's
  ``repr`` of a dict, not JSON: it is read as a Python literal (bounded in size, never evaluated),
  its ``text`` field as the passage text and the rest as the passage's metadata.

A distance is not a score (lower is better, on the scale of the store's metric; Milvus calls a
cosine similarity a distance too, and its search span does not say which metric): only a reported
score is kept. Pinecone's "score" is a similarity for a cosine or dotproduct index but a Euclidean
distance (lower is more similar) for a euclidean one, and its span does not say which: it is not
kept either."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects.base import Dialect, Problems
from ragmon.collectors.span_reading import RawDocument, make_document

_INSTRUMENTATIONS = ("chromadb", "qdrant", "lancedb", "pinecone", "weaviate", "milvus", "marqo")


class VectorStores(Dialect):
    name = "vector_store"
    scopes: ClassVar[tuple[str, ...]] = tuple(f"opentelemetry.instrumentation.{name}" for name in _INSTRUMENTATIONS)
    markers: ClassVar[tuple[str, ...]] = sc.DB_SYSTEMS

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        a = span.attributes
        system = next((a[key] for key in sc.DB_SYSTEMS if a.get(key)), None)
        if system is None:
            return None, []
        store = _store(span)
        documents = (result_documents(span.events, problems, python_repr_metadata=store in REPR_METADATA)
                     or search_result_documents(span.events, problems))
        operation = next((a[key] for key in sc.DB_OPERATIONS if a.get(key)), None)
        if documents or (str(system).lower(), str(operation).lower()) in sc.VECTOR_SEARCHES \
                or span.name in sc.VECTOR_SEARCH_SPANS:
            return "retriever", documents
        return None, []

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        silent = list(dict.fromkeys(store for store in map(_store, spans) if store in NO_RESULTS))
        if silent:  # no event will ever come: say so, and what to do, rather than which events were missing
            return (*(NO_RESULTS[store] for store in silent), NO_RESULTS_WORKAROUND)
        return (f"{sc.DB_RESULT_EVENT} span events with {sc.DB_RESULT}* attributes "
                f"(or {sc.DB_SEARCH_RESULT_EVENT} events with {sc.DB_SEARCH_RESULT}*)",)


#: The instrumentations (by the store they trace) whose spans never carry a search's results, as of
#: OpenLLMetry 0.62.4: a trace of such a search alone is never read, whatever the search found. What
#: each does record, in fixed words (an unread trace's explanation, `ragmon otlp unread`).
NO_RESULTS = {
    "lancedb": "results: opentelemetry-instrumentation-lancedb records none (its lancedb.search span ends when "
               "LanceTable.search returns the query, before the query runs; it carries db.system and db.operation "
               "only)",
    "qdrant": "results: opentelemetry-instrumentation-qdrant records none (its spans carry the collection and "
              "db.vector.query.top_k only)",
    "weaviate": "results: opentelemetry-instrumentation-weaviate records none (its db.weaviate.* spans carry "
                "db.system, db.operation and some of the call's arguments, never what it returned)",
}
NO_RESULTS_WORKAROUND = (f"wrap the search in a span of {sc.GENAI_OPERATION} retrieval listing what it returned in "
                         f"{sc.GENAI_DOCUMENTS}")
_SCOPE_PREFIX = "opentelemetry.instrumentation."


def _store(span: Any) -> str | None:
    """The store a span of this dialect traces: its instrumentation scope's, else its ``db.system``."""
    if span.scope.startswith(_SCOPE_PREFIX):
        return span.scope[len(_SCOPE_PREFIX):]
    system = next((span.attributes[key] for key in sc.DB_SYSTEMS if span.attributes.get(key)), None)
    return str(system).lower() if system is not None else None


#: The stores whose instrumentation writes a result's metadata as Python's ``repr`` of a dict, and
#: whose score may be a distance (see the module's docstring)
REPR_METADATA = frozenset({"pinecone"})


def result_documents(span_events: Iterable[Any], problems: Problems, *,
                     python_repr_metadata: bool) -> list[RawDocument]:
    """The results reported as ``db.query.result`` span events with ``db.query.result.*``
    attributes (a scalar query's rows, without them, are not results). With
    ``python_repr_metadata`` (Pinecone, which records no document), the metadata is a dict's repr,
    its ``text`` the passage text, and the score is not kept; the result's vector
    (``db.query.result.vector``) is never read."""
    documents: list[RawDocument] = []
    for event in span_events:
        a = event.attributes
        if event.name != sc.DB_RESULT_EVENT or not any(k.startswith(sc.DB_RESULT) for k in a):
            continue
        score, text, metadata = a.get(sc.DB_RESULT + "score"), a.get(sc.DB_RESULT + "document"), \
            a.get(sc.DB_RESULT + "metadata")
        if python_repr_metadata:
            where = f"{sc.DB_RESULT_EVENT}.{len(documents)}"
            metadata = _entity(None if metadata == "None" else metadata, where, problems,
                               attribute="db.query.result.metadata", field="metadata", of="metadata fields")
            text = metadata.pop(_TEXT_FIELD, None)
            score = None
        documents.append(make_document(a.get(sc.DB_RESULT + "id"), score, text, metadata, sc.DB_RESULT_EVENT,
                                       problems, metadata_attribute="db.query.result.metadata"))
    return documents


#: The largest entity text read as a Python literal: a passage's output fields, not a document.
MAX_ENTITY_CHARS = 65_536
_TEXT_FIELD = "text"  # the field LangChain's and LlamaIndex's Milvus and Pinecone stores keep the chunk in


def search_result_documents(span_events: Iterable[Any], problems: Problems) -> list[RawDocument]:
    """The results reported as ``db.search.result`` span events (Milvus), in their order. A search
    of several query vectors reports each one's results: only the first vector's are this span's
    list, and the others are named in ``problems``."""
    documents: list[RawDocument] = []
    other_queries = 0
    for event in span_events:
        a = event.attributes
        if event.name != sc.DB_SEARCH_RESULT_EVENT or not any(k.startswith(sc.DB_SEARCH_RESULT) for k in a):
            continue
        if a.get(sc.DB_SEARCH_QUERY_ID, 0) != 0:
            other_queries += 1
            continue
        where = f"{sc.DB_SEARCH_RESULT_EVENT}.{len(documents)}"
        entity = _entity(a.get(sc.DB_SEARCH_RESULT + "entity"), where, problems)
        text = entity.pop(_TEXT_FIELD, None)
        documents.append(make_document(a.get(sc.DB_SEARCH_RESULT + "id"), a.get(sc.DB_SEARCH_RESULT + "score"),
                                       text, entity, where, problems, metadata_attribute="db.search.result.entity"))
    if other_queries:
        problems.append(("db.search.result", f"{other_queries} results of further query vectors of one search "
                         "are left out: only the first vector's results are its list"))
    return documents


def _entity(value: Any, where: str, problems: Problems, attribute: str = "db.search.result.entity",
            field: str = "entity", of: str = "output fields") -> dict[str, Any]:
    """A result's output fields (or metadata): a dict, or the text of one as the instrumentations
    write it (``str(dict)``: Python's repr); {} when absent. A problem names ``attribute``, and
    the value as ``where.field``."""
    if value is None or isinstance(value, dict):
        return dict(value or {})
    fits = isinstance(value, str) and len(value) <= MAX_ENTITY_CHARS
    if fits:
        try:  # literals only: a name, a call or an operator is refused, never evaluated
            parsed = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    problems.append((attribute, f"`{where}.{field}` is not a dict of {of}"
                     + ("" if fits else f" of at most {MAX_ENTITY_CHARS} characters")))
    return {}
