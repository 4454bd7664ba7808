"""What a framework returned, in the shape the apps report it (the conformance tests' expected values).

Read off the framework's own objects by their attributes, so this module imports no framework and
may be imported before the instrumentation is set up.
"""

from __future__ import annotations

from typing import Any


def langchain_documents(documents: list[Any]) -> list[dict[str, Any]]:
    """LangChain ``Document``\\ s: their id, text and metadata (a retriever gives no score)."""
    return [{"id": d.id, "content": d.page_content, "metadata": dict(d.metadata), "score": None} for d in documents]


def llama_nodes(nodes: list[Any]) -> list[dict[str, Any]]:
    """LlamaIndex ``NodeWithScore``\\ s: the node's id, text and metadata, and the score."""
    return [{"id": n.node.node_id, "content": n.node.get_content(), "metadata": dict(n.node.metadata),
             "score": n.score} for n in nodes]
