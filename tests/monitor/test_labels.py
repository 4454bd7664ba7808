"""Label import without Label Studio: annotations and filled cases to regression cases, problems by
task, the dataset appended in a stable order, runs built from stored traces."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ragmon.monitor.core.signals.outcome import compile_refusals
from ragmon.monitor.labeling.batch import TaskProblem, labeled_case
from ragmon.monitor.labeling.evaluate import Case, Origin
from ragmon.monitor.labeling.labels import append_cases, dataset_ids, filled_case, read_labeled
from ragmon.monitor.labeling.production_runs import production_run, run_entry

PASSAGES = [{"idx": 0, "id": "c1", "doc_id": "d1", "doc_version": "v1", "span": [0, 40], "text": "a"},
            {"idx": 1, "id": "c2", "doc_id": None, "doc_version": None, "span": None, "text": "b"}]
CASE = {"id": "t1", "question": "q", "tenant": "acme", "caller_groups": ["staff"],
        "corpus": {"index": "handbook", "version": None}, "expected": None, "relevant": [], "reference_answer": None,
        "claims": [], "tags": ["random"], "split": "dev", "origin": {"trace_id": "t1", "week": "2026-W48"}}


def choice(name: str, value: str, to: str = "question") -> dict:
    return {"from_name": name, "to_name": to, "type": "choices", "value": {"choices": [value]}}


def task(*annotations, task_id: int = 7, case: dict | None = None) -> dict:
    return {"id": task_id, "data": {"case_id": (case or CASE)["id"], "passages": PASSAGES, "case": case or CASE},
            "annotations": list(annotations)}


def annotation(*result, cancelled=False, updated="2026-11-30T10:00:00Z", number=1) -> dict:
    return {"id": number, "result": list(result), "was_cancelled": cancelled, "updated_at": updated}


GOOD = annotation(choice("grade_0", "2", "passage_0"), choice("grade_1", "0", "passage_1"),
                  choice("answerable", "answerable"),
                  {"from_name": "reference_answer", "to_name": "question", "type": "textarea",
                   "value": {"text": ["Thirty days."]}})


def test_an_annotation_becomes_a_case_with_graded_units_located_in_the_source():
    case = labeled_case(task(GOOD))
    assert case["expected"] == "answer" and case["reference_answer"] == "Thirty days."
    assert case["relevant"] == [{"doc_id": "d1", "grade": 2, "doc_version": "v1", "span": [0, 40]},
                                {"doc_id": "c2", "grade": 0}]  # reviewed-irrelevant kept; no doc id: the passage id
    assert {k: case[k] for k in ("tenant", "split", "origin", "tags")} == {
        "tenant": "acme", "split": "dev", "origin": {"trace_id": "t1", "week": "2026-W48"}, "tags": ["random"]}


def test_the_newest_submitted_annotation_wins_and_skips_are_not_labels():
    older = annotation(choice("grade_0", "0", "passage_0"), choice("grade_1", "0", "passage_1"),
                       choice("answerable", "unanswerable"), updated="2026-11-29T10:00:00Z", number=2)
    skipped = annotation(cancelled=True, updated="2026-12-01T10:00:00Z", number=3)
    assert labeled_case(task(older, GOOD, skipped))["expected"] == "answer"
    assert labeled_case(task(skipped)) is None
    assert labeled_case(task()) is None


@pytest.mark.parametrize("result, message", [
    ([choice("grade_0", "2", "passage_0"), choice("grade_1", "0", "passage_1")], "not marked answerable"),
    ([choice("grade_0", "2", "passage_0"), choice("answerable", "answerable")], "passage 1 (c2) has no grade"),
    ([choice("grade_0", "3", "passage_0"), choice("grade_1", "0", "passage_1"), choice("answerable", "answerable")],
     "grade ['3'] is not one of 0, 1, 2"),
    ([choice("grade_0", "1", "passage_0"), choice("grade_1", "0", "passage_1"), choice("answerable", "unanswerable")],
     "marked unanswerable, yet a passage is graded relevant"),
])
def test_incomplete_or_contradictory_annotations_are_problems(result, message):
    with pytest.raises(TaskProblem, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        labeled_case(task(annotation(*result)))


def test_a_file_reports_problems_by_task_and_keeps_the_good_ones():
    other = {**CASE, "id": "t2", "origin": {"trace_id": "t2", "week": "2026-W48"}}
    nothing_relevant = annotation(choice("grade_0", "0", "passage_0"), choice("grade_1", "0", "passage_1"),
                                  choice("answerable", "answerable"))
    export = [task(GOOD), task(nothing_relevant, task_id=8, case=other), {"id": 9, "data": {"case_id": "x"}},
              task(task_id=10, case={**CASE, "id": "t3"}), task(GOOD, task_id=11)]
    reviewed = read_labeled(json.dumps(export).encode())
    assert [c["id"] for c in reviewed.cases] == ["t1"] and reviewed.unlabeled == 1
    assert [(p.where, p.message.split(",")[0]) for p in reviewed.problems] == [
        ("task 8 (case t2)", "answerable"),
        ("task 9 (case x)", "not a ragmon task (data.case or data.passages missing)"),
        ("task 11 (case t1)", "the same case appears twice in the file; the first is kept")]
    assert read_labeled(b"[not json").problems[0].message.startswith("not valid JSON")


def test_a_filled_jsonl_grades_candidates_in_place_or_lists_relevant_units():
    lines = [
        {**CASE, "expected": "answer", "candidates": [{"id": "c1", "doc_id": "d1", "grade": 2}, {"id": "c9"}]},
        {**CASE, "id": "t2", "expected": "abstain"},
        {**CASE, "id": "t3", "expected": "answer", "relevant": [{"doc_id": "d7"}]},
        {**CASE, "id": "t4"},  # not labeled yet
        {**CASE, "id": "t5", "expected": "maybe"},
        {**CASE, "id": "t6", "expected": "answer", "relevant": [{"doc_id": "d7", "span": [9, 3]}]},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode() + b"\n{oops\n"
    reviewed = read_labeled(data)
    assert [c["id"] for c in reviewed.cases] == ["t1", "t2", "t3"] and reviewed.unlabeled == 1
    assert reviewed.cases[0]["relevant"] == [{"doc_id": "d1", "grade": 2}] and "candidates" not in reviewed.cases[0]
    assert reviewed.cases[2]["relevant"] == [{"doc_id": "d7", "grade": 1}]  # grade defaults to 1
    assert [(p.where, p.message[:20]) for p in reviewed.problems] == [
        ("line 5 (case t5)", "`expected` is 'maybe"), ("line 6 (case t6)", "relevant[0]: span [9"),
        ("line 7", "not valid JSON: Expe")]
    with pytest.raises(TaskProblem, match="`id` is missing"):
        filled_case({"expected": "answer"})


def test_the_dataset_grows_in_a_stable_order_without_duplicates(tmp_path):
    path = tmp_path / "set" / "cases.jsonl"

    def case(case_id, week, tenant="acme"):
        return {"id": case_id, "tenant": tenant, "origin": {"week": week}, "expected": "abstain", "relevant": []}

    assert append_cases(path, [case("b", "2026-W48"), case("a", "2026-W48", "zeta"), case("c", "2026-W47")]) == (
        ["c", "b", "a"], [])
    before = path.read_bytes()
    assert append_cases(path, [case("a", "2026-W48"), case("d", "2026-W49")]) == (["d"], ["a"])
    assert path.read_bytes().startswith(before)  # existing lines untouched
    assert dataset_ids(path) == ["c", "b", "a", "d"]
    assert append_cases(path, [case("d", "2026-W49")]) == ([], ["d"])
    assert [p.name for p in path.parent.iterdir()] == ["cases.jsonl"]  # no temporary file left


def test_the_regression_set_is_the_owners_alone_whatever_the_umask(tmp_path):
    """Its cases hold redacted questions and labels: the folder made for it is 0700, the file 0600,
    as every file of ragmon's that holds what it keeps about people (docs/sampling.md)."""
    path = tmp_path / "ragmon-data" / "regression" / "cases.jsonl"
    case = {"id": "c1", "tenant": "acme", "origin": {"week": "2026-W48"}, "expected": "abstain", "relevant": []}
    previous = os.umask(0o022)
    try:
        append_cases(path, [case])
        path.chmod(0o644)  # loosened by hand: the next import makes it private again
        append_cases(path, [{**case, "id": "c2"}])
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


