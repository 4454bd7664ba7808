"""The spans of one OTel trace to one ragmon trace event, by the rules that make real instrumented
apps read right (docs/events.md has the table per framework).

- **Retrieval lists.** Each RETRIEVER span, GenAI ``retrieval`` span and vector-store query span
  (``db.query.result`` events) reports a list; each RERANKER span its output list. Nested spans of
  one retrieval are one list (``ragmon.collectors.span_levels``). Lists are ordered by when their span
  ended.
- **Passages** are named by :class:`~ragmon.collectors.passage_ids.PassageNamer`; one that nothing names
  is dropped from its list and counted, never failing the trace.
- **Context**: the ids in ``ragmon.context.document_ids`` when the app set it; else the last
  reranker output; else the last non-empty retrieval list.
- **Spans are read by their dialects** (``ragmon.collectors.dialects``): documents, list names,
  question, answer, generations and tokens are each asked of the span's own dialect.
- **Question and searched queries**: the trace's query is the user's message (the root chain's
  input, else the first list's question); a list whose span was asked something else (a rewrite)
  carries it as its own ``query``.
- **Caller, tenant, index, conversation, turn** (:class:`~ragmon.collectors.dialects.base.TraceFacts`):
  each from the root span, else from the earliest span that says it (``user.id`` / ``enduser.id``;
  groups from ``metadata.groups`` or ``ragmon.caller.groups``; tenant from ``metadata.tenant``, else
  the resource's ``ragmon.tenant``; and the dialects' own places).
- A span set with no retrieval at all (an ingestion run, a bare LLM call) is not a question
  answered from an index: it maps to no event, and the receiver counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from ragmon.collectors import semconv as sc
from ragmon.collectors.dialects import Dialects
from ragmon.collectors.dialects.base import TraceFacts
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.passage_ids import PassageNamer
from ragmon.collectors.semconv import finite_number, string_list
from ragmon.collectors.span_levels import MAX_DEPTH, Level, level_of, nest, resolve
from ragmon.collectors.span_reading import RawDocument

_FIELDS = frozenset(sc.PASSAGE_FIELDS)
_FACTS = tuple(f.name for f in fields(TraceFacts))


@dataclass
class Mapped:
    """What the spans of one trace map to: ``event`` (None when they hold no retrieval at all),
    how many passage ids were derived (by how), and how many passages nothing named."""

    event: dict[str, Any] | None
    derived: Counter[str] = field(default_factory=Counter)
    unmapped: int = 0


def feedback_event(span: Span) -> dict[str, Any] | None:
    """The feedback a span carries, if it is a ragmon feedback span."""
    trace_id = span.attributes.get(sc.FEEDBACK_TRACE_ID)
    if not trace_id:
        return None
    event: dict[str, Any] = {"type": "feedback", "trace_id": str(trace_id),
                             "kind": span.attributes.get(sc.FEEDBACK_KIND), "time": span.start_ns / 1e9}
    if span.attributes.get(sc.FEEDBACK_VALUE) is not None:
        event["value"] = span.attributes[sc.FEEDBACK_VALUE]
    return event


class SpanMapper:
    """Maps assembled traces; ``namer`` holds the configured passage-id key orders, ``dialects``
    reads the spans (the receiver reads them as they arrive with the same)."""

    def __init__(self, namer: PassageNamer | None = None, dialects: Dialects | None = None) -> None:
        self._namer = namer or PassageNamer()
        self.dialects = dialects or Dialects()

    def map(self, spans: list[Span]) -> Mapped:
        spans = sorted(spans, key=lambda s: s.start_ns)
        by_id = {s.span_id: s for s in spans}
        root = next((s for s in spans if not s.parent_id or s.parent_id not in by_id), spans[0])
        levels = [level for level in (level_of(span, self.dialects) for span in spans) if level is not None]
        explicit_context = _first(string_list(ids) for s in [root, *spans]
                                  if (ids := s.attributes.get(sc.CONTEXT_DOCUMENT_IDS)) is not None)
        if not levels and explicit_context is None:
            return Mapped(None)
        tops = nest(levels, by_id)
        mapped = Mapped({})
        resolved = [resolve(top) for top in tops]
        callers = {id(lists[-1]) for lists in resolved}  # per retrieval, the list its caller got
        lists = sorted((level for lists in resolved for level in lists),
                       key=lambda level: (level.span.end_ns, level.span.start_ns))
        retrievals = [{"retriever": level.name, "passages": self._passages(level.documents, mapped)}
                      for level in lists]
        _share_fields(retrievals)
        got = [(retrieval, level.kind) for retrieval, level in zip(retrievals, lists, strict=True)
               if id(level) in callers]
        mapped.event = self._event(root, spans, by_id, tops, retrievals, _context(got, retrievals, explicit_context))
        self._searched(mapped.event, lists)
        return mapped

    def _searched(self, event: dict[str, Any], lists: list[Level]) -> None:
        """Each list that searched something other than the user's message (a question condensed
        with the chat history, a multi-query rewrite) says what: its span's question (of the
        outermost level), when it has one and it differs from the trace's."""
        for retrieval, level in zip(event["retrievals"], lists, strict=True):
            searched = self._dialect(level.span).list_question(level.span)
            if searched is not None and searched != event["query"]:
                retrieval["query"] = searched

    def _passages(self, documents: list[RawDocument], mapped: Mapped) -> list[dict[str, Any]]:
        passages = []
        for document in documents:
            if document.id:  # the namer's first rule, without its call: nearly every document has its id
                passage_id = document.id
            else:
                passage_id, derived = self._namer.passage_id(document)
                if passage_id is None:
                    mapped.unmapped += 1
                    continue
                if derived is not None:
                    mapped.derived[derived] += 1
            passage: dict[str, Any] = {"id": passage_id}
            if document.score is not None:
                passage["score"] = document.score
            if document.content is not None:
                passage["text"] = document.content
            if document.fields:
                passage.update(document.fields)
            if "doc_id" not in passage and document.metadata:
                doc_id = self._namer.doc_id(document.metadata)
                if doc_id is not None:
                    passage["doc_id"] = doc_id
            passages.append(passage)
        return passages

    def _event(self, root: Span, spans: list[Span], by_id: dict[str, Span], tops: list[Level],
               retrievals: list[dict[str, Any]], context: list[dict[str, Any]]) -> dict[str, Any]:
        generations = _outermost([s for s in spans if self._dialect(s).is_generation(s)], by_id)
        facts = self._facts([root, *(s for s in spans if s is not root)])  # the root, else the earliest span
        event: dict[str, Any] = {
            "type": "trace", "trace_id": root.trace_id, "time": root.start_ns / 1e9,
            "tenant": str(facts.tenant or root.resource.get(sc.TENANT) or "default"),
            "query": self._query(root, [top.span for top in tops]) or "",
            "index": {"name": str(facts.index or root.resource.get("service.name") or "default")},
            "retrievals": retrievals,
            "latency_ms": _latency(root, tops, generations),
        }
        last = retrievals[-1]["passages"] if retrievals else None
        if last is None or (context is not last and (context or last)):
            event["context"] = context  # absent, the context is the last list (docs/events.md): not sent twice
        if facts.index_version:
            event["index"]["version"] = facts.index_version
        if facts.caller_id or facts.groups:
            event["caller"] = {"groups": facts.groups or []}
            if facts.caller_id:
                event["caller"]["id"] = facts.caller_id
        if facts.conversation:
            event["conversation_id"] = facts.conversation
        if facts.turn is not None:
            event["turn"] = facts.turn
        answer = self._answer(root, spans, generations)
        if answer is not None or facts.abstained is not None:
            event["answer"] = {"text": answer, "citations": facts.citations or []}
            if facts.abstained is not None:
                event["answer"]["abstained"] = facts.abstained
        usage = self._usage(spans, generations)
        if usage:
            event["usage"] = usage
        return event

    def _dialect(self, span: Span):
        return (span.reading or self.dialects.reading(span)).dialect  # read as it arrived, nearly always

    def _facts(self, precedence: list[Span]) -> TraceFacts:
        """Each fact from the first span of ``precedence`` that has it."""
        found = TraceFacts()
        missing = list(_FACTS)
        for span in precedence:
            facts = self._dialect(span).facts(span)
            for name in missing:
                value = getattr(facts, name)
                if value is not None:
                    setattr(found, name, value)
            missing = [name for name in missing if getattr(found, name) is None]
            if not missing:
                break
        return found

    def _query(self, root: Span, retrieval_spans: list[Span]) -> str | None:
        """The root chain's input, else the first list's span's question."""
        dialect = self._dialect(root)
        if dialect.is_chain(root):
            query = dialect.root_question(root)
            if query is not None:
                return query
        for span in sorted(retrieval_spans, key=lambda s: s.start_ns):
            query = self._dialect(span).list_question(span)
            if query is not None:
                return query
        return None

    def _answer(self, root: Span, spans: list[Span], generations: dict[str, Span]) -> str | None:
        """The root chain's output when it is the answer; else the last generation's output."""
        dialect = self._dialect(root)
        if dialect.is_chain(root):
            answer = dialect.root_answer(root)
            if answer is not None:
                return answer
        for span in sorted((s for s in spans if s.span_id in generations), key=lambda s: s.end_ns, reverse=True):
            answer = self._dialect(span).generation_answer(span)
            if answer is not None:
                return answer
        return None

    def _usage(self, spans: list[Span], generations: dict[str, Span]) -> dict[str, int]:
        """Tokens per generation: nested spans of one call (LlamaIndex's ``predict`` -> ``complete``)
        may each report it, so each outermost generation counts the largest figure in its subtree."""
        per_call: dict[str, dict[str, int]] = {}
        for span in spans:
            call = generations.get(span.span_id)
            if call is None:
                continue
            figures = per_call.setdefault(call.span_id, {})
            for name, value in zip(("input_tokens", "output_tokens"), self._dialect(span).tokens(span), strict=True):
                count = _count(value)
                if count is not None:
                    figures[name] = max(figures.get(name, 0), count)
        usage: dict[str, int] = {}
        for figures in per_call.values():
            for name, value in figures.items():
                usage[name] = usage.get(name, 0) + value
        return usage


