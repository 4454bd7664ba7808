"""The instrumentation dialects ragmon reads, and how a span is recognised as one's.

Each dialect is a :class:`~ragmon.collectors.dialects.base.Dialect` in a module of its own; adding
one is one module and one line in :data:`DIALECTS`. A span is read by the dialect its
instrumentation scope names (``Span.scope``), else by those whose marker attribute it carries, in
the order of :data:`DIALECTS` (the first to report a list of documents reads it); a span no
dialect claims is the application's own (the base class: ragmon's and the general attributes
only). A trace may mix dialects: each span is read by its own.

Recognition costs a dict lookup of the scope name (cached) and one per marker key, never a scan of
a span's attributes: it runs for every span the OTLP receiver takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmon.collectors.dialects.base import CallerKeys, Closest, Dialect, SpanReading, check_application_attributes
from ragmon.collectors.dialects.genai import GenAI
from ragmon.collectors.dialects.langfuse import Langfuse
from ragmon.collectors.dialects.logfire import SCRUBBED, Logfire, drop_scrubbed
from ragmon.collectors.dialects.mlflow import MLflow
from ragmon.collectors.dialects.openinference import OpenInference
from ragmon.collectors.dialects.openllmetry import OpenLLMetry
from ragmon.collectors.dialects.vector_stores import VectorStores

__all__ = ["DIALECTS", "CallerKeys", "Closest", "Dialect", "Dialects", "SpanReading"]

#: The dialects, in the order their markers are asked (a span carrying the markers of two is
#: read by the first that finds a list in it).
DIALECTS: tuple[type[Dialect], ...] = (
    OpenInference,
    OpenLLMetry,  # before GenAI: its spans carry gen_ai.operation.name too
    MLflow,
    Langfuse,
    Logfire,
    GenAI,
    VectorStores,
)
APPLICATION = Dialect()  # a span no dialect claims: what the application set by hand
MAX_CACHED_SCOPES = 1024  # scope names are the sender's: the cache of their dialects is bounded


class Dialects:
    """Reads spans by their dialects; one instance serves the receiver and the mapper."""

    def __init__(self, caller_keys: CallerKeys | None = None, dialects: Sequence[type[Dialect]] = DIALECTS) -> None:
        self.dialects = tuple(dialect(caller_keys) for dialect in dialects)
        self._markers = tuple((key, dialect) for dialect in self.dialects for key in dialect.markers)
        self._exact = {scope: d for d in self.dialects for scope in d.scopes if not scope.endswith(".")}
        self._prefixes = tuple((scope, d) for d in self.dialects for scope in d.scopes if scope.endswith("."))
        self._by_scope: dict[str, Dialect | None] = {}

    def by_scope(self, scope: str) -> Dialect | None:
        """The dialect an instrumentation scope name belongs to, if any."""
        try:
            return self._by_scope[scope]
        except KeyError:
            pass
        found = self._exact.get(scope) or next((d for prefix, d in self._prefixes if scope.startswith(prefix)), None)
        if len(self._by_scope) < MAX_CACHED_SCOPES:
            self._by_scope[scope] = found
        return found

    def read(self, span: Any) -> SpanReading:
        """Read a span's documents and check the attributes ragmon uses, in one pass. JSON text
        that parses replaces the attribute's value in place, so nothing is parsed twice."""
        a = span.attributes
        problems: list[tuple[str, str]] = []
        if SCRUBBED in a:  # values Logfire scrubbed are not values, whatever the span's dialect
            drop_scrubbed(a)
        check_application_attributes(a, problems)
        first = self.by_scope(span.scope) if span.scope else None
        if first is not None:
            kind, documents = first.read(span, problems)
            if kind is not None:
                return SpanReading(kind, documents or [], problems, first, silent=documents is None)
        tried = first
        for key, dialect in self._markers:
            if key in a and dialect is not tried:
                kind, documents = dialect.read(span, problems)
                if kind is not None:
                    return SpanReading(kind, documents or [], problems, dialect, silent=documents is None)
                first, tried = first or dialect, dialect
        return SpanReading(None, [], problems, first or APPLICATION)

    def reading(self, span: Any) -> SpanReading:
        """The span's reading: the receiver's, or made now (for spans mapped without a receiver)."""
        if span.reading is None:
            span.reading = self.read(span)
        return span.reading

    def closest(self, spans: list[Any]) -> Closest:
        """For a trace that gave no retrieval: the dialect most of its spans speak, and what it
        lacked. For the explanation of an unread trace (counts, digests): no values are read."""
        claimed: dict[str, list[Any]] = {}
        for span in spans:
            dialect = self.reading(span).dialect
            if dialect is not APPLICATION:
                claimed.setdefault(dialect.name, []).append(span)
        if not claimed:
            markers = ", ".join(dict.fromkeys(key for key, _ in self._markers))
            return Closest(None, 0, (f"a span of a known instrumentation scope or with one of {markers}",))
        order = [d.name for d in self.dialects]
        name = max(claimed, key=lambda n: (len(claimed[n]), -order.index(n)))
        dialect = self.dialects[order.index(name)]
        return Closest(name, len(claimed[name]), dialect.lacks(claimed[name]))
