"""Does a run answer the cases it is scored against (docs/evaluation.md)? A run line for a case the
file does not hold, a case run twice, and a follow-up turn replayed on another conversation than
its case's are told apart here; the scores themselves are evaluate.py's.

A run says what conversation a system was given only when its lines carry ``history``. Once any
line of a run does, every line of a case with a history must: a follow-up replayed without it
measured another question (``history_lost``). A history given must hold the case's earlier user
messages, in order (``history_differs``); the answers of those turns are not compared, since a
system replayed turn by turn gives its own. A case known to be a follow-up (``turn`` above 1)
whose history was not kept cannot be checked, and is not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ragmon.monitor.labeling.evaluate import Case, RunEntry

#: Mismatches that make a run measure something else than its cases: the gate fails on them.
BREAKING = ("history_lost", "history_differs")
#: Mismatches reported without failing: scores of the cases held stay right.
NOTED = ("unknown_cases", "duplicate_runs")


def mismatches(cases: Sequence[Case], runs: Sequence[RunEntry]) -> dict[str, list[str]]:
    """Case ids by kind of mismatch (kinds with none left out), each list in file order:
    ``unknown_cases`` (run lines for ids no case has), ``duplicate_runs`` (cases with several
    run lines: the last is scored), ``history_lost``, ``history_differs``."""
    known = {case.id for case in cases}
    counts = Counter(run.case_id for run in runs)
    by_case = {run.case_id: run for run in runs}
    tells_history = any(run.history is not None for run in runs)
    found: dict[str, list[str]] = {
        "unknown_cases": _distinct(run.case_id for run in runs if run.case_id not in known),
        "duplicate_runs": _distinct(run.case_id for run in runs if counts[run.case_id] > 1 and run.case_id in known),
        "history_lost": [], "history_differs": []}
    for case in cases:
        run = by_case.get(case.id)
        if run is None or (not case.history and case.follow_up):
            continue  # no run (reported as `no run`), or a follow-up whose history was not kept
        given = run.history
        if given is None and not tells_history:
            continue
        if case.history and not given:
            found["history_lost"].append(case.id)
        elif [turn.message for turn in given or []] != [turn.message for turn in case.history]:
            found["history_differs"].append(case.id)
    return {kind: ids for kind, ids in found.items() if ids}


def mismatch_failures(found: dict[str, list[str]]) -> list[str]:
    """The gate's reasons to fail for the breaking mismatches, each with up to three case ids."""
    reasons = {"history_lost": "follow-up cases were replayed without their history",
               "history_differs": "cases were replayed on another conversation than their history"}
    return [f"{len(found[kind])} {reasons[kind]}, e.g. {', '.join(found[kind][:3])}"
            for kind in BREAKING if found.get(kind)]


def mismatch_notes(found: dict[str, list[str]]) -> list[str]:
    """Warnings for the mismatches that do not fail the gate, each with up to three case ids."""
    reasons = {"unknown_cases": "run lines name a case the cases file does not hold (not scored)",
               "duplicate_runs": "cases have more than one run line (the last one is scored)"}
    return [f"{len(found[kind])} {reasons[kind]}, e.g. {', '.join(found[kind][:3])}"
            for kind in NOTED if found.get(kind)]


def _distinct(ids) -> list[str]:
    return list(dict.fromkeys(ids))
