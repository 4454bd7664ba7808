"""What every dialect answers about a span, and what an application sets by hand beside any of them.

A *dialect* is one instrumentation family's way of saying what a RAG application did:
OpenInference's ``openinference.span.kind`` and flattened documents, the OTel GenAI conventions,
OpenLLMetry's ``traceloop.*`` entities, a vector store's result events. Each is one subclass of
:class:`Dialect` in a module of its own, registered in ``ragmon.collectors.dialects``. The trace-level
rules (nesting, the context, precedence of the root span) are the mapper's and the same for all
(``ragmon.collectors.span_levels``, ``ragmon.collectors.span_mapping``): a dialect only reads spans.

Whatever the dialect, a span may carry what the application set by hand for ragmon or by general
OTel conventions (:data:`APPLICATION_KEYS`); :class:`Dialect`'s defaults read those, and a dialect
adds its own places to them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from ragmon.collectors import semconv as sc
from ragmon.collectors.semconv import json_object, parse_json_text, scalar_text, string_list
from ragmon.collectors.span_reading import RawDocument
from ragmon.monitor.core.model import MAX_TURN

#: The attributes an application sets by hand, read on a span of any dialect (docs/events.md):
#: OpenInference's ``using_attributes`` keys and OTel's general ones, which applications set with
#: any tracer, and ragmon's own (OpenLLMetry's association properties too: :data:`ASSOCIATION`).
APPLICATION_KEYS = (sc.USER_ID, sc.ENDUSER_ID, sc.SESSION_ID, sc.METADATA, sc.GENAI_CONVERSATION,
                    sc.GENAI_DATA_SOURCE, sc.CALLER_GROUPS, sc.CONTEXT_DOCUMENT_IDS)
#: Keys under which frameworks put the question in a JSON input (Haystack, DSPy, LlamaIndex internals,
#: LangChain's ``input``; LlamaIndex chat engines' ``chat(message, chat_history)``).
QUERY_KEYS = ("query", "question", "query_str", "input", "message")
#: Where a trace's turn in its conversation is said: the ``metadata`` key, and OpenLLMetry's association property.
TURN_KEY = "turn"
#: Keys under which frameworks put the answer in a JSON output (DSPy predictions).
ANSWER_KEYS = ("answer", "response", "output")
_METHOD_SUFFIX = re.compile(r"\.[A-Za-z_]\w*$")

Problems = list[tuple[str, str]]  # (attribute, what is wrong), never quoting the value


@dataclass(slots=True)
class SpanReading:
    """What ragmon reads from one span as it arrives: ``kind`` is ``retriever`` or ``reranker`` for
    a span that reports a list of documents (else None); ``dialect`` is the dialect the span speaks
    (the one asked about its question, answer and caller); ``problems`` names each attribute it
    could not use as ``(attribute, what is wrong)``, never quoting the value."""

    kind: str | None
    documents: list[RawDocument]
    problems: Problems
    dialect: Dialect
    silent: bool = False  # a list without documents that does not say whether it found nothing


@dataclass(slots=True)
class TraceFacts:
    """What one span says about its whole trace: who asked, of which tenant and index, and about
    the answer. Each field is None where the span says nothing; the mapper takes each field from
    the root span, else from the earliest span that has it."""

    caller_id: str | None = None
    groups: list[str] | None = None
    tenant: str | None = None
    conversation: str | None = None
    index: str | None = None
    index_version: str | None = None
    abstained: bool | None = None
    citations: list[str] | None = None
    turn: int | None = None


def short_name(name: str) -> str:
    """A span name without its method: ``BM25Retriever._retrieve`` -> ``BM25Retriever``."""
    return _METHOD_SUFFIX.sub("", name) or name


def value_text(span: Any, value_key: str, mime_key: str, keys: tuple[str, ...]) -> str | None:
    """A span's input or output as text: the value itself, or for JSON (by its MIME type
    attribute) the first string under one of ``keys`` (at the top or one level down)."""
    value = span.attributes.get(value_key)
    if not isinstance(value, str) or not value:
        return None
    if span.attributes.get(mime_key) != sc.JSON_MIME_TYPE:
        return value
    return first_text(json_object(value), keys)


def first_text(data: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first non-empty string under one of ``keys`` in ``data``, at its top or one level down."""
    for scope in [data, *(v for v in data.values() if isinstance(v, dict))]:
        found = next((scope[k] for k in keys if isinstance(scope.get(k), str) and scope[k]), None)
        if found is not None:
            return found
    return None


