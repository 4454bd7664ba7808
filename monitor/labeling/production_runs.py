"""Eval runs built from production: what the live system retrieved for each labeled case, read
from the stored (redacted) trace the case was sampled from (docs/sampling.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.outcome import answer_outcome
from ragmon.monitor.core.signals.results import Outcome
from ragmon.monitor.labeling.case_history import case_history
from ragmon.monitor.labeling.evaluate import Case, EarlierTurn, RetrievedItem, RunEntry

CONTEXT = "context"


def run_entry(case_id: str, payload: Mapping[str, Any], stage: str, refusals: re.Pattern[str] | None) -> RunEntry:
    """The run entry of one stored trace. ``stage`` is ``context`` (what reached the model, in its
    order) or the name of a retriever (that retriever's list). Abstention is judged as the no-answer
    signal judges it: the explicit flag, then the refusal patterns. The entry carries the earlier
    turns the sample kept (when it kept any record of them) and what the retrievers searched."""
    trace = msgspec.convert({**payload, "type": "trace"}, TraceEvent)
    if stage == CONTEXT:
        passages = trace.final_context()
    else:
        lists = [r.passages for r in trace.retrievals if r.retriever == stage]
        passages = lists[-1] if lists else []
    retrieved = [RetrievedItem(id=p.id, doc_id=p.doc_id, doc_version=p.doc_version, span=p.span) for p in passages]
    history = None
    if payload.get("history") is not None:
        history = [msgspec.convert(turn, EarlierTurn) for turn in case_history(payload["history"])]
    searched = [r.query for r in trace.retrievals if r.query is not None and r.query != trace.query]
    abstained = answer_outcome(trace, refusals) is Outcome.ABSTAINED
    return RunEntry(case_id=case_id, retrieved=retrieved, abstained=abstained, history=history,
                    searched=list(dict.fromkeys(searched)))


def origin_of(case: Case) -> str:
    """The trace a case came from (its id, for cases written before origins were recorded)."""
    return case.origin.trace_id if case.origin is not None and case.origin.trace_id else case.id


def production_run(cases: Sequence[Case], payloads: Mapping[str, Mapping[str, Any]], stage: str,
                   refusals: re.Pattern[str] | None) -> tuple[list[RunEntry], list[str]]:
    """Run entries for the cases whose origin trace is stored (``payloads`` by trace id); returns
    them and the ids of cases without one (those count as retrieving nothing, and are reported)."""
    entries, missing = [], []
    for case in cases:
        payload = payloads.get(origin_of(case))
        if payload is None:
            missing.append(case.id)
        else:
            entries.append(run_entry(case.id, payload, stage, refusals))
    return entries, missing
