"""The retrieval lists of one trace from the spans that report documents ("levels"), with nested
spans of one retrieval made one list, and the list its caller got.

A span of the same kind inside another (at any depth) is a level of the same retrieval. The
outermost level that reports its list decides which documents the caller got:

- a nested level with the same documents (same count; at each position the same id or the same
  content) merges into it, the one with the most identifying data (ids, metadata) winning and the
  others filling in what it lacks (DSPy's content-only ``Retrieve`` over ColBERT's ids);
- a nested level of the same name (the same retriever reporting at another of its methods, as
  LlamaIndex's ``retrieve`` around ``_retrieve``) only lends ids and metadata to the documents it
  shares with it (by id, else by content): an inner level may hold an unfiltered top k that the
  caller never got;
- a nested level of another name with other documents (a source of a fusion retriever) stays a
  list of its own; an empty nested level is never one;
- a level that says it found nothing is an empty list, and when outermost an empty context, even
  when a level inside it holds documents. A level that cannot say (OpenInference writes nothing
  for an empty list) leaves the decision to the levels inside it.
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
    silent: bool = False  # empty because the span does not say what it held, not because it found nothing

    @property
    def identifying(self) -> int:
        return sum(bool(d.id) + bool(d.metadata) for d in self.documents)


def level_of(span: Span, dialects: Dialects) -> Level | None:
    """The level a span is, if it reports documents (read by its dialect)."""
    reading = dialects.reading(span)
    if reading.kind is None:
        return None
    return Level(span, reading.kind, reading.dialect.list_name(span, reading.kind), reading.documents,
                 silent=reading.silent)


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
    """The lists one level and its nested levels stand for; the last is the list the level's
    caller got."""
    lists: list[Level] = []  # sources of other retrievers, each a list of its own
    same: list[Level] = []  # the same documents: merged, the best identified winning
    lenders: list[Level] = []  # the same retriever at another method: lends to shared documents only
    stand_in: list[Level] = []  # the nested levels' lists with documents, should this level not say
    for child in level.children if depth <= MAX_DEPTH else []:
        *sources, own = resolve(child, depth + 1)
        lists.extend(sources)
        stand_in.extend(x for x in [*sources, own] if x.documents)
        if not own.documents:
            continue  # an empty nested level is never a list of its own, and lends nothing
        if level.documents and _same_documents(own.documents, level.documents):
            same.append(own)
        elif child.name == level.name:
            lenders.append(own)
        else:
            lists.append(own)
    if level.documents:
        return [*lists, _lend(_merge(level, same), lenders)]
    if level.silent and stand_in:
        return stand_in  # the last of them stands for what the caller got
    # Found nothing (or nothing below says otherwise). Named as it would be had it found
    # something: by its innermost level (DSPy's ColBERTv2 inside Retrieve), where ids come from.
    inner = level
    while len(inner.children) == 1 and not lists:
        inner = inner.children[0]
    return [*lists, Level(level.span, level.kind, inner.name, [], nested=level.nested, silent=level.silent)]


def _lend(level: Level, lenders: list[Level]) -> Level:
    """Complete ``level``'s documents with the ids, scores, content and metadata of the same
    documents (by id, else by content) in ``lenders``."""
    for lender in lenders:
        by_id = {d.id: d for d in lender.documents if d.id}
        by_content = {d.content: d for d in lender.documents if d.content is not None}
        for document in level.documents:
            other = (by_id.get(document.id) if document.id else None) or (
                by_content.get(document.content) if document.content is not None else None)
            if other is None or (document.id and other.id and document.id != other.id):
                continue
            document.id = document.id or other.id
            document.score = document.score if document.score is not None else other.score
            document.content = document.content if document.content is not None else other.content
            document.metadata = {**other.metadata, **document.metadata}
            document.fields = {**other.fields, **document.fields}
    return level


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
