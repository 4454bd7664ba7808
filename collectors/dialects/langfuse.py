"""The Langfuse SDK (``langfuse`` 3.x and later, built on OpenTelemetry): its ``@observe``, its
observations and its LangChain ``CallbackHandler`` make spans of the instrumentation scope
``langfuse-sdk``, each with ``langfuse.observation.type`` (``span``, ``chain``, ``retriever``,
``generation``, ``tool``, ...).

- A ``retriever`` observation lists its documents in ``langfuse.observation.output``, JSON text of
  what the function returned (LangChain's ``Document``\\ s, or the application's own objects).
- ``langfuse.observation.input`` and ``.output`` are the text itself for a string, else JSON text;
  ``@observe`` records its function's arguments as ``{"args": [...], "kwargs": {...}}``.
- The caller: ``user.id`` and ``session.id`` (plain), set on every span under
  ``propagate_attributes`` and, for LangChain, from the run metadata's ``langfuse_user_id`` and
  ``langfuse_session_id`` only when a chain is the root of the run; the application's metadata keys
  as ``langfuse.trace.metadata.<key>`` (propagated) and ``langfuse.observation.metadata.<key>`` (the
  observation's own, LangChain's run metadata), each value JSON text.

Langfuse's span processor also exports other instrumentations' spans (OpenInference's among them,
Langfuse's documented way for LlamaIndex) with the same propagated attributes: such a span is read
by its own dialect, and a Langfuse root gives the trace its caller.
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
    metadata_facts,
    short_name,
)
from ragmon.collectors.dialects.document_objects import json_documents
from ragmon.collectors.semconv import json_object, parse_json_text, scalar_text
from ragmon.collectors.span_reading import RawDocument

SCOPE = "langfuse-sdk"
TYPE, INPUT, OUTPUT = "langfuse.observation.type", "langfuse.observation.input", "langfuse.observation.output"
USAGE = "langfuse.observation.usage_details"
#: Langfuse's observation types (``langfuse._client.constants.ObservationTypeLiteral``).
OBSERVATION_TYPES = ("span", "generation", "event", "agent", "tool", "chain", "retriever", "evaluator", "embedding",
                     "guardrail")
TRACE_METADATA, OBSERVATION_METADATA = "langfuse.trace.metadata.", "langfuse.observation.metadata."
#: ragmon's keys of a ``metadata`` object (docs/events.md), read under Langfuse's metadata prefixes too.
METADATA_KEYS = ("tenant", "groups", "index", "index_name", "index_version", "abstained", "citations")
_LIST_NAME_KEYS = ("retriever", sc.LANGCHAIN_RETRIEVER_NAME)
_CHAINS = frozenset(("span", "chain", "agent"))


def _value(text: Any) -> Any:
    """An input or output: JSON text decoded when it is an object or array, else the text itself."""
    if isinstance(text, str) and text[:1] in ("{", "["):
        parsed = parse_json_text(text)
        return text if parsed is None else parsed
    return text


class Langfuse(Dialect):
    name = "langfuse"
    scopes: ClassVar[tuple[str, ...]] = (SCOPE,)
    markers: ClassVar[tuple[str, ...]] = (TYPE,)
    caller_places: ClassVar[tuple[str, ...]] = (
        sc.USER_ID, sc.CALLER_GROUPS, f"{TRACE_METADATA}user_id", f"{TRACE_METADATA}groups",
        f"{OBSERVATION_METADATA}groups")

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        if span.attributes.get(TYPE) != "retriever":
            return None, []
        return "retriever", json_documents(_value(span.attributes.get(OUTPUT)), OUTPUT, problems)

    def own_list_name(self, span: Any, kind: str) -> str:
        meta = prefixed_bag(span.attributes, OBSERVATION_METADATA, _LIST_NAME_KEYS, json_values=True)
        for key in _LIST_NAME_KEYS:
            if isinstance(meta.get(key), str) and meta[key]:
                return meta[key]
        return short_name(span.name)

    def list_question(self, span: Any) -> str | None:
        return _question(span.attributes.get(INPUT))

    def is_chain(self, span: Any) -> bool:
        return span.attributes.get(TYPE) in _CHAINS

    def root_question(self, span: Any) -> str | None:
        return _question(span.attributes.get(INPUT))

    def root_answer(self, span: Any) -> str | None:
        return _text(span.attributes.get(OUTPUT), ANSWER_KEYS)

    def is_generation(self, span: Any) -> bool:
        return span.attributes.get(TYPE) == "generation"

    def generation_answer(self, span: Any) -> str | None:
        """A model's output: text, a message (``{"role", "content"}``, as the LangChain handler records it), or a
        completion (``{"text"}``: LlamaIndex's ``CompletionResponse`` returned by an ``@observe`` generation)."""
        return _text(span.attributes.get(OUTPUT), ("content", "text", *ANSWER_KEYS))

    def tokens(self, span: Any) -> tuple[Any, Any]:
        usage = json_object(span.attributes.get(USAGE))
        return usage.get("input"), usage.get("output")

    def facts(self, span: Any) -> TraceFacts:
        """``user.id`` and ``session.id``; then the trace's (propagated) metadata, then the
        observation's: the caller keys, and ragmon's ``metadata`` keys."""
        facts = super().facts(span)
        a, keys = span.attributes, self.caller_keys
        for prefix in (TRACE_METADATA, OBSERVATION_METADATA):
            bag = prefixed_bag(a, prefix, caller_key_names(keys), json_values=True)
            if bag:
                fill(facts, keys.facts(bag.get))
        for prefix in (OBSERVATION_METADATA, TRACE_METADATA):  # the trace's wins
            ours = prefixed_bag(a, prefix, METADATA_KEYS, json_values=True)
            if ours:
                ours.pop("groups", None)  # the caller keys read them, in any of their forms
                metadata_facts(ours, facts)
        return facts

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return (f"a span of {TYPE} retriever listing documents in {OUTPUT}",)


def _question(value: Any) -> str | None:
    """The question in an input: the text, a value under a question key, or ``@observe``'s first
    string argument."""
    value = _value(value)
    if isinstance(value, str):
        return value or None
    if not isinstance(value, dict):
        return None
    found = first_text(value, QUERY_KEYS)
    if found is None and isinstance(value.get("args"), list):
        found = next((arg for arg in value["args"] if isinstance(arg, str) and arg), None)
    return found


def _text(value: Any, keys: tuple[str, ...]) -> str | None:
    value = _value(value)
    if isinstance(value, str):
        return value or None
    return first_text(value, keys) if isinstance(value, dict) else scalar_text(value)

