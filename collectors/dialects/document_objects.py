"""Documents that a span lists as JSON objects, the way frameworks serialise their own document types
into a span's input or output (MLflow's ``mlflow.spanOutputs``, Langfuse's
``langfuse.observation.output``):

- LangChain's ``Document`` and MLflow's ``Document``: ``{"page_content", "metadata", "id"}``;
- LlamaIndex's ``NodeWithScore``: ``{"node": {"id_", "text", "metadata", ...}, "score"}``;
- an application's own: ``{"id", "content" | "text", "metadata", "score"}``;
- a bare string: a document of content alone.

A document's score is its own ``score``, else its metadata's (MLflow keeps a LlamaIndex node's score
there). A list may be given bare or as ``{"documents": [...]}``.
"""

from __future__ import annotations

from typing import Any

from ragmon.collectors.dialects.base import Problems
from ragmon.collectors.semconv import finite_number, parse_json_text
from ragmon.collectors.span_reading import RawDocument, make_document

_CONTENT_KEYS = ("page_content", "content", "text")


def json_documents(value: Any, attribute: str, problems: Problems) -> list[RawDocument] | None:
    """The documents a list of document objects holds (JSON text or already parsed). None when the
    span does not say what the list held: no value (the output was not recorded), or a value that
    is no such list, which is named in ``problems`` under ``attribute``."""
    listed = parse_json_text(value) if isinstance(value, str | bytes) else value
    if isinstance(listed, dict) and isinstance(listed.get("documents"), list):
        listed = listed["documents"]
    if not isinstance(listed, list):
        if value not in (None, "", "null"):
            problems.append((attribute, f"`{attribute}` is not a JSON array of documents"))
        return None
    documents = []
    for i, item in enumerate(listed):
        where = f"{attribute}[{i}]"
        if isinstance(item, str):
            documents.append(make_document(None, None, item, None, where, problems, metadata_attribute=attribute))
        elif isinstance(item, dict):
            documents.append(_document(item, where, attribute, problems))
    return documents


def _document(item: dict[str, Any], where: str, attribute: str, problems: Problems) -> RawDocument:
    node = item.get("node")
    if isinstance(node, dict):  # LlamaIndex's NodeWithScore
        return make_document(node.get("id_"), item.get("score"), node.get("text"),
                             node.get("metadata"), where, problems, metadata_attribute=attribute)
    content = next((item[k] for k in _CONTENT_KEYS if isinstance(item.get(k), str)), None)
    score = item.get("score")
    metadata = item.get("metadata")
    if score is None and isinstance(metadata, dict) and finite_number(metadata.get("score")) is not None:
        score = metadata["score"]
    return make_document(item.get("id"), score, content, metadata, where, problems, metadata_attribute=attribute)
