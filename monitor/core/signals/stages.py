"""Walks a trace's passages stage by stage and counts the distinct passage ids a judge flags, and
those it could not judge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import MAX_IDS, Coverage, Unjudged

StageIds = tuple[set[str], set[str]]  # the distinct passage ids at stage candidates and context


def stage_ids(trace: TraceEvent) -> StageIds:
    """The distinct passage ids of each stage: any retrieval list, and the final context."""
    return {p.id for r in trace.retrievals for p in r.passages}, {p.id for p in trace.final_context()}


@dataclass(slots=True)
class Flagged:
    """Distinct passage ids flagged at stage ``candidates`` (any retrieval list) and ``context``."""

    candidates: int = 0
    context: int = 0
    doc_ids: list[str] = field(default_factory=list)  # documents behind flagged passages, at most MAX_IDS
    context_doc_ids: list[str] = field(default_factory=list)  # those of flagged passages in the context
    verdicts: dict[str, bool | None] = field(default_factory=dict)  # passage id -> combined verdict
    coverage: Coverage = field(default_factory=Coverage)
    flagged: frozenset[str] = frozenset()  # the passage ids flagged, any stage


def flag_passages(trace: TraceEvent, judge: Callable[[Passage], bool | None],
                  document_of: Callable[[Passage], str | None],
                  unjudged: Callable[[list[Passage]], Unjudged], stages: StageIds | None = None) -> Flagged:
    """Judge every copy of every passage (True flags it, False clears it, None: cannot tell).

    Copies of one passage id often carry different fields (candidate lists: id and score; the
    context: ACL, versions), so the verdicts of all copies are combined: flagged if any copy is
    flagged, unknown only if every copy is. The combined verdict then counts once per stage the id
    appears in. The context is ``trace.final_context()``. ``document_of`` names a passage's
    document, for the ids reported with the counts. ``unjudged`` names why the copies of a passage
    none of which could be judged were not; ``coverage`` counts what was judged and what was not,
    per stage and over the trace. ``stages``: :func:`stage_ids` of the trace, when the
    caller made them already (two checks of one trace share them).
    """
    context = trace.final_context()
    lists = [r.passages for r in trace.retrievals]
    if trace.context is not None:
        lists.append(context)
    verdicts: dict[str, bool | None] = {}
    unknown: dict[str, list[Passage]] = {}  # the copies of passages no copy of which could be judged so far
    flagged = False
    for passages in lists:
        for passage in passages:
            verdict = judge(passage)
            pid = passage.id
            if verdict:
                verdicts[pid] = flagged = True
            elif verdict is False:
                if not verdicts.get(pid):
                    verdicts[pid] = False
            elif verdicts.setdefault(pid, None) is None:  # no copy judged so far
                copies = unknown.get(pid)
                if copies is None:
                    unknown[pid] = [passage]
                else:
                    copies.append(passage)
    # the coverage made once, not a default one made and replaced (this runs twice for every trace)
    result = Flagged(verdicts=verdicts, coverage=_coverage(
        trace, context, verdicts, unknown, unjudged, document_of, stages if stages is not None else stage_ids(trace)))
    if not flagged:  # almost every trace: no counts, no documents to name
        return result
    result.flagged = frozenset(pid for pid, verdict in verdicts.items() if verdict)
    candidates = {p.id for r in trace.retrievals for p in r.passages if verdicts[p.id]}
    result.candidates = len(candidates)
    result.context = len({p.id for p in context if verdicts[p.id]})
    for passages in lists:  # documents in the order they first appear
        _add_documents(result.doc_ids, passages, verdicts, document_of)
    _add_documents(result.context_doc_ids, context, verdicts, document_of)
    return result


def _coverage(trace: TraceEvent, context: list[Passage], verdicts: dict[str, bool | None],
              unknown: dict[str, list[Passage]], unjudged: Callable[[list[Passage]], Unjudged],
              document_of: Callable[[Passage], str | None], stages: StageIds) -> Coverage:
    """Distinct passage ids judged and not judged, per stage and over the trace."""
    coverage = Coverage(served=len(verdicts))
    candidates, context_ids = stages
    if not unknown:  # every passage judged: the common case once a catalog is in place
        if candidates:
            coverage.judged["candidates"] = len(candidates)
        if context_ids:
            coverage.judged["context"] = len(context_ids)
        return coverage
    # counted as they are found, each container filled once: this runs for both checks of every trace
    # whose passages a catalog does not cover (and for every trace of a monitor without a catalog)
    reasons: dict[str, Unjudged] = {}
    per_reason = coverage.reasons
    for pid, copies in unknown.items():
        if verdicts[pid] is None:  # else a later copy was judged
            reason = reasons[pid] = unjudged(copies)
            per_reason[reason] = per_reason.get(reason, 0) + 1
    coverage.served_unjudged = len(reasons)
    for stage, ids in (("candidates", candidates), ("context", context_ids)):
        if not ids:
            continue
        at_stage: dict[Unjudged, int] = {}  # in the order the reasons are first met, as the keys were added
        for pid in ids:
            reason = reasons.get(pid)
            if reason is not None:
                at_stage[reason] = at_stage.get(reason, 0) + 1
        missing = sum(at_stage.values())
        if missing < len(ids):
            coverage.judged[stage] = len(ids) - missing
        for reason, count in at_stage.items():
            coverage.unjudged[(stage, reason)] = count
    if reasons:  # examples, those the model saw first: the context, then the lists
        seen: set[str] = set()
        for passages in (context, *(r.passages for r in trace.retrievals)):
            for passage in passages:
                pid = passage.id
                if pid in reasons and pid not in seen:
                    seen.add(pid)
                    coverage.examples.append((pid, next(filter(None, map(document_of, unknown[pid])), passage.doc_id),
                                              reasons[pid]))
                    if len(seen) == MAX_IDS:
                        return coverage
    return coverage


def _add_documents(out: list[str], passages, verdicts: dict[str, bool | None],
                   document_of: Callable[[Passage], str | None]) -> None:
    for passage in passages:
        if verdicts[passage.id] and len(out) < MAX_IDS:  # the flagged ones only: few, if any
            doc_id = document_of(passage)
            if doc_id and doc_id not in out:
                out.append(doc_id)
