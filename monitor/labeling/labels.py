"""Label import (docs/sampling.md): labeled work in, regression cases out.

Two inputs are understood: Label Studio's JSON export of a ragmon project (a JSON array of tasks
with annotations), and the ``cases.jsonl`` of a weekly pull filled in by hand (``expected`` set,
``relevant`` listed or ``grade`` written onto the candidates). Each task or line either becomes a
case or is reported as a problem naming the task; one bad task never stops the others.

The regression dataset is a JSONL file, one case per line. Import appends: cases already there
(by id) are left as they are, new ones go at the end ordered by week, tenant and id, and the file
is replaced atomically so a crash never leaves half a line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmon.monitor.core.private_files import write_private
from ragmon.monitor.labeling.batch import TaskProblem, labeled_case
from ragmon.monitor.labeling.case_history import conversation

CASE_KEYS = ("id", "question", "tenant", "caller_groups", "corpus", "expected", "relevant", "reference_answer",
             "claims", "tags", "split", "origin")


@dataclass
class Problem:
    where: str  # "task 12 (case t-abc)" or "line 3 (case t-abc)"
    message: str


@dataclass
class Reviewed:
    """What a file of labeled work holds: cases ready to import, problems, tasks not labeled yet."""

    cases: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    unlabeled: int = 0


def read_labeled(data: bytes) -> Reviewed:
    """Cases from a Label Studio JSON export or from a filled cases JSONL, told apart by the first
    non-blank byte (``[`` is an export)."""
    if data.lstrip()[:1] == b"[":
        return _from_export(data)
    return _from_jsonl(data)


def _from_export(data: bytes) -> Reviewed:
    out = Reviewed()
    try:
        tasks = json.loads(data)
    except ValueError as error:
        out.problems.append(Problem("file", f"not valid JSON: {error}"))
        return out
    for number, task in enumerate(tasks, start=1):
        if not isinstance(task, dict):
            out.problems.append(Problem(f"item {number}", "not a task object"))
            continue
        where = f"task {task.get('id', number)} (case {(task.get('data') or {}).get('case_id', '?')})"
        try:
            case = labeled_case(task)
        except TaskProblem as problem:
            out.problems.append(Problem(where, str(problem)))
            continue
        except (KeyError, TypeError, ValueError) as error:
            out.problems.append(Problem(where, f"malformed task: {type(error).__name__} {error}"))
            continue
        if case is None:
            out.unlabeled += 1
        else:
            _collect(out, where, case)
    return out


def _from_jsonl(data: bytes) -> Reviewed:
    out = Reviewed()
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except ValueError as error:
            out.problems.append(Problem(f"line {number}", f"not valid JSON: {error}"))
            continue
        if not isinstance(case, dict):
            out.problems.append(Problem(f"line {number}", "not a JSON object"))
            continue
        where = f"line {number} (case {case.get('id', '?')})"
        if case.get("expected") is None:
            out.unlabeled += 1
            continue
        try:
            _collect(out, where, filled_case(case))
        except TaskProblem as problem:
            out.problems.append(Problem(where, str(problem)))
    return out


def _collect(out: Reviewed, where: str, case: dict[str, Any]) -> None:
    if any(c["id"] == case["id"] for c in out.cases):
        out.problems.append(Problem(where, "the same case appears twice in the file; the first is kept"))
        return
    if case["expected"] == "answer" and not any(u["grade"] >= 1 for u in case["relevant"]):
        out.problems.append(Problem(where, "answerable, but no passage is graded relevant: the right evidence was "
                                           "not retrieved; add it to `relevant` by hand (it cannot be scored "
                                           "without)"))
        return
    out.cases.append(case)


def filled_case(case: dict[str, Any]) -> dict[str, Any]:
    """A hand-filled case checked and put in dataset form. Candidates carrying a ``grade`` join
    ``relevant``; the candidate list itself is dropped. A follow-up keeps its conversation
    (``history`` as the weekly pull wrote it, ``turn``, ``searched``). Raises :class:`TaskProblem`."""
    if not isinstance(case.get("id"), str) or not case["id"]:
        raise TaskProblem("`id` is missing")
    if case.get("expected") not in ("answer", "abstain"):
        raise TaskProblem(f"`expected` is {case.get('expected')!r}, not \"answer\" or \"abstain\"")
    relevant = list(case.get("relevant") or [])
    for candidate in case.get("candidates") or []:
        if "grade" in candidate:
            unit = {"doc_id": candidate.get("doc_id") or candidate.get("id"), "grade": candidate["grade"]}
            unit.update({k: candidate[k] for k in ("doc_version", "span") if candidate.get(k) is not None})
            relevant.append(unit)
    for number, unit in enumerate(relevant):
        if not isinstance(unit, dict) or not isinstance(unit.get("doc_id"), str):
            raise TaskProblem(f"relevant[{number}]: `doc_id` is missing")
        unit.setdefault("grade", 1)
        if unit["grade"] not in (0, 1, 2) or isinstance(unit["grade"], bool):
            raise TaskProblem(f"relevant[{number}]: grade {unit['grade']!r} is not one of 0, 1, 2")
        span = unit.get("span")
        if span is not None and not (isinstance(span, list) and len(span) == 2
                                     and all(isinstance(x, int) for x in span) and span[0] < span[1]):
            raise TaskProblem(f"relevant[{number}]: span {span!r} is not [start, end) with start < end")
    if case["expected"] == "abstain" and any(u["grade"] >= 1 for u in relevant):
        raise TaskProblem("expected is abstain, yet a passage is graded relevant")
    try:
        turns = conversation(case)
    except ValueError as problem:
        raise TaskProblem(str(problem)) from None
    out = {key: case.get(key) for key in CASE_KEYS if key in case}
    out.update(turns)
    out["relevant"] = relevant
    out.setdefault("split", "dev")
    return out


# -- the regression dataset -------------------------------------------------------------------

def dataset_ids(path: Path) -> list[str]:
    """Case ids in the dataset, in file order (empty when the file does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_bytes().splitlines() if line.strip()]


def remove_cases(path: Path, case_ids: Iterable[str], *, dry_run: bool = False) -> int:
    """Erasure: rewrite the dataset without the cases ``case_ids`` (a case's id is the shown id
    of the trace it was sampled from); returns how many (would) go."""
    wanted = set(case_ids)
    if not wanted or not path.exists():
        return 0
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not line.strip() or json.loads(line)["id"] not in wanted]
    if len(kept) != len(lines) and not dry_run:
        write_private(path, b"".join(kept))
    return len(lines) - len(kept)


def append_cases(path: Path, cases: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Append the cases not in the dataset yet; returns (ids added, ids already present)."""
    known = set(dataset_ids(path))
    new = [c for c in cases if c["id"] not in known]
    present = [c["id"] for c in cases if c["id"] in known]
    if not new:
        return [], present
    new.sort(key=lambda c: ((c.get("origin") or {}).get("week") or "", c.get("tenant") or "", c["id"]))
    old = path.read_bytes() if path.exists() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    lines = "".join(json.dumps(c, sort_keys=True, ensure_ascii=False) + "\n" for c in new).encode()
    write_private(path, old + lines)  # redacted questions and labels: the owner's alone, whatever the umask
    return [c["id"] for c in new], present
