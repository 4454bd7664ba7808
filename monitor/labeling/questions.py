"""The questions a candidate system is asked (docs/evaluation.md): one line per regression case,
with the conversation it was asked in and what locates it (tenant, caller groups, corpus), and
none of its labels, so a harness replays each case as production saw it and writes the run line.

A follow-up's earlier turns are given as the user and the system had them (message, answer);
the searched queries of those turns are production's rewrites, not the conversation, and are
left out: the candidate rewrites with its own. The run line should carry the ``history`` it was
given back, so that ``ragmon eval`` can tell a replay that lost it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragmon.monitor.labeling.case_history import case_history

#: What a question line may carry besides the case id, the question and the history.
PASSED_ON = ("turn", "tenant", "caller_groups", "corpus", "split")


def question_of(case: Mapping[str, Any]) -> dict[str, Any]:
    """The question line of one case (a dataset line). Raises ValueError for a malformed history."""
    history = [{key: turn[key] for key in ("message", "answer") if key in turn}
               for turn in case_history(case.get("history"))]
    line: dict[str, Any] = {"case_id": case["id"], "question": case.get("question", ""), "history": history}
    line.update({key: case[key] for key in PASSED_ON if case.get(key) is not None})
    return line


def questions(cases: Iterable[Mapping[str, Any]], splits: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The question lines of ``cases`` in dataset order, of the given splits only when some are given."""
    wanted = set(splits)
    return [question_of(case) for case in cases if not wanted or case.get("split", "dev") in wanted]
