"""Vector-store instrumentations (OpenLLMetry's opentelemetry-instrumentation-chromadb and its
kin): a span per store call with ``db.system`` (or ``db.system.name``) and ``db.operation``, and one
``db.query.result`` span event per result with ``db.query.result.{id,score,distance,document,metadata}``.
A distance is not a score (lower is better, on the scale of the store's metric): only a reported
score is kept."""

from __future__ import annotations

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
        documents = result_documents(span.events, problems)
        operation = next((a[key] for key in sc.DB_OPERATIONS if a.get(key)), None)
        if documents or (str(system).lower(), str(operation).lower()) in sc.VECTOR_SEARCHES:
            return "retriever", documents
        return None, []

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f"{sc.DB_RESULT_EVENT} span events with {sc.DB_RESULT}* attributes",)


def result_documents(span_events: Iterable[Any], problems: Problems) -> list[RawDocument]:
    """The results reported as ``db.query.result`` span events with ``db.query.result.*``
    attributes (a scalar query's rows, without them, are not results)."""
    return [make_document(e.attributes.get(sc.DB_RESULT + "id"), e.attributes.get(sc.DB_RESULT + "score"),
                          e.attributes.get(sc.DB_RESULT + "document"), e.attributes.get(sc.DB_RESULT + "metadata"),
                          sc.DB_RESULT_EVENT, problems, metadata_attribute="db.query.result.metadata")
            for e in span_events
            if e.name == sc.DB_RESULT_EVENT and any(k.startswith(sc.DB_RESULT) for k in e.attributes)]
