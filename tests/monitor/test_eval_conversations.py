"""Cases with their conversation in ``ragmon eval`` (docs/evaluation.md): runs that replayed a
follow-up on another conversation than its case's, the files and the command. Follow-up turns
scored apart, floors on one group and drops per group are in test_evaluate.py."""

from __future__ import annotations

import json

import msgspec
import pytest
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from ragmon.monitor.labeling.evaluate import EarlierTurn, RunEntry, load_cases, load_runs
from ragmon.monitor.labeling.replay_check import mismatch_failures, mismatch_notes, mismatches
from tests.monitor.test_evaluate import EARLIER, conversation_set, retrieved


def test_a_run_replayed_on_another_conversation_is_named():
    cases, runs = conversation_set()
    assert mismatches(cases, runs) == {}
    lost = [runs[0], RunEntry(case_id="q2", retrieved=retrieved("b"), history=[]), runs[2], runs[3]]
    assert mismatches(cases, lost) == {"history_lost": ["q2"]}
    silent = [runs[0], RunEntry(case_id="q2", retrieved=retrieved("b")), runs[2], runs[3]]
    assert mismatches(cases, silent) == {"history_lost": ["q2"]}  # other lines tell theirs: this one lost it
    other = [EarlierTurn(message="How many vacation days carry over?", answer="Its own answer."),
             EarlierTurn(message="and for interns?")]
    differs = [RunEntry(case_id="q1", history=EARLIER[:1]), RunEntry(case_id="q2", history=other),
               RunEntry(case_id="q3", history=EARLIER), RunEntry(case_id="q4", history=[
                   EarlierTurn(message="How many vacation days carry over?", answer="Its own answer.")])]
    # q1 is a first turn given a history; q2 another message; q3's own history was not kept (no check);
    # q4 the same message with another answer: a system replayed turn by turn gives its own
    assert mismatches(cases, differs) == {"history_differs": ["q1", "q2"]}
    assert mismatch_failures(mismatches(cases, differs)) == [
        "2 cases were replayed on another conversation than their history, e.g. q1, q2"]
    stray = [*runs, RunEntry(case_id="q9"), RunEntry(case_id="q1"), RunEntry(case_id="q9")]
    found = mismatches(cases, stray)
    assert found == {"unknown_cases": ["q9"], "duplicate_runs": ["q1"]}
    assert mismatch_failures(found) == []
    assert mismatch_notes(found) == [
        "1 run lines name a case the cases file does not hold (not scored), e.g. q9",
        "1 cases have more than one run line (the last one is scored), e.g. q1"]


def test_runs_that_say_nothing_of_histories_are_not_checked():
    cases, runs = conversation_set()
    quiet = [RunEntry(case_id=r.case_id, retrieved=r.retrieved, abstained=r.abstained) for r in runs]
    assert mismatches(cases, quiet) == {}


def test_case_and_run_files_carry_the_conversation_and_bad_shapes_are_named():
    case = load_cases(json.dumps({"id": "q2", "turn": 3, "searched": ["carry over contractors"], "history": [
        {"turn": 1, "time": 1.0, "trace_id": "t0", "message": "How many?", "searched": [], "answer": None}]}
    ).encode())[0]
    assert case.follow_up and case.history == [EarlierTurn(message="How many?")] and case.searched == [
        "carry over contractors"]
    assert not load_cases(b'{"id": "q1", "turn": 1}\n')[0].follow_up
    run = load_runs(b'{"case_id": "q2", "history": [{"message": "How many?"}], "searched": ["contractors"]}\n')[0]
    assert run.history == [EarlierTurn(message="How many?")] and run.searched == ["contractors"]
    assert load_runs(b'{"case_id": "q2"}\n')[0].history is None
    bad_lines = ((b'{"id": "q1", "turn": 0}', "line 1: not a valid case: Expected `int` >= 1 - at `$.turn`"),
                 (b'{"id": "q1", "history": [{"answer": "x"}]}',
                  "line 1: not a valid case: Object missing required field `message` - at `$.history[0]`"),
                 (b'{"id": "q1", "history": "and for part-timers?"}', "line 1: not a valid case"))
    for line, error in bad_lines:
        with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("$", r"\$")):
            load_cases(line + b"\n")
    with pytest.raises(ValueError, match="line 1: not a valid run entry"):
        load_runs(b'{"case_id": "q1", "searched": "contractors"}\n')