def test_runs_from_stored_traces_take_the_context_or_a_retrievers_list():
    payload = {"trace_id": "t1", "time": 1.0, "query": "q", "index": {"name": "handbook"},
               "retrievals": [{"retriever": "bm25", "passages": [{"id": "b1", "doc_id": "d1", "span": [0, 9]}]},
                              {"retriever": "vector", "passages": [{"id": "v1"}, {"id": "v2", "doc_id": "d2"}]}],
               "answer": {"text": "I don't know."}}
    refusals = compile_refusals([r"\bI don't know\b"])
    entry = run_entry("case", payload, "context", refusals)
    assert [(i.id, i.document) for i in entry.retrieved] == [("v1", "v1"), ("v2", "d2")] and entry.abstained
    bm25 = run_entry("case", payload, "bm25", None)
    assert [(i.id, i.span) for i in bm25.retrieved] == [("b1", (0, 9))] and not bm25.abstained
    assert run_entry("case", payload, "nope", None).retrieved == []
    cases = [Case(id="c1", origin=Origin(trace_id="t1")), Case(id="t1"), Case(id="c3", origin=Origin("gone"))]
    runs, missing = production_run(cases, {"t1": payload}, "context", None)
    assert [r.case_id for r in runs] == ["c1", "t1"] and missing == ["c3"]


# -- cases with their conversation (docs/evaluation.md) ------------------------------------------

# The earlier turns as a sample keeps them (docs/sampling.md), in the task data and the weekly cases.
HISTORY = [{"turn": 1, "time": 1764410000.0, "trace_id": "t0", "message": "How many vacation days carry over?",
            "searched": [], "answer": "Five days carry over."},
           {"turn": 2, "time": 1764410060.0, "trace_id": "t0b", "message": "and for part-timers?",
            "searched": ["vacation carry over part-time staff"], "answer": None}]