# --- the rest of the event -----------------------------------------------------------------------


def _share_fields(retrievals: list[dict[str, Any]]) -> None:
    """A passage reported without any passage field takes those of another copy of it in the
    trace: a reranker's output often carries ids, content and scores only (Haystack's rankers),
    while the retriever's list had the document's id, version and ACL, which an alert must name."""
    first: dict[str, dict[str, Any]] = {}
    copies: dict[str, list[dict[str, Any]]] = {}  # of the ids reported more than once: a list for those only
    for retrieval in retrievals:
        for passage in retrieval["passages"]:
            pid = passage["id"]
            if pid in first:
                same = copies.get(pid)
                if same is None:
                    copies[pid] = [first[pid], passage]
                else:
                    same.append(passage)
            else:
                first[pid] = passage
    for same in copies.values():
        bare, source = [], None
        for passage in same:
            if passage.keys().isdisjoint(_FIELDS):  # no set made: this runs for every copy
                bare.append(passage)
            elif source is None:
                source = passage
        if bare and source is not None:
            fields = {key: source[key] for key in source.keys() & _FIELDS}
            for passage in bare:
                passage.update(fields)


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _context(got: list[tuple[dict[str, Any], str]], retrievals: list[dict[str, Any]], explicit: list[str] | None
             ) -> list[dict[str, Any]]:
    """The explicit context; else the list the caller of the last reranker got; else the last
    non-empty list a retriever's caller got (``got``: those lists and their kinds, in order)."""
    if explicit is not None:
        if retrievals and [p["id"] for p in retrievals[-1]["passages"]] == explicit:
            return retrievals[-1]["passages"]  # the last list, as ragmon's emitter names it
        known: dict[str, dict[str, Any]] = {}
        for retrieval in reversed(retrievals):  # the latest list's copy of a passage (the reranked one) first
            for passage in retrieval["passages"]:
                known.setdefault(passage["id"], passage)
        return [known.get(passage_id, {"id": passage_id}) for passage_id in explicit]
    reranked = [retrieval for retrieval, kind in got if kind == "reranker"]
    if reranked:
        return reranked[-1]["passages"]
    return next((r["passages"] for r, _ in reversed(got) if r["passages"]), [])


