"""OpenLLMetry (Traceloop): ``traceloop-sdk`` with ``opentelemetry-instrumentation-langchain`` and
``-llamaindex``. Every framework call is a ``traceloop.span.kind`` ``workflow`` (the root) or
``task`` span whose ``traceloop.entity.input`` and ``traceloop.entity.output`` hold the call's
arguments and result as JSON text; the SDK copies its association properties (and LangChain its
run metadata) onto every span as ``traceloop.association.properties.<key>``.

- **LangChain** retrievers are ``vector_db_retrieve <Retriever>`` spans (``gen_ai.operation.name``
  ``vector_db_retrieve``) whose output is ``{"documents": [{page_content, metadata}], "count"}``:
  no Document ids. The root ``RunnableSequence.workflow`` has ``{"inputs": ...}`` and
  ``{"outputs": ...}``; chat models are GenAI ``chat`` spans.
- **LlamaIndex** spans are ``<Class>.workflow`` / ``<Class>.task``, one per instrumented method,
  named by the class alone. A retriever's ``retrieve`` and ``_retrieve`` output a JSON array of
  JSON-encoded ``NodeWithScore`` objects, as does a node postprocessor's (whose input holds the
  ``nodes`` it was given: a reranker's list). The root's input is ``{"str_or_query_bundle": ...}``,
  a query engine's output ``{"response": ...}``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects.base import (
    ANSWER_KEYS,
    ASSOCIATION,
    QUERY_KEYS,
    Dialect,
    Problems,
    first_text,
    short_name,
)
from ragmon.collectors.dialects.genai import output_text
from ragmon.collectors.semconv import json_object, parse_json_text, scalar_text
from ragmon.collectors.span_reading import RawDocument, make_document

SPAN_KIND = "traceloop.span.kind"
WORKFLOW = "workflow"
ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT, ENTITY_OUTPUT = "traceloop.entity.input", "traceloop.entity.output"
TASK_OUTPUT = "gen_ai.task.output"  # the same output, under the GenAI task name
VECTOR_DB_RETRIEVE = "vector_db_retrieve"  # Traceloop's operation name for a LangChain retriever
#: A LlamaIndex output that lists nodes: a JSON array of JSON-encoded NodeWithScore objects.
NODES_PREFIX = '["{\\"node\\"'
#: The arguments that make a LlamaIndex call a retrieval (``retrieve``, ``_retrieve``).
QUERY_ARGUMENTS = frozenset(("str_or_query_bundle", "query_bundle"))
#: Where the question is in an entity's input, in order (LangChain, LlamaIndex, then QUERY_KEYS).
INPUT_KEYS = ("query", "str_or_query_bundle", "query_bundle", "inputs", *QUERY_KEYS)
#: Where the answer is in an entity's output (LangChain, LlamaIndex, then ANSWER_KEYS).
OUTPUT_KEYS = ("outputs", *ANSWER_KEYS)


class OpenLLMetry(Dialect):
    name = "openllmetry"
    scopes: ClassVar[tuple[str, ...]] = ("opentelemetry.instrumentation.langchain",
                                         "opentelemetry.instrumentation.llamaindex", "traceloop.tracer")
    markers: ClassVar[tuple[str, ...]] = (SPAN_KIND,)

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        a = span.attributes
        if a.get(sc.GENAI_OPERATION) == VECTOR_DB_RETRIEVE:
            return "retriever", _langchain_documents(a, problems)
        output = a.get(ENTITY_OUTPUT)
        if type(output) is not str or not (output.startswith(NODES_PREFIX) or output == "[]"):
            return None, []  # a string prefix first: most spans' outputs are never parsed here
        arguments = json_object(a.get(ENTITY_INPUT))
        if "nodes" in arguments:
            return "reranker", _llamaindex_documents(output, problems)
        if output == "[]" and not arguments.keys() & QUERY_ARGUMENTS:
            return None, []  # an empty list of something else
        return "retriever", _llamaindex_documents(output, problems)

    def own_list_name(self, span: Any, kind: str) -> str:
        a = span.attributes
        named = scalar_text(a.get(ASSOCIATION + sc.LANGCHAIN_RETRIEVER_NAME))
        if named:
            return named
        if a.get(sc.GENAI_OPERATION) == VECTOR_DB_RETRIEVE:
            return scalar_text(a.get(ENTITY_NAME)) or span.name
        return short_name(span.name)  # "VectorIndexRetriever.task" -> "VectorIndexRetriever"

    def list_question(self, span: Any) -> str | None:
        return _text_under(json_object(span.attributes.get(ENTITY_INPUT)), INPUT_KEYS, QUERY_KEYS)

    def is_chain(self, span: Any) -> bool:
        return span.attributes.get(SPAN_KIND) == WORKFLOW

    def root_question(self, span: Any) -> str | None:
        return self.list_question(span)

    def root_answer(self, span: Any) -> str | None:
        return _text_under(json_object(span.attributes.get(ENTITY_OUTPUT)), OUTPUT_KEYS, ANSWER_KEYS)

    def is_generation(self, span: Any) -> bool:
        a = span.attributes
        return a.get(sc.GENAI_OPERATION) in sc.GENAI_GENERATION or sc.GENAI_OUTPUT_MESSAGES in a

    def generation_answer(self, span: Any) -> str | None:
        return output_text(span.attributes.get(sc.GENAI_OUTPUT_MESSAGES))

    def tokens(self, span: Any) -> tuple[Any, Any]:
        a = span.attributes
        return a.get(sc.GENAI_INPUT_TOKENS), a.get(sc.GENAI_OUTPUT_TOKENS)

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f"a LangChain retriever span ({sc.GENAI_OPERATION} {VECTOR_DB_RETRIEVE})",
                f"a LlamaIndex span whose {ENTITY_OUTPUT} lists NodeWithScore objects (LlamaIndex classes whose "
                "names hold a digit, such as BM25Retriever, make no span)")


def _text_under(data: dict[str, Any], keys: tuple[str, ...], inner: tuple[str, ...]) -> str | None:
    """The first non-empty string under one of ``keys``, or under one of ``inner`` in an object
    there (``{"query_bundle": {"query_str": ...}}``, ``{"inputs": {"question": ...}}``)."""
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict):
            found = first_text(value, inner)
            if found is not None:
                return found
    return None


def _langchain_documents(attributes: dict[str, Any], problems: Problems) -> list[RawDocument] | None:
    """``{"documents": [{page_content, metadata}], ...}`` (no ids); None when content tracing is
    off (no output at all)."""
    output = attributes.get(ENTITY_OUTPUT, attributes.get(TASK_OUTPUT))
    if output is None:
        return None
    listed = json_object(output).get("documents")
    if not isinstance(listed, list):
        problems.append((ENTITY_OUTPUT, f"`{ENTITY_OUTPUT}` of a retriever lists no documents"))
        return None
    return [make_document(None, None, item.get("page_content"), item.get("metadata") or {},
                          f"{ENTITY_OUTPUT}.documents[{i}]", problems, metadata_attribute=ENTITY_OUTPUT)
            for i, item in enumerate(listed) if isinstance(item, dict)]


def _python_json(text: Any) -> Any:
    """JSON text written by Python's ``json``, which writes ``NaN`` for a score no store could
    compute (a question sharing no term with the corpus): read as the standard's JSON, else as
    Python's."""
    value = parse_json_text(text)
    if value is None and isinstance(text, str):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
    return value


def _llamaindex_documents(output: str, problems: Problems) -> list[RawDocument] | None:
    """A JSON array of NodeWithScore objects, each JSON text itself (the instrumentation's encoder
    writes each as its ``to_json()``); None when the array cannot be read."""
    listed = _python_json(output)
    if not isinstance(listed, list):
        problems.append((ENTITY_OUTPUT, f"`{ENTITY_OUTPUT}` is not a JSON array"))
        return None
    documents = []
    for i, item in enumerate(listed):
        scored = _python_json(item)
        node = scored.get("node") if isinstance(scored, dict) else None
        if not isinstance(node, dict):
            problems.append((ENTITY_OUTPUT, f"`{ENTITY_OUTPUT}[{i}]` is not a NodeWithScore"))
            continue
        text = node.get("text")
        if text is None and isinstance(node.get("text_resource"), dict):
            text = node["text_resource"].get("text")
        documents.append(make_document(node.get("id_"), scored.get("score"), text, node.get("metadata") or {},
                                       f"{ENTITY_OUTPUT}[{i}].node", problems, metadata_attribute=ENTITY_OUTPUT))
    return documents
