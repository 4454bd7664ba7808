"""The span vocabulary ragmon reads and writes, in one place: OpenInference, the OTel GenAI
conventions, vector-store result events, and ragmon's own attributes.

The receiver reads spans with these names (``ragmon.collectors.dialects``, then
``ragmon.collectors.span_mapping``); the emitter (``ragmon.collectors.emitter``) writes documents with
:func:`document_attributes`. What ragmon emits is what it reads back.

Documents are read from:

- **OpenInference**: ``retrieval.documents.N.document.{id,score,content,metadata}`` on RETRIEVER
  spans, ``reranker.output_documents.N.document.*`` on RERANKER spans; ``metadata`` is a JSON
  object (a string on the wire) that may carry ragmon's passage fields (:data:`PASSAGE_FIELDS`).
- **OTel GenAI**: ``gen_ai.retrieval.documents`` on ``retrieval`` operations: a list of
  ``{id, score, ...}`` objects, structured or as a JSON string; extra properties are metadata.
- **Vector stores** (e.g. opentelemetry-instrumentation-chromadb): one ``db.query.result`` span
  event per result with ``db.query.result.{id,score,distance,document,metadata}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

# --- OpenInference -----------------------------------------------------------------------------
SPAN_KIND = "openinference.span.kind"
RETRIEVER, RERANKER, LLM, CHAIN, AGENT = "RETRIEVER", "RERANKER", "LLM", "CHAIN", "AGENT"
INPUT_VALUE, INPUT_MIME_TYPE = "input.value", "input.mime_type"
OUTPUT_VALUE, OUTPUT_MIME_TYPE = "output.value", "output.mime_type"
JSON_MIME_TYPE = "application/json"
USER_ID, SESSION_ID, METADATA = "user.id", "session.id", "metadata"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
RERANKER_OUTPUT_DOCUMENTS, RERANKER_QUERY = "reranker.output_documents", "reranker.query"
RERANKER_MODEL_NAME = "reranker.model_name"
LLM_OUTPUT_MESSAGE = "llm.output_messages.0.message.content"
LLM_PROMPT_TEMPLATE, LLM_MODEL_NAME = "llm.prompt_template.template", "llm.model_name"
LLM_INVOCATION_PARAMETERS = "llm.invocation_parameters"
LLM_PROMPT_TOKENS, LLM_COMPLETION_TOKENS = "llm.token_count.prompt", "llm.token_count.completion"
LANGCHAIN_RETRIEVER_NAME = "ls_retriever_name"  # LangChain's own metadata key for a retriever

# --- OTel GenAI --------------------------------------------------------------------------------
GENAI_OPERATION = "gen_ai.operation.name"
GENAI_RETRIEVAL = "retrieval"
GENAI_GENERATION = ("chat", "text_completion", "generate_content")
GENAI_DOCUMENTS = "gen_ai.retrieval.documents"
GENAI_QUERY = "gen_ai.retrieval.query.text"
GENAI_DATA_SOURCE = "gen_ai.data_source.id"
GENAI_CONVERSATION = "gen_ai.conversation.id"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GENAI_INPUT_TOKENS, GENAI_OUTPUT_TOKENS = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
ENDUSER_ID = "enduser.id"

# --- vector stores -----------------------------------------------------------------------------
DB_SYSTEMS = ("db.system", "db.system.name")
DB_OPERATIONS = ("db.operation", "db.operation.name")
DB_RESULT_EVENT = "db.query.result"
DB_RESULT = "db.query.result."  # + id, score, distance, document, metadata
DB_SEARCH_RESULT_EVENT = "db.search.result"  # Milvus: one per result of a search
DB_SEARCH_RESULT = "db.search.result."  # + id, score, distance, entity (a Python repr of the output fields)
DB_SEARCH_QUERY_ID = "db.search.query.id"  # which query vector of the search the result answers
#: (store, operation) of the vector searches whose spans are lists even when nothing was found
#: (no result event). Other stores' spans count only with results: a scalar query of a database
#: can report ``db.query.result`` events too (rows, not ranked results).
VECTOR_SEARCHES = {("chroma", "query"), ("milvus", "search"), ("milvus", "hybrid_search")}
#: The same, by span name, for instrumentations that set no ``db.operation`` (Pinecone's)
VECTOR_SEARCH_SPANS = {"pinecone.query"}

# --- ragmon ------------------------------------------------------------------------------------
CONTEXT_DOCUMENT_IDS = "ragmon.context.document_ids"  # the ids of the passages the model saw, in order
CALLER_GROUPS = "ragmon.caller.groups"
TENANT = "ragmon.tenant"  # a resource attribute
FEEDBACK_TRACE_ID, FEEDBACK_KIND, FEEDBACK_VALUE = "ragmon.feedback.trace_id", "ragmon.feedback.kind", \
    "ragmon.feedback.value"

#: Passage fields a document's metadata may carry (native names of docs/events.md).
PASSAGE_FIELDS = ("doc_id", "doc_version", "span", "acl", "indexed_at", "source_modified_at", "embedding_model")

#: The attributes whose malformed values are reported (a closed set: a metric label).
CHECKED_ATTRIBUTES = ("metadata", "document.metadata", "document.score", GENAI_DOCUMENTS, CONTEXT_DOCUMENT_IDS,
                      CALLER_GROUPS, "db.query.result.metadata", "traceloop.entity.output",
                      # the documents of the MLflow and Langfuse dialects (collectors/dialects/)
                      "mlflow.spanOutputs", "langfuse.observation.output")


_decode_json = msgspec.json.Decoder().decode
_encode_json = msgspec.json.Encoder().encode
# Classes as tuples, made once: ``isinstance(v, str | int)`` builds the union anew at every call, and
# these run for every attribute, document and listed id of every span
_TEXTS = (str, bytes)
_SEQUENCES = (list, tuple)
_ID_TYPES = (str, int)
_NOT_SCALAR = (bool, dict, list)


def parse_json_text(value: Any) -> Any:
    """JSON inside an attribute value; None when it is not JSON (or nested beyond reason)."""
    if not isinstance(value, _TEXTS):
        return None
    try:
        return _decode_json(value)
    except (ValueError, RecursionError):
        return None


def json_object(value: Any) -> dict[str, Any]:
    """An object given as a dict or as JSON text; {} for anything else."""
    if isinstance(value, dict):
        return value
    parsed = parse_json_text(value)
    return parsed if isinstance(parsed, dict) else {}


def string_list(value: Any) -> list[str] | None:
    """A list of strings given as a list or as a JSON array; None for anything else."""
    if isinstance(value, str):
        value = parse_json_text(value)
    if not isinstance(value, _SEQUENCES):
        return None
    texts = []
    for v in value:  # a loop, not all() over a generator: this runs for every span's groups and listed ids
        if v.__class__ is str:
            texts.append(v)
        elif isinstance(v, _ID_TYPES) and not isinstance(v, bool):
            texts.append(str(v))
        else:
            return None
    return texts


def scalar_text(value: Any) -> str | None:
    """A scalar attribute value (a string, number) as text; None for nothing, an empty string,
    a boolean, or a list or object."""
    if type(value) is str:  # nearly always: no other test needed
        return value or None
    if value is None or isinstance(value, _NOT_SCALAR):
        return None
    return str(value) or None


def finite_number(value: Any) -> float | None:
    """A score as a finite float; None for what is not one."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


# --- writing -----------------------------------------------------------------------------------


def document_attributes(prefix: str, passages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Native passages as OpenInference ``<prefix>.N.document.*`` attributes; the passage fields
    besides id, score and text go into the document's metadata."""
    attributes: dict[str, Any] = {}
    for i, passage in enumerate(passages):
        base = f"{prefix}.{i}.document"
        attributes[f"{base}.id"] = passage["id"]
        if passage.get("score") is not None:
            attributes[f"{base}.score"] = float(passage["score"])
        if passage.get("text") is not None:
            attributes[f"{base}.content"] = passage["text"]
        metadata = {k: passage[k] for k in PASSAGE_FIELDS if passage.get(k) is not None}
        if metadata:
            attributes[f"{base}.metadata"] = json_text(metadata)
    return attributes


def json_text(value: Any) -> str:
    return _encode_json(value).decode()