def write(path, items) -> str:
    path.write_bytes(b"".join(msgspec.json.encode(item) + b"\n" for item in items))
    return str(path)


def test_the_eval_command_shows_follow_ups_and_fails_a_run_that_lost_a_history(tmp_path):
    cases, runs = conversation_set()
    args = ["eval", "--cases", write(tmp_path / "cases.jsonl", cases), "--k", "1,2"]
    table = CliRunner().invoke(main, [*args, "--run", write(tmp_path / "run.jsonl", runs)])
    assert table.exit_code == 0, table.output
    assert "turn:follow-up" in table.output and "turn:first" in table.output
    floor = CliRunner().invoke(main, [*args, "--run", str(tmp_path / "run.jsonl"), "--fail-under",
                                      "turn:follow-up/recall@2=0.6", "--fail-under", "recall@2=0.6"])
    assert floor.exit_code == 1 and "FAIL turn:follow-up/recall@2 = 0.5000 is under 0.6000" in floor.output
    assert "FAIL recall@2" not in floor.output
    lost = [runs[0], RunEntry(case_id="q2", retrieved=retrieved("b"), history=[]), *runs[2:],
            RunEntry(case_id="q7")]
    report = CliRunner().invoke(main, [*args, "--run", write(tmp_path / "lost.jsonl", lost), "-o", "json"])
    assert report.exit_code == 1
    assert "FAIL 1 follow-up cases were replayed without their history, e.g. q2" in report.output
    assert "warning: 1 run lines name a case the cases file does not hold (not scored), e.g. q7" in report.output
    body = json.loads(report.stdout)
    assert body["mismatches"] == {"unknown_cases": ["q7"], "history_lost": ["q2"]}
    assert body["failures"] == ["1 follow-up cases were replayed without their history, e.g. q2"]
    assert body["groups"]["turn:follow-up"]["metrics"]["recall@1"] == 1.0  # scored all the same


def test_the_questions_carry_the_conversation_and_none_of_the_labels(tmp_path):
    from ragmon.monitor.labeling.questions import question_of, questions

    follow_up = {"id": "q2", "question": "and contractors?", "tenant": "acme", "caller_groups": ["staff"],
                 "corpus": {"index": "handbook", "version": None}, "split": "heldout", "turn": 3,
                 "history": [{"message": "How many?", "answer": "Five.", "searched": ["carry over days"]},
                             {"message": "and for part-timers?"}],
                 "searched": ["carry over contractors"], "expected": "answer", "relevant": [{"doc_id": "b"}],
                 "reference_answer": "None carry over.", "claims": [], "tags": ["random"], "origin": {"week": "w"}}
    assert question_of(follow_up) == {
        "case_id": "q2", "question": "and contractors?", "turn": 3, "tenant": "acme", "caller_groups": ["staff"],
        "corpus": {"index": "handbook", "version": None}, "split": "heldout",
        "history": [{"message": "How many?", "answer": "Five."}, {"message": "and for part-timers?"}]}
    first = {"id": "q1", "question": "How many?", "expected": "answer", "relevant": [{"doc_id": "a"}]}
    assert question_of(first) == {"case_id": "q1", "question": "How many?", "history": []}
    assert [q["case_id"] for q in questions([first, follow_up], ["heldout"])] == ["q2"]
    assert [q["case_id"] for q in questions([first, follow_up], ["dev"])] == ["q1"]  # split defaults to dev
    with pytest.raises(ValueError, match="history\\[0\\]: `message` is missing"):
        question_of({**follow_up, "history": [{"answer": "Five."}]})

    dataset = tmp_path / "cases.jsonl"
    dataset.write_text(json.dumps(first) + "\n\n" + json.dumps(follow_up) + "\n")
    out = tmp_path / "questions.jsonl"
    written = CliRunner().invoke(main, ["labels", "questions", "--dataset", str(dataset), "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert "2 questions in" in written.output and "1 with the turns before them" in " ".join(written.output.split())
    assert [json.loads(line) for line in out.read_text().splitlines()] == [question_of(first), question_of(follow_up)]
    assert out.stat().st_mode & 0o777 == 0o600
    dataset.write_text(json.dumps(first) + "\n" + json.dumps({**follow_up, "history": "and?"}) + "\n")
    refused = CliRunner().invoke(main, ["labels", "questions", "--dataset", str(dataset), "--out", str(out)])
    assert refused.exit_code == 1 and "line 2: `history` is not a list of turns" in refused.output
