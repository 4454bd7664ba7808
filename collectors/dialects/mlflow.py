"""MLflow tracing (``mlflow-tracing`` 3.x: its autolog integrations and ``@mlflow.trace``), exported
over OTLP. Every span is of the instrumentation scope ``mlflow.tracing.provider`` and carries
``mlflow.spanType``; every attribute MLflow sets is JSON text, ``mlflow.spanType`` included
(``"RETRIEVER"`` with its quotes), and so is every attribute an application sets through MLflow's
span API (``LiveSpan.set_attribute``).

- RETRIEVER spans list their documents in ``mlflow.spanOutputs`` as MLflow's ``Document``
  (``page_content``, ``metadata``, ``id``; a LlamaIndex node's score in its metadata); RERANKER spans
  (LlamaIndex postprocessors that dispatch rerank events) list LlamaIndex's ``NodeWithScore``\\ s.
- ``mlflow.spanInputs`` and ``mlflow.spanOutputs`` hold a span's arguments and result: a string, or
  an object of the function's parameter names (``query``, ``str_or_query_bundle``, ...).
- The caller: MLflow's trace metadata (``mlflow.trace.user``, ``mlflow.trace.session``) is not
  exported over OTLP. The caller reaches the spans as the application's own attributes (``user.id``,
  ``session.id``, ``ragmon.caller.groups``, a ``metadata`` object), as LangChain's run metadata,
  which MLflow writes to each span of the run as ``metadata`` (``user_id``, ``session_id``,
  ``tenant``, ``groups``), or as trace tags, which MLflow writes to the root span as
  ``mlflow.traceTag.<key>`` (plain strings; with opentelemetry-sdk 1.43 and later MLflow 3.17 loses
  the root span of a trace that has tags instead).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects.bags import caller_key_names, fill, prefixed_bag
from ragmon.collectors.dialects.base import (
    ANSWER_KEYS,
    QUERY_KEYS,
    Dialect,
    Problems,
    TraceFacts,
    first_text,
    group_list,
    metadata_facts,
    metadata_of,
    short_name,
)
from ragmon.collectors.dialects.document_objects import json_documents
from ragmon.collectors.semconv import json_object, parse_json_text, scalar_text
from ragmon.collectors.span_reading import RawDocument

SCOPE = "mlflow.tracing.provider"
SPAN_TYPE, INPUTS, OUTPUTS = "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs"
TOKEN_USAGE = "mlflow.chat.tokenUsage"
TRACE_TAG = "mlflow.traceTag."
#: LlamaIndex's argument names for the question (``retrieve(str_or_query_bundle)``), beside the usual ones.
MLFLOW_QUERY_KEYS = (*QUERY_KEYS, "str_or_query_bundle")

#: MLflow's span types (``mlflow.entities.SpanType``) as it writes them: JSON text, quotes included.
SPAN_TYPES = tuple(f'"{t}"' for t in ("LLM", "CHAIN", "AGENT", "TOOL", "CHAT_MODEL", "RETRIEVER", "PARSER",
                                      "EMBEDDING", "RERANKER", "MEMORY", "UNKNOWN", "WORKFLOW", "TASK",
                                      "GUARDRAIL", "EVALUATOR"))

# the span type as MLflow writes it (JSON text), and as a translating collector may pass it on
_KINDS = {'"RETRIEVER"': "retriever", '"RERANKER"': "reranker", "RETRIEVER": "retriever", "RERANKER": "reranker"}
_CHAINS = frozenset(('"CHAIN"', '"AGENT"', '"UNKNOWN"', '"WORKFLOW"', "CHAIN", "AGENT", "UNKNOWN", "WORKFLOW"))
_GENERATIONS = frozenset(('"LLM"', '"CHAT_MODEL"', "LLM", "CHAT_MODEL"))


def decoded(value: Any) -> Any:
    """An MLflow attribute's value: its JSON text decoded (a value that is not JSON as it is)."""
    if isinstance(value, str):
        parsed = parse_json_text(value)
        return value if parsed is None and value != "null" else parsed
    return value


def _text(value: Any) -> str | None:
    return scalar_text(decoded(value))