def _outermost(spans: Iterable[Span], by_id: dict[str, Span]) -> dict[str, Span]:
    """Each of ``spans`` (by span id) mapped to its outermost ancestor among them (itself when it
    has none): nested calls of one generation counted once."""
    ids = {span.span_id for span in spans}
    outer: dict[str, Span] = {}
    for span in spans:
        top, parent, seen = span, by_id.get(span.parent_id), 0
        while parent is not None and seen < MAX_DEPTH:
            if parent.span_id in ids:
                top = parent
            parent, seen = by_id.get(parent.parent_id), seen + 1
        outer[span.span_id] = top
    return outer


def _latency(root: Span, tops: list[Level], generations: dict[str, Span]) -> dict[str, float]:
    retrieve = rerank = generate = 0  # summed as sum() does: an int 0 when there is nothing
    for top in tops:
        if top.kind == "retriever":
            retrieve += top.span.duration_ms
        elif top.kind == "reranker":
            rerank += top.span.duration_ms
    counted: set[str] = set()  # nested calls of one generation map to one outermost span: counted once
    for span in generations.values():
        if span.span_id not in counted:
            counted.add(span.span_id)
            generate += span.duration_ms
    latency = {}
    for name, value in (("retrieve", retrieve), ("rerank", rerank), ("generate", generate)):
        if value:
            latency[name] = round(value, 3)
    latency["total"] = round(root.duration_ms, 3)
    return latency


def _count(value: Any) -> int | None:
    """A token count as an integer; None for what is not a finite non-negative number."""
    number = finite_number(value)
    return int(number) if number is not None and number >= 0 else None