CONDENSED = [{"message": "How many vacation days carry over?", "answer": "Five days carry over."},
             {"message": "and for part-timers?", "searched": ["vacation carry over part-time staff"]}]


def follow_up_task(history=HISTORY, searched=("vacation carry over contractors",), **case) -> dict:
    labeled = task(GOOD, case={**CASE, "turn": 3, **case})
    labeled["data"].update(question="and contractors?", history=history, searched=list(searched))
    return labeled


def test_a_follow_up_task_keeps_its_history_turn_and_searched_queries():
    case = labeled_case(follow_up_task())
    assert case["history"] == CONDENSED  # no time or trace id: what a candidate needs to be asked again
    assert case["turn"] == 3 and case["searched"] == ["vacation carry over contractors"]
    assert case["expected"] == "answer" and case["relevant"][0]["grade"] == 2
    first = labeled_case(follow_up_task(history=[], searched=(), turn=1))
    assert "history" not in first and "searched" not in first and first["turn"] == 1
    assert not {"history", "turn", "searched"} & set(labeled_case(task(GOOD)))  # as before conversations


def test_the_tasks_history_wins_over_the_one_its_case_carries():
    stale = [{"message": "something else", "answer": None}]
    both = follow_up_task(history=HISTORY)
    both["data"]["case"]["history"] = stale
    assert labeled_case(both)["history"] == CONDENSED
    from_case = follow_up_task(history=HISTORY)
    del from_case["data"]["history"]
    from_case["data"]["case"]["history"] = HISTORY  # the weekly pull's case alone carries it
    assert labeled_case(from_case)["history"] == CONDENSED


@pytest.mark.parametrize("history, searched, turn, message", [
    ({"message": "x"}, [], 3, "`history` is not a list of turns"),
    ([HISTORY[0], "and for part-timers?"], [], 3, "history[1] is not an object"),
    ([{**HISTORY[0], "message": None}], [], 3, "history[0]: `message` is missing or not text"),
    ([{**HISTORY[0], "answer": ["Five"]}], [], 3, "history[0]: `answer` is not text"),
    ([{**HISTORY[0], "searched": "carry over"}], [], 3, "`history[0].searched` is not a list of texts"),
    (HISTORY, [7], 3, "`searched` is not a list of texts"),
    (HISTORY, [], 0, "`turn` is 0, not a whole number from 1 to 1000000"),
    (HISTORY, [], "3", "`turn` is '3', not a whole number from 1 to 1000000"),
])
def test_a_malformed_conversation_is_a_problem_naming_the_task(history, searched, turn, message):
    export = [follow_up_task(history=history, searched=searched, turn=turn), task(GOOD, task_id=8,
                                                                               case={**CASE, "id": "t2"})]
    reviewed = read_labeled(json.dumps(export).encode())
    assert [(p.where, p.message) for p in reviewed.problems] == [("task 7 (case t1)", message)]
    assert [c["id"] for c in reviewed.cases] == ["t2"]  # one bad task never stops the others


def test_a_filled_weekly_case_keeps_its_history_in_the_cases_shape():
    line = {**CASE, "expected": "answer", "relevant": [{"doc_id": "d1"}], "history": HISTORY, "turn": 3,
            "searched": ["vacation carry over contractors"]}
    case = filled_case(line)
    assert (case["history"], case["turn"], case["searched"]) == (CONDENSED, 3, ["vacation carry over contractors"])
    assert "history" not in filled_case({**line, "history": [], "turn": None, "searched": []})
    with pytest.raises(TaskProblem, match="history\\[1\\]: `message` is missing"):
        filled_case({**line, "history": [HISTORY[0], {"answer": "?"}]})
    reviewed = read_labeled(json.dumps({**line, "turn": True}).encode() + b"\n")
    assert [(p.where, p.message) for p in reviewed.problems] == [
        ("line 1 (case t1)", "`turn` is True, not a whole number from 1 to 1000000")]


def test_a_run_from_a_stored_follow_up_carries_its_history_and_what_was_searched():
    payload = {"trace_id": "t1", "time": 1.0, "query": "and contractors?", "index": {"name": "handbook"},
               "turn": 3, "history": HISTORY,
               "retrievals": [{"retriever": "bm25", "query": "vacation carry over contractors",
                               "passages": [{"id": "b1"}]},
                              {"retriever": "vector", "query": "vacation carry over contractors", "passages": []},
                              {"retriever": "fused", "query": "and contractors?", "passages": []}]}
    entry = run_entry("t1", payload, "bm25", None)
    assert [(t.message, t.answer, t.searched) for t in entry.history] == [
        ("How many vacation days carry over?", "Five days carry over.", []),
        ("and for part-timers?", None, ["vacation carry over part-time staff"])]
    assert entry.searched == ["vacation carry over contractors"]  # distinct, and not the message itself
    before = {key: value for key, value in payload.items() if key != "history"}  # stored before histories
    assert run_entry("t1", before, "bm25", None).history is None  # the run does not say
    assert run_entry("t1", {**payload, "history": []}, "bm25", None).history == []
