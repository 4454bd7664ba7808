"""The retrieval lists of one trace from the spans that report documents ("levels"), with nested
spans of one retrieval made one list.

A span of the same kind inside another (at any depth) is a level of the same retrieval. An empty
level is never a list of its own. Levels with the same documents (same count; at each position the
same id or the same content) are merged, the one with the most identifying data (ids, metadata)
winning and the others filling in what it lacks; a nested level with other documents (the sources
of a fusion retriever) stays a list of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragmon.collectors.dialects import Dialects
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.span_reading import RawDocument

MAX_DEPTH = 256  # parent chains longer than any real trace are cut (and cannot loop)


@dataclass
class Level:
    """One span's list of documents, and the nested levels of the same retrieval below it."""

    span: Span
    kind: str  # "retriever" or "reranker"
    name: str
    documents: list[RawDocument]
    children: list[Level] = field(default_factory=list)
    nested: bool = False

    @property
    def identifying(self) -> int:
        return sum(bool(d.id) + bool(d.metadata) for d in self.documents)


def level_of(span: Span, dialects: Dialects) -> Level | None:
    """The level a span is, if it reports documents (read by its dialect)."""
    reading = dialects.reading(span)
    if reading.kind is None:
        return None
    return Level(span, reading.kind, reading.dialect.list_name(span, reading.kind), reading.documents)


def nest(levels: list[Level], by_id: dict[str, Span]) -> list[Level]:
    """Attach each level to the nearest enclosing level of the same kind; returns the outermost."""
    at = {level.span.span_id: level for level in levels}
    for level in levels:
        parent, seen = by_id.get(level.span.parent_id), 0
        while parent is not None and seen < MAX_DEPTH:
            enclosing = at.get(parent.span_id)
            if enclosing is not None and enclosing.kind == level.kind and enclosing is not level:
                enclosing.children.append(level)
                level.nested = True
                break
            parent, seen = by_id.get(parent.parent_id), seen + 1
    return [level for level in levels if not level.nested]


def resolve(level: Level, depth: int = 0) -> list[Level]:
    """The lists one outermost level and its nested levels stand for."""
    below = [] if depth > MAX_DEPTH else [x for child in level.children for x in resolve(child, depth + 1)]
    if not level.documents:
        if below or level.nested:
            return below  # an empty level is never a list of its own
        # A retrieval that found nothing. It is named as it would be had it found something: by
        # its innermost level (DSPy's ColBERTv2 inside Retrieve), where ids come from.
        inner = level
        while len(inner.children) == 1:
            inner = inner.children[0]
        return [Level(level.span, level.kind, inner.name, [], nested=level.nested)]
    same = [x for x in below if _same_documents(x.documents, level.documents)]
    rest = [x for x in below if all(x is not s for s in same)]
    return [*rest, _merge(level, same)]


def _same_documents(a: list[RawDocument], b: list[RawDocument]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        shared = [(x.id, y.id)] if x.id and y.id else []
        if x.content is not None and y.content is not None:
            shared.append((x.content, y.content))
        if not shared or any(p != q for p, q in shared):
            return False
    return True


def _merge(outer: Level, same: list[Level]) -> Level:
    if not same:
        return outer
    levels = [outer, *same]
    winner = max(levels, key=lambda level: level.identifying)  # the first (outermost) on a tie
    documents = []
    for i, document in enumerate(winner.documents):
        merged = RawDocument(document.id, document.score, document.content, dict(document.metadata),
                             dict(document.fields))
        for other in levels:
            o = other.documents[i]
            merged.id = merged.id or o.id
            merged.score = merged.score if merged.score is not None else o.score
            merged.content = merged.content if merged.content is not None else o.content
            merged.metadata = {**o.metadata, **merged.metadata}
            merged.fields = {**o.fields, **merged.fields}
        documents.append(merged)
    return Level(outer.span, winner.kind, winner.name, documents, nested=outer.nested)
