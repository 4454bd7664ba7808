"""The weekly batch for labeling (docs/sampling.md): cases in the test-set schema with empty labels, and the
same cases as Label Studio tasks with a labeling config that grades each passage 0/1/2 and marks
the question answerable or not, with a reference answer. A chat turn's task shows the earlier turns
of its conversation first, then the user's message beside what was searched for it, then the
passages: a follow-up ("and for contractors?") cannot be graded without them.

Everything here is built from stored samples, which are redacted already.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragmon.monitor.core.private_files import private_dir, write_private
from ragmon.monitor.labeling.case_history import CONVERSATION_KEYS, conversation
from ragmon.monitor.labeling.conversation import searched_of

LABEL_CONFIG = """<View>
  <Header value="Earlier turns of the conversation, oldest first"/>
  <Repeater on="$history_shown" indexFlag="{{turn}}">
    <View style="display: flex; gap: 1em">
      <View style="flex: 1">
        <Text name="earlier_message_{{turn}}" value="$history_shown[{{turn}}].message"/>
      </View>
      <View style="flex: 1">
        <Text name="earlier_searched_{{turn}}" value="$history_shown[{{turn}}].searched"/>
      </View>
    </View>
    <Text name="earlier_answer_{{turn}}" value="$history_shown[{{turn}}].answer"/>
  </Repeater>
  <View style="display: flex; gap: 1em">
    <View style="flex: 1">
      <Header value="Question: the user's message"/>
      <Text name="question" value="$question"/>
    </View>
    <View style="flex: 1">
      <Header value="What was searched for it"/>
      <Text name="searched" value="$searched_shown"/>
    </View>
  </View>
  <Header value="What the system answered"/>
  <Text name="answer" value="$answer"/>
  <Header value="Grade each passage: 0 irrelevant, 1 partly relevant, 2 answers the question"/>
  <Repeater on="$passages" indexFlag="{{idx}}">
    <Text name="passage_{{idx}}" value="$passages[{{idx}}].text"/>
    <Choices name="grade_{{idx}}" toName="passage_{{idx}}" choice="single" showInline="true" required="true">
      <Choice value="0"/>
      <Choice value="1"/>
      <Choice value="2"/>
    </Choices>
  </Repeater>
  <Header value="Can the question be answered from the corpus?"/>
  <Choices name="answerable" toName="question" choice="single" showInline="true" required="true">
    <Choice value="answerable"/>
    <Choice value="unanswerable"/>
  </Choices>
  <Header value="Reference answer (when answerable)"/>
  <TextArea name="reference_answer" toName="question" rows="3" maxSubmissions="1"/>
</View>
"""


def candidates(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The distinct passages a labeler grades: the context first, then the other candidates, each
    once, with what locates it in its source (document, version, span)."""
    lists = [trace.get("context") or []] + [r.get("passages") or [] for r in trace.get("retrievals") or []]
    seen: dict[str, dict[str, Any]] = {}
    for passages in lists:
        for passage in passages:
            known = seen.setdefault(passage["id"], {"id": passage["id"]})
            for key in ("doc_id", "doc_version", "span", "text"):
                if passage.get(key) is not None and known.get(key) is None:
                    known[key] = passage[key]
    return list(seen.values())


def searched(trace: dict[str, Any]) -> list[str]:
    """The graded turn's distinct searched queries other than its message (redacted, as stored)."""
    return searched_of(trace.get("query", ""), (r.get("query") for r in trace.get("retrievals") or []))


def case_of(sample) -> dict[str, Any]:
    """A regression case with empty labels, from a stored sample; ``history``: the earlier turns of
    its conversation as the sample holds them (docs/sampling.md, "Conversation samples")."""
    trace = sample.payload
    return {
        "id": sample.trace_id,
        "question": trace.get("query", ""),
        "tenant": sample.tenant,
        "caller_groups": (trace.get("caller") or {}).get("groups", []),
        "corpus": {"index": trace["index"]["name"], "version": trace["index"].get("version")},
        "expected": None,
        "relevant": [],
        "reference_answer": None,
        "claims": [],
        "tags": sorted(sample.strata),
        "split": sample.split,
        "origin": {"trace_id": sample.trace_id, "week": sample.week},
        "candidates": candidates(trace),
        "turn": trace.get("turn"),
        "history": trace.get("history") or [],
    }


def task_of(sample) -> dict[str, Any]:
    """A Label Studio task for the labeling config above. ``data.case`` carries the empty case, so
    an export alone is enough to build the labeled case (no lookup in ragmon's store)."""
    trace = sample.payload
    case = case_of(sample)
    passages = [{"idx": i, "text": p.get("text") or f"({p['id']}: no text recorded)", "id": p["id"],
                 "doc_id": p.get("doc_id"), "doc_version": p.get("doc_version"), "span": p.get("span")}
                for i, p in enumerate(case.pop("candidates"))]
    answer = (trace.get("answer") or {}).get("text") or "(no answer recorded)"
    queries = searched(trace)
    return {"data": {"case_id": sample.trace_id, "question": case["question"], "answer": answer,
                     "passages": passages, "case": case, "history": case["history"], "searched": queries,
                     "history_shown": [_shown_turn(turn) for turn in case["history"]],
                     "searched_shown": _shown_searched(queries)}}


