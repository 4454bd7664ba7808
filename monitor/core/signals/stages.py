"""Walks a trace's passages stage by stage and counts the distinct passage ids a judge flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import MAX_IDS


@dataclass(slots=True)
class Flagged:
    """Distinct passage ids flagged at stage ``candidates`` (any retrieval list) and ``context``."""

    candidates: int = 0
    context: int = 0
    doc_ids: list[str] = field(default_factory=list)  # documents behind flagged passages, at most MAX_IDS
    context_doc_ids: list[str] = field(default_factory=list)  # those of flagged passages in the context
    verdicts: dict[str, bool | None] = field(default_factory=dict)  # passage id -> combined verdict


def flag_passages(trace: TraceEvent, judge: Callable[[Passage], bool | None],
                  document_of: Callable[[Passage], str | None]) -> Flagged:
    """Judge every copy of every passage (True flags it, False clears it, None: cannot tell).

    Copies of one passage id often carry different fields (candidate lists: id and score; the
    context: ACL, versions), so the verdicts of all copies are combined: flagged if any copy is
    flagged, unknown only if every copy is. The combined verdict then counts once per stage the id
    appears in. The context is ``trace.final_context()``. ``document_of`` names a passage's
    document, for the ids reported with the counts.
    """
    context = trace.final_context()
    lists = [r.passages for r in trace.retrievals]
    if trace.context is not None:
        lists.append(context)
    result = Flagged()
    verdicts = result.verdicts
    flagged = False
    for passages in lists:
        for passage in passages:
            verdict = judge(passage)
            if verdict:
                verdicts[passage.id] = flagged = True
            elif verdict is False:
                if not verdicts.get(passage.id):
                    verdicts[passage.id] = False
            elif passage.id not in verdicts:
                verdicts[passage.id] = None
    if not flagged:  # almost every trace: no counts, no documents to name
        return result
    candidates = {p.id for r in trace.retrievals for p in r.passages if verdicts[p.id]}
    result.candidates = len(candidates)
    result.context = len({p.id for p in context if verdicts[p.id]})
    for passages in lists:  # documents in the order they first appear
        _add_documents(result.doc_ids, passages, verdicts, document_of)
    _add_documents(result.context_doc_ids, context, verdicts, document_of)
    return result


def _add_documents(out: list[str], passages, verdicts: dict[str, bool | None],
                   document_of: Callable[[Passage], str | None]) -> None:
    for passage in passages:
        if verdicts[passage.id] and len(out) < MAX_IDS:  # the flagged ones only: few, if any
            doc_id = document_of(passage)
            if doc_id and doc_id not in out:
                out.append(doc_id)