class MLflow(Dialect):
    name = "mlflow"
    scopes: ClassVar[tuple[str, ...]] = (SCOPE,)
    markers: ClassVar[tuple[str, ...]] = (SPAN_TYPE,)
    caller_places: ClassVar[tuple[str, ...]] = (sc.USER_ID, sc.CALLER_GROUPS, "metadata.user_id", "metadata.groups",
                                                f"{TRACE_TAG}user_id", f"{TRACE_TAG}groups")

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        kind = _KINDS.get(span.attributes.get(SPAN_TYPE))  # one lookup: the value is JSON text of a known few
        if kind is None:
            return None, []
        return kind, json_documents(span.attributes.get(OUTPUTS), OUTPUTS, problems)

    def own_list_name(self, span: Any, kind: str) -> str:
        a = span.attributes
        if kind == "reranker":
            model = _text(a.get("model_name"))
            return model or short_name(span.name) or "reranker"
        langchain = metadata_of(span).get(sc.LANGCHAIN_RETRIEVER_NAME)
        return langchain if isinstance(langchain, str) and langchain else short_name(span.name)

    def list_question(self, span: Any) -> str | None:
        return _question(span.attributes.get(INPUTS))

    def is_chain(self, span: Any) -> bool:
        return span.attributes.get(SPAN_TYPE) in _CHAINS

    def root_question(self, span: Any) -> str | None:
        return _question(span.attributes.get(INPUTS))

    def root_answer(self, span: Any) -> str | None:
        value = decoded(span.attributes.get(OUTPUTS))
        if isinstance(value, str):
            return value or None
        return first_text(value, ANSWER_KEYS) if isinstance(value, dict) else None

    def is_generation(self, span: Any) -> bool:
        return span.attributes.get(SPAN_TYPE) in _GENERATIONS

    def generation_answer(self, span: Any) -> str | None:
        """A model's output: text, a completion (``{"text"}``, LlamaIndex's), a chat message
        (``{"content"}``, OpenAI's ``choices[0].message`` returned by a traced function), a chat completion
        (``{"choices": [{"message": {"content"}}]}``, as MLflow records LangChain's chat models and
        OpenAI's chat completions) or an OpenAI completion (``{"choices": [{"text"}]}``, the legacy
        completions API under MLflow's OpenAI autolog)."""
        value = decoded(span.attributes.get(OUTPUTS))
        if isinstance(value, str):
            return value or None
        if not isinstance(value, dict):
            return None
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            content = message.get("content") if isinstance(message, dict) else choices[0].get("text")
            return content if isinstance(content, str) and content else None
        return first_text(value, ("text", "content"))

    def tokens(self, span: Any) -> tuple[Any, Any]:
        usage = json_object(span.attributes.get(TOKEN_USAGE))
        return usage.get("input_tokens"), usage.get("output_tokens")

    def facts(self, span: Any) -> TraceFacts:
        """The application's attributes (JSON text through MLflow's span API), then LangChain's run
        metadata (the caller keys, then ragmon's ``metadata`` keys), then the root's trace tags, then
        the association properties OpenLLMetry's SDK puts on every span (read as on any span)."""
        a = span.attributes
        groups = decoded(a.get(sc.CALLER_GROUPS)) if sc.CALLER_GROUPS in a else None
        facts = TraceFacts(caller_id=_text(a.get(sc.USER_ID)) or _text(a.get(sc.ENDUSER_ID)),
                           groups=group_list(groups) if groups is not None else None,
                           conversation=_text(a.get(sc.SESSION_ID)))
        meta = metadata_of(span)
        if meta:
            fill(facts, self.caller_keys.facts(meta.get))
            metadata_facts(meta, facts)
        tags = prefixed_bag(a, TRACE_TAG, caller_key_names(self.caller_keys), json_values=False)
        if tags:
            fill(facts, self.caller_keys.facts(tags.get))
        return fill(facts, self.caller_keys.associated(a))

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f'a span of {SPAN_TYPE} "RETRIEVER" or "RERANKER" listing documents in {OUTPUTS}',)


def _question(value: Any) -> str | None:
    value = decoded(value)
    if isinstance(value, str):
        return value or None
    return first_text(value, MLFLOW_QUERY_KEYS) if isinstance(value, dict) else None