def _shown_turn(turn: dict[str, Any]) -> dict[str, str]:
    """An earlier turn as the labeling config shows it: texts only (Label Studio's Text tag)."""
    number = f"Turn {turn['turn']}" if turn.get("turn") is not None else "Earlier turn"
    return {"message": f"{number}, the user: {turn['message']}",
            "searched": "Searched: " + _shown_searched(turn.get("searched") or []),
            "answer": f"Answered: {turn.get('answer') or '(no answer recorded)'}"}


def _shown_searched(queries: list[str]) -> str:
    return "\n".join(queries) if queries else "(the message as typed)"


def write_batch(batch: Sequence, out_dir: Path) -> None:
    """The batch as ``cases.jsonl``, ``tasks.json`` and ``label-config.xml`` in ``out_dir``; the
    same batch always gives the same bytes."""
    private_dir(out_dir)
    write_private(out_dir / "cases.jsonl",
                  "".join(json.dumps(case_of(s), sort_keys=True) + "\n" for s in batch).encode())
    write_private(out_dir / "tasks.json",
                  (json.dumps([task_of(s) for s in batch], indent=1, sort_keys=True) + "\n").encode())
    write_private(out_dir / "label-config.xml", LABEL_CONFIG.encode())


def erase_from_batches(batch_dir: Path, case_ids: Iterable[str], *, dry_run: bool = False) -> int:
    """Erasure: rewrite every weekly batch under ``batch_dir`` (``WEEK[-TENANT]/cases.jsonl`` and
    ``tasks.json``) without the cases ``case_ids``; returns how many cases (would) go."""
    wanted = set(case_ids)
    if not wanted or not batch_dir.is_dir():
        return 0
    removed = 0
    for cases_file in sorted(batch_dir.glob("*/cases.jsonl")):
        lines = cases_file.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if json.loads(line)["id"] not in wanted]
        removed += len(lines) - len(kept)
        tasks_file = cases_file.with_name("tasks.json")
        tasks = json.loads(tasks_file.read_bytes()) if tasks_file.exists() else []
        kept_tasks = [task for task in tasks if task["data"]["case_id"] not in wanted]
        if dry_run:
            continue
        if len(kept) != len(lines):
            write_private(cases_file, b"".join(kept))
        if len(kept_tasks) != len(tasks):
            write_private(tasks_file, (json.dumps(kept_tasks, indent=1, sort_keys=True) + "\n").encode())
    return removed


class TaskProblem(ValueError):
    """A task whose annotation cannot become a case; the message says what is wrong."""


def labeled_case(task: dict[str, Any]) -> dict[str, Any] | None:
    """The regression case a labeler's annotation of ``task`` (from a Label Studio export) makes,
    or None when the task has no submitted annotation yet. The newest submitted annotation wins;
    skipped (cancelled) ones are not labels. A follow-up turn's case keeps its conversation
    (``history``, ``turn``, ``searched``: docs/evaluation.md). Raises :class:`TaskProblem`."""
    data = task.get("data") or {}
    case = data.get("case")
    passages = data.get("passages")
    if not isinstance(case, dict) or not isinstance(passages, list):
        raise TaskProblem("not a ragmon task (data.case or data.passages missing)")
    submitted = [a for a in task.get("annotations") or [] if not a.get("was_cancelled")]
    if not submitted:
        return None
    newest = max(submitted, key=lambda a: (a.get("updated_at") or "", a.get("id") or 0))
    choices, texts = {}, {}
    for region in newest.get("result") or []:
        value = region.get("value") or {}
        if "choices" in value:
            choices[region.get("from_name")] = value["choices"]
        elif "text" in value:
            texts[region.get("from_name")] = value["text"]
    answerable = choices.get("answerable")
    if answerable not in (["answerable"], ["unanswerable"]):
        raise TaskProblem("the question is not marked answerable or unanswerable")
    relevant = []
    for passage in passages:
        grade = choices.get(f"grade_{passage['idx']}")
        if grade is None:
            raise TaskProblem(f"passage {passage['idx']} ({passage['id']}) has no grade")
        if grade not in (["0"], ["1"], ["2"]):
            raise TaskProblem(f"passage {passage['idx']} ({passage['id']}): grade {grade!r} is not one of 0, 1, 2")
        unit = {"doc_id": passage.get("doc_id") or passage["id"], "grade": int(grade[0])}
        for key in ("doc_version", "span"):
            if passage.get(key) is not None:
                unit[key] = passage[key]
        relevant.append(unit)
    reference = " ".join(t.strip() for t in texts.get("reference_answer", []) if t.strip()) or None
    if answerable == ["unanswerable"] and any(u["grade"] >= 1 for u in relevant):
        raise TaskProblem("marked unanswerable, yet a passage is graded relevant")
    try:  # a follow-up keeps its conversation: the task's history and searched queries, else the case's
        turns = conversation(data, case)
    except ValueError as problem:
        raise TaskProblem(str(problem)) from None
    kept = {key: value for key, value in case.items() if key not in CONVERSATION_KEYS}
    return {**kept, **turns, "expected": "answer" if answerable == ["answerable"] else "abstain",
            "relevant": relevant, "reference_answer": reference}