#: Where OpenLLMetry's SDK puts its association properties (and LangChain's instrumentation the run
#: metadata) on every span it sees, whatever the span's instrumentation.
ASSOCIATION = "traceloop.association.properties."
_ASSOCIATED_TURN = ASSOCIATION + TURN_KEY


@dataclass(frozen=True)
class CallerKeys:
    """The keys under which a key-value bag of a dialect (OpenLLMetry's association properties,
    LangChain run metadata, Langfuse metadata, ...) names the caller, its tenant and groups, the
    conversation and the index: the first key present wins. Configurable (``otlp.caller_keys``)."""

    user: tuple[str, ...] = ("user_id", "user.id", "userId")
    session: tuple[str, ...] = ("session_id", "session.id", "sessionId", "thread_id")
    tenant: tuple[str, ...] = ("tenant", "tenant_id", "customer_id")
    groups: tuple[str, ...] = ("groups",)
    index: tuple[str, ...] = ("index",)

    def facts(self, get: Callable[[str], Any]) -> TraceFacts:
        """What a bag says (``get``: its lookup, e.g. ``bag.get``) of the caller, its tenant and
        groups, the conversation and the index; groups may be a list, JSON text of one, or a
        comma-separated string."""
        return self._facts(get, (self.user, self.session, self.tenant, self.groups, self.index))

    def associated(self, attributes: dict[str, Any]) -> TraceFacts:
        """:meth:`facts` of a span's association properties: a lookup per key, no scan."""
        # most spans carry none; a keys view against a set iterates the smaller of the two (a
        # retriever span may carry a hundred document attributes), a set against a dict the dict
        if attributes.keys().isdisjoint(self._any_associated_key):
            return TraceFacts()
        return self._facts(attributes.get, self._associated_keys)

    @cached_property
    def _associated_keys(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(ASSOCIATION + key for key in keys)
                     for keys in (self.user, self.session, self.tenant, self.groups, self.index))

    @cached_property
    def _any_associated_key(self) -> frozenset[str]:
        return frozenset(key for keys in self._associated_keys for key in keys)

    @staticmethod
    def _facts(get: Callable[[str], Any], keys: tuple[tuple[str, ...], ...]) -> TraceFacts:
        user, session, tenant, groups, index = keys
        return TraceFacts(caller_id=_first_text(get, user), conversation=_first_text(get, session),
                          tenant=_first_text(get, tenant), index=_first_text(get, index),
                          groups=next((g for g in map(group_list, map(get, groups)) if g is not None), None)
                          if groups else None)


