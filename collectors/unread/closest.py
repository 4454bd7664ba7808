"""Which dialect a trace ragmon could not read (or read in part) is closest to, and what it lacked,
in words from a closed vocabulary: attribute names and the values of the dialects' own enums
(OpenInference span kinds, GenAI operation names), never a value the application chose.

The dialects are those ``collectors/semconv.py`` knows: OpenInference (``openinference.span.kind``),
OTel GenAI (``gen_ai.operation.name``) and vector stores reporting results as span events
(``db.system`` with ``db.query.result`` events). A span is marked by a dialect through one
attribute looked up by name, never by a scan of its attributes; the closest dialect is the one
marking most spans (ties in the order above). :class:`SemconvDialects` is one
:class:`DialectGuess`; a registry of dialect readers can stand in its place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragmon.collectors import semconv as sc
from ragmon.collectors.otlp_wire import Span

OPENINFERENCE, GENAI, VECTOR_STORE = "openinference", "genai", "vector-store"
RETRIEVAL, CALLER, CONTEXT = "retrieval", "caller", "context"  # what a trace can lack (``missing``)
MISSING = (RETRIEVAL, CALLER, CONTEXT)

#: OpenInference span kinds and GenAI operation names: closed sets, so they may be named.
OPENINFERENCE_KINDS = ("CHAIN", "LLM", "RETRIEVER", "RERANKER", "EMBEDDING", "TOOL", "AGENT", "GUARDRAIL",
                       "EVALUATOR", "PROMPT", "UNKNOWN")
GENAI_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings", "retrieval", "execute_tool",
                    "create_agent", "invoke_agent", "invoke_workflow")
ANOTHER = "another value"
CALLER_KEYS = (sc.USER_ID, sc.ENDUSER_ID, sc.CALLER_GROUPS, f"{sc.METADATA}.groups")


@dataclass(frozen=True, slots=True)
class Closest:
    """``dialect``: the closest dialect's name, None when no span carries any dialect's mark;
    ``lacked``: what it lacked, in words."""

    dialect: str | None
    lacked: str


class DialectGuess(Protocol):
    def closest(self, spans: Sequence[Span], missing: str, unmapped: int = 0) -> Closest:
        """The closest dialect of ``spans`` and what they lacked for ``missing`` (one of
        :data:`MISSING`); ``unmapped``: passages the mapping left out for want of an id."""


def _named(values: Counter[str], known: tuple[str, ...]) -> str:
    """The values seen, most frequent first; those outside ``known`` together as "another value"."""
    named: Counter[str] = Counter()
    for value, n in values.items():
        named[value if value in known else ANOTHER] += n
    return ", ".join(name for name, _ in sorted(named.items(), key=lambda item: (-item[1], item[0])))


class SemconvDialects:
    """:class:`DialectGuess` from the conventions of ``collectors/semconv.py``."""

    def closest(self, spans: Sequence[Span], missing: str, unmapped: int = 0) -> Closest:
        kinds: Counter[str] = Counter()
        operations: Counter[str] = Counter()
        stores = with_results = 0
        for span in spans:
            a = span.attributes
            kind = a.get(sc.SPAN_KIND)
            if kind is not None:
                kinds[str(kind).upper()] += 1
            operation = a.get(sc.GENAI_OPERATION)
            if operation is not None:
                operations[str(operation)] += 1
            if any(a.get(key) for key in sc.DB_SYSTEMS):
                stores += 1
                with_results += any(e.name == sc.DB_RESULT_EVENT for e in span.events)
        marked = {OPENINFERENCE: kinds.total(), GENAI: operations.total(), VECTOR_STORE: stores}
        dialect = max(marked, key=lambda name: marked[name]) if any(marked.values()) else None
        if missing == CALLER:
            return Closest(dialect, f"a caller: no span carries {', '.join(CALLER_KEYS[:-1])} or {CALLER_KEYS[-1]}")
        if missing == CONTEXT:
            return Closest(dialect, _no_context(spans, unmapped))
        if dialect == OPENINFERENCE:
            return Closest(dialect, f"a span of kind {sc.RETRIEVER} or {sc.RERANKER} ({sc.SPAN_KIND} of its spans: "
                           f"{_named(kinds, OPENINFERENCE_KINDS)})")
        if dialect == GENAI:
            return Closest(dialect, f"a span with {sc.GENAI_OPERATION} = {sc.GENAI_RETRIEVAL} (its spans name: "
                           f"{_named(operations, GENAI_OPERATIONS)})")
        if dialect == VECTOR_STORE:
            held = f"{with_results} of its {stores} store spans have" if with_results else "none of its store spans has"
            return Closest(dialect, f"a vector search with results: {sc.DB_RESULT_EVENT} events carrying "
                           f"{sc.DB_RESULT}* attributes ({held} {sc.DB_RESULT_EVENT} events)")
        return Closest(None, f"a dialect ragmon reads: no span carries {sc.SPAN_KIND}, {sc.GENAI_OPERATION} or "
                       f"{' / '.join(sc.DB_SYSTEMS)}")


def _no_context(spans: Sequence[Span], unmapped: int) -> str:
    if unmapped:
        return (f"a context: {unmapped} documents had nothing to name them (no id, no metadata key of "
                "otlp.passage_id_keys, no content) and were left out")
    if any(sc.CONTEXT_DOCUMENT_IDS in span.attributes for span in spans):
        return f"a context: {sc.CONTEXT_DOCUMENT_IDS} names no passage"
    return ("a context: its retrieval spans reported no document (the search found nothing, or the documents are "
            "in attributes ragmon does not read)")
