"""Walks a trace's passages stage by stage, judging each distinct passage once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.model import Passage, TraceEvent
from monitor.signals.results import MAX_IDS


@dataclass(slots=True)
class Flagged:
    """Distinct passage ids flagged at stage ``candidates`` (any retrieval list) and ``context``."""

    candidates: int = 0
    context: int = 0
    doc_ids: list[str] = field(default_factory=list)  # documents behind flagged passages, at most MAX_IDS
    verdicts: dict[str, bool | None] = field(default_factory=dict)  # passage id -> verdict


def flag_passages(trace: TraceEvent, judge: Callable[[Passage], bool | None]) -> Flagged:
    """Apply ``judge`` once per distinct passage id (True flags it; None means undecidable) and
    count flagged ids per stage; the context is ``trace.final_context()``."""
    result = Flagged()
    verdicts = result.verdicts

    def flagged(passages: list[Passage]) -> set[str]:
        found = set()
        for passage in passages:
            if passage.id not in verdicts:
                verdicts[passage.id] = judge(passage)
            if verdicts[passage.id]:
                found.add(passage.id)
                doc_id = passage.doc_id
                if doc_id and doc_id not in result.doc_ids and len(result.doc_ids) < MAX_IDS:
                    result.doc_ids.append(doc_id)
        return found

    candidates: set[str] = set()
    for retrieval in trace.retrievals:
        candidates |= flagged(retrieval.passages)
    result.candidates = len(candidates)
    result.context = len(flagged(trace.final_context()))
    return result