def _first_text(get: Callable[[str], Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:  # a loop, not a generator: this runs for every span of a trace
        value = get(key)
        if value is not None:
            text = scalar_text(value)
            if text:
                return text
    return None


def turn_number(value: Any) -> int | None:
    """A turn as a whole number from 1 to ``MAX_TURN``, given as a number or its digits (association
    properties are strings); None for anything else."""
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int or not 1 <= value <= MAX_TURN:
        return None
    return value


def group_list(value: Any) -> list[str] | None:
    """Groups as a list of strings, JSON text of one, or a comma-separated string; None for
    anything else."""
    if value is None:
        return None
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return [g.strip() for g in value.split(",") if g.strip()]
    return string_list(value)


class Dialect:
    """One instrumentation family. A span is recognised as this dialect's by its instrumentation
    scope (:attr:`scopes`: exact names, or prefixes ending in ``.``) or, for spans an application
    makes with its own tracer, by one of the attribute keys in :attr:`markers` being present: a
    dict lookup each, never a scan of the span's attributes.

    The methods are asked about one span of this dialect; their defaults read only the
    attributes an application sets by hand (:data:`APPLICATION_KEYS`), and say nothing else.
    None of them may raise on odd attribute values: they return None (or report a problem).
    """

    name: ClassVar[str] = "application"  # a closed set of names: it may label a metric
    scopes: ClassVar[tuple[str, ...]] = ()
    markers: ClassVar[tuple[str, ...]] = ()
    #: Where the caller is looked for, by attribute name (to explain a trace read without one); a
    #: dialect adds its own places to these.
    caller_places: ClassVar[tuple[str, ...]] = (f"{ASSOCIATION}user_id", f"{ASSOCIATION}groups", sc.USER_ID,
                                                sc.ENDUSER_ID, f"{sc.METADATA}.groups", sc.CALLER_GROUPS)

    def __init__(self, caller_keys: CallerKeys | None = None) -> None:
        self.caller_keys = caller_keys or CallerKeys()
        # every attribute key :meth:`facts` reads beside ``metadata``: a span carrying none of them
        # (nearly every span but the root) says nothing there, and is told so by one set operation
        self._fact_keys = self.caller_keys._any_associated_key | _HAND_SET_FACT_KEYS

    # --- as the span arrives ----------------------------------------------------------------

    def read(self, span: Any, problems: Problems) -> tuple[str | None, list[RawDocument] | None]:
        """The list the span reports, as ``(kind, documents)`` with kind ``retriever`` or
        ``reranker``; ``(None, [])`` for a span that reports none. ``documents`` is None for a
        list whose span does not say what it held when it holds nothing (OpenInference writes no
        attribute for an empty list), ``[]`` for one that says it found nothing: an outermost
        level that says so is an empty context (``ragmon.collectors.span_levels``). An attribute
        that cannot be used is appended to ``problems`` (its name in ``semconv.CHECKED_ATTRIBUTES``)."""
        return None, []

    # --- when its trace is mapped -----------------------------------------------------------

    def list_name(self, span: Any, kind: str) -> str:
        """The retriever (or reranker) label of the list the span reports: the application's
        ``metadata.retriever``, else what the dialect calls it (:meth:`own_list_name`)."""
        named = metadata_of(span).get("retriever")
        return named if isinstance(named, str) and named else self.own_list_name(span, kind)

    def own_list_name(self, span: Any, kind: str) -> str:
        """The dialect's label for a list: here the span name without its method."""
        return short_name(span.name)

    def list_question(self, span: Any) -> str | None:
        """The question a span that reports a list was asked."""
        return None

    def is_chain(self, span: Any) -> bool:
        """Whether the span, as a trace's root, is the application's call (whose input is the
        question and output the answer)."""
        return False

    def root_question(self, span: Any) -> str | None:
        """The question, from a root span for which :meth:`is_chain` holds."""
        return None

    def root_answer(self, span: Any) -> str | None:
        """The answer, from a root span for which :meth:`is_chain` holds."""
        return None

    def is_generation(self, span: Any) -> bool:
        """Whether the span is a model call (its output may be the answer, its tokens the usage)."""
        return False

    def generation_answer(self, span: Any) -> str | None:
        """The text a generation span produced."""
        return None

    def tokens(self, span: Any) -> tuple[Any, Any]:
        """The span's (input, output) token counts as reported (validated by the caller)."""
        return None, None

    def facts(self, span: Any) -> TraceFacts:
        """Caller, tenant, index and answer facts the span carries: here those an application
        sets by hand; a dialect adds its own places (and gives them precedence)."""
        a = span.attributes
        if a.keys().isdisjoint(self._fact_keys):  # iterates the smaller: no scan of a large span's attributes
            facts = TraceFacts()
        else:
            facts = self.caller_keys.associated(a)  # set by OpenLLMetry's SDK on spans of any instrumentation
            facts.caller_id = facts.caller_id or _text(a, sc.USER_ID) or _text(a, sc.ENDUSER_ID)
            if facts.groups is None and sc.CALLER_GROUPS in a:
                facts.groups = string_list(a[sc.CALLER_GROUPS])
            facts.conversation = facts.conversation or _text(a, sc.SESSION_ID) or _text(a, sc.GENAI_CONVERSATION)
            facts.index = facts.index or _text(a, sc.GENAI_DATA_SOURCE)
            facts.turn = turn_number(a.get(_ASSOCIATED_TURN))
        metadata = a.get(sc.METADATA)
        return metadata_facts(json_object(metadata), facts) if metadata else facts

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        """For a trace whose spans of this dialect (``spans``) gave no retrieval: what this dialect
        needs for one and did not find, in fixed words (attribute names and values of the
        dialect's vocabulary, never the trace's own values)."""
        return ("a span that reports retrieved documents",)


def check_application_attributes(attributes: dict[str, Any], problems: Problems) -> None:
    """The application's hand-set attributes ragmon reads, checked once as the span arrives; a
    JSON ``metadata`` object, and JSON text of the context's ids or the caller's groups, are parsed
    in place, so that nothing parses them twice."""
    value = attributes.get(sc.METADATA)
    if isinstance(value, str):
        parsed = parse_json_text(value)
        if isinstance(parsed, dict):
            attributes[sc.METADATA] = parsed
            if TURN_KEY in parsed and turn_number(parsed[TURN_KEY]) is None:
                problems.append((sc.METADATA, f"`{sc.METADATA}.{TURN_KEY}` is not a whole number from 1 to {MAX_TURN}"))
        else:
            problems.append((sc.METADATA, f"`{sc.METADATA}` is not a JSON object"))
    for key in (sc.CONTEXT_DOCUMENT_IDS, sc.CALLER_GROUPS):
        if key in attributes:
            listed = string_list(attributes[key])
            if listed is None:
                problems.append((key, f"`{key}` is not a list of strings"))
            elif isinstance(attributes[key], str):
                attributes[key] = listed  # JSON text of a list: parsed here once, not again by the mapper


#: The hand-set attributes :meth:`Dialect.facts` reads (besides ``metadata`` and the association properties).
_HAND_SET_FACT_KEYS = frozenset((sc.USER_ID, sc.ENDUSER_ID, sc.CALLER_GROUPS, sc.SESSION_ID, sc.GENAI_CONVERSATION,
                                 sc.GENAI_DATA_SOURCE, _ASSOCIATED_TURN))


def _text(attributes: dict[str, Any], key: str) -> str | None:
    value = attributes.get(key)
    return None if value is None else scalar_text(value)


_METADATA_FACT_KEYS = frozenset(("tenant", "groups", "index", "index_name", "index_version", "abstained", "citations",
                                 TURN_KEY))


def metadata_facts(metadata: dict[str, Any], facts: TraceFacts) -> TraceFacts:
    """Fills ``facts`` from a JSON metadata object of ragmon's keys (``tenant``, ``groups``,
    ``index``, ``index_version``, ``abstained``, ``citations``, ``turn``), which win over what ``facts`` held,
    and ``index_name``, which does not; returns it."""
    if _METADATA_FACT_KEYS.isdisjoint(metadata):  # most spans' metadata names none of them (a retriever's name)
        return facts
    tenant = scalar_text(metadata.get("tenant"))
    groups = string_list(metadata.get("groups")) if "groups" in metadata else None
    index = metadata.get("index") if isinstance(metadata.get("index"), str) and metadata["index"] else None
    facts.tenant = tenant or facts.tenant
    facts.groups = groups if groups is not None else facts.groups
    facts.index = index or facts.index or scalar_text(metadata.get("index_name"))
    if metadata.get("index_version"):
        facts.index_version = str(metadata["index_version"])
    if isinstance(metadata.get("abstained"), bool):
        facts.abstained = metadata["abstained"]
    if "citations" in metadata:
        facts.citations = string_list(metadata.get("citations")) or []
    facts.turn = turn_number(metadata.get(TURN_KEY)) or facts.turn
    return facts


def metadata_of(span: Any) -> dict[str, Any]:
    """The span's ``metadata`` attribute as an object ({} when it is none)."""
    return json_object(span.attributes.get(sc.METADATA))


@dataclass(frozen=True)
class Closest:
    """The dialect most of an unread trace's spans speak, how many spans it claims, and what it
    lacked for a retrieval (``Dialect.lacks``). ``dialect`` is None when no span is any dialect's."""

    dialect: str | None
    spans: int
    lacked: tuple[str, ...] = field(default=())
