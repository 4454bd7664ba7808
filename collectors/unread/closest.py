"""Which dialect a trace ragmon could not read (or read in part) is closest to, and what it lacked,
in words from a closed vocabulary: attribute names and the values of the dialects' own enums
(OpenInference span kinds, GenAI operation names, MLflow span types, Langfuse observation types),
never a value the application chose.

The dialect registry (``ragmon.collectors.dialects``) says which dialect claims most of a trace's
spans and what that dialect needs for a retrieval (``Dialects.closest``); for a trace read without
a caller, where the dialects of its spans look for one (``Dialect.caller_places``). Added here: the
span kinds or operation names the closest dialect's spans did carry, and why a read trace has no
context. :class:`DialectGuess` is the one question the watch asks, so it can be answered otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects import Dialects, langfuse, mlflow
from ragmon.collectors.otlp_wire import Span

RETRIEVAL, CALLER, CONTEXT = "retrieval", "caller", "context"  # what a trace can lack (``missing``)
MISSING = (RETRIEVAL, CALLER, CONTEXT)

#: Each dialect's enum attribute, its closed set of values (these may be named), and whether a
#: value is compared in upper case (as the OpenInference reader compares span kinds).
_VOCABULARY = {
    "openinference": (sc.SPAN_KIND, ("CHAIN", "LLM", "RETRIEVER", "RERANKER", "EMBEDDING", "TOOL", "AGENT",
                                     "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN"), True),
    "genai": (sc.GENAI_OPERATION, ("chat", "text_completion", "generate_content", "embeddings", "retrieval",
                                   "execute_tool", "create_agent", "invoke_agent", "invoke_workflow"), False),
    "mlflow": (mlflow.SPAN_TYPE, mlflow.SPAN_TYPES, True),
    "langfuse": (langfuse.TYPE, langfuse.OBSERVATION_TYPES, False),
}
ANOTHER = "another value"


@dataclass(frozen=True, slots=True)
class Closest:
    """``dialect``: the closest dialect's name, None when no span is any dialect's; ``lacked``:
    what it lacked, in words."""

    dialect: str | None
    lacked: str


class DialectGuess(Protocol):
    def closest(self, spans: Sequence[Span], missing: str, unmapped: int = 0) -> Closest:
        """The closest dialect of ``spans`` and what they lacked for ``missing`` (one of
        :data:`MISSING`); ``unmapped``: passages the mapping left out for want of an id."""


class RegistryDialects:
    """:class:`DialectGuess` answered by the dialect registry the receiver reads spans with."""

    def __init__(self, dialects: Dialects | None = None) -> None:
        self._dialects = dialects or Dialects()

    def closest(self, spans: Sequence[Span], missing: str, unmapped: int = 0) -> Closest:
        found = self._dialects.closest(list(spans))
        if missing == CALLER:
            spoken = {id(d): d for d in (self._dialects.reading(span).dialect for span in spans)}
            places = list(dict.fromkeys(place for d in spoken.values() for place in d.caller_places))
            return Closest(found.dialect, f"a caller: no span carries {', '.join(places[:-1])} or {places[-1]}")
        if missing == CONTEXT:
            return Closest(found.dialect, _no_context(spans, unmapped))
        lacked = "; ".join(found.lacked) or "a span that reports retrieved documents"
        return Closest(found.dialect, lacked + _seen(found.dialect, spans))


def _seen(dialect: str | None, spans: Sequence[Span]) -> str:
    """What the dialect's enum attribute held on the spans, most frequent first, the values
    outside its vocabulary together as "another value"; "" for a dialect without one."""
    vocabulary = _VOCABULARY.get(dialect or "")
    if vocabulary is None:
        return ""
    key, known, upper = vocabulary
    named: Counter[str] = Counter()
    for span in spans:
        if key in span.attributes:
            value = str(span.attributes[key])
            value = value.upper() if upper else value
            named[value if value in known else ANOTHER] += 1
    words = ", ".join(sorted(named, key=lambda name: (-named[name], name)))
    return f" (the {key} of its spans: {words})" if words else ""


def _no_context(spans: Sequence[Span], unmapped: int) -> str:
    if unmapped:
        return (f"a context: {unmapped} documents had nothing to name them (no id, no metadata key of "
                "otlp.passage_id_keys, no content) and were left out")
    if any(sc.CONTEXT_DOCUMENT_IDS in span.attributes for span in spans):
        return f"a context: {sc.CONTEXT_DOCUMENT_IDS} names no passage"
    return ("a context: its retrieval spans reported no document (the search found nothing, or the documents are "
            "in attributes ragmon does not read)")
