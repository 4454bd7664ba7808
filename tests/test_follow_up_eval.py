"""A labeled follow-up turn replayed with its history, end to end on the real Label Studio: tasks
made as the weekly batch makes them (a first turn, and a third turn with the two before it in the
task's `history`) -> a labeler's annotations through the API -> `labels pull` (Label Studio's own
export) -> `labels import` -> `labels questions` -> a candidate asked each question in its
conversation -> `ragmon eval` with the follow-ups apart, and a replay that dropped the history
failing."""

from __future__ import annotations

import json
import re
import uuid
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from ragmon.exporters.label_studio import LabelStudio as Client
from ragmon.monitor.app.cli import main
from ragmon.monitor.labeling.batch import LABEL_CONFIG, task_of
from ragmon.monitor.storage.store import make_engine, upgrade

pytestmark = pytest.mark.integration

PASSAGES = [{"id": "leave#1", "doc_id": "leave-policy", "doc_version": "3", "text": "Staff carry over five days."},
            {"id": "contractor-leave#1", "doc_id": "contractor-leave", "doc_version": "1",
             "text": "Contractors' vacation days do not carry over."},
            {"id": "contractor-expenses#1", "doc_id": "contractor-expenses", "doc_version": "2",
             "text": "Contractors invoice expenses monthly."}]
FIRST_QUESTION = "How many vacation days carry over?"
# The earlier turns of the third turn, as a sample keeps them (docs/sampling.md)
HISTORY = [{"turn": 1, "time": 1764410000.0, "trace_id": "t-first", "message": FIRST_QUESTION, "searched": [],
            "answer": "Five days carry over."},
           {"turn": 2, "time": 1764410040.0, "trace_id": "t-second", "message": "and for part-timers?",
            "searched": ["vacation days carry over for part-timers"], "answer": "The same five days."}]
SEARCHED = "vacation days carry over for contractors"


def sample(trace_id: str, query: str, turn: int, searched: str | None):
    retrieval = {"retriever": "vector", "passages": PASSAGES}
    if searched is not None:
        retrieval["query"] = searched
    payload = {"trace_id": trace_id, "time": 1764410100.0, "tenant": "acme", "query": query, "turn": turn,
               "conversation_id": "c-k3", "index": {"name": "handbook", "version": "2026-11"},
               "caller": {"id": "user:~k1", "groups": ["staff"]}, "retrievals": [retrieval],
               "answer": {"text": "See the handbook."}}
    return SimpleNamespace(trace_id=trace_id, payload=payload, tenant="acme", strata=["random"], split="dev",
                           week="2026-W48")


def batch_tasks() -> list[dict]:
    """The two tasks as the weekly batch pushes them; the follow-up's data carries its history and
    the queries searched for it (the interface the batch shares with import)."""
    first = task_of(sample("t-first", FIRST_QUESTION, 1, None))
    first["data"].update(history=[], searched=[])
    follow_up = task_of(sample("t-third", "and contractors?", 3, SEARCHED))
    follow_up["data"].update(history=HISTORY, searched=[SEARCHED])
    return [first, follow_up]


def annotation(task: dict, relevant_doc: str) -> list[dict]:
    result = [{"from_name": f"grade_{p['idx']}", "to_name": f"passage_{p['idx']}", "type": "choices",
               "value": {"choices": ["2" if p["doc_id"] == relevant_doc else "0"]}} for p in task["data"]["passages"]]
    return [*result, {"from_name": "answerable", "to_name": "question", "type": "choices",
                      "value": {"choices": ["answerable"]}}]


# The candidate: a keyword retriever over the handbook that ranks by the words of the question,
# then by the words of the conversation before it (its condense step), then by document id.
KEYWORDS = {"leave-policy": {"vacation", "days", "carry", "staff"}, "contractor-leave": {"vacation", "contractors"},
            "contractor-expenses": {"contractors", "expenses"}}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def candidate(question: dict) -> dict:
    asked = words(question["question"])
    earlier = set().union(*(words(turn["message"]) for turn in question["history"]))
    ranked = sorted(KEYWORDS, key=lambda doc: (-len(asked & KEYWORDS[doc]), -len(earlier & KEYWORDS[doc]), doc))
    searched = " ".join([*(turn["message"] for turn in question["history"]), question["question"]])
    return {"case_id": question["case_id"], "retrieved": [{"id": f"{doc}#9", "doc_id": doc} for doc in ranked],
            "history": question["history"], "searched": [searched] if question["history"] else []}


def ragmon(env: dict[str, str], *args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == code, f"ragmon {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


def test_a_labeled_follow_up_replays_with_its_history_through_eval(tmp_path, label_studio):
    project = f"follow-ups {uuid.uuid4().hex[:8]}"
    database = f"sqlite:///{tmp_path / 'ragmon.db'}"
    upgrade(make_engine(database))
    dataset = tmp_path / "regression" / "cases.jsonl"
    env = {"RAGMON_DATABASE__URL": database, "RAGMON_LABEL_STUDIO__URL": label_studio.url,
           "RAGMON_LABEL_STUDIO__TOKEN": label_studio.personal_access_token(),
           "RAGMON_LABEL_STUDIO__PROJECT": project, "RAGMON_REGRESSION__CASES": str(dataset)}
    with Client(label_studio.url, env["RAGMON_LABEL_STUDIO__TOKEN"]) as studio:
        project_id, _ = studio.ensure_project(project, LABEL_CONFIG)
        assert studio.import_tasks(project_id, batch_tasks()) == 2
        pushed = {t["data"]["case_id"]: t for t in studio.export(project_id)}
    with label_studio.api() as api:
        for case_id, relevant in (("t-first", "leave-policy"), ("t-third", "contractor-leave")):
            task = pushed[case_id]
            api.post(f"/api/tasks/{task['id']}/annotations",
                     json={"result": annotation(task, relevant)}).raise_for_status()

    export = tmp_path / "labels.json"
    ragmon(env, "labels", "pull", "--out", str(export))
    exported = {t["data"]["case_id"]: t for t in json.loads(export.read_text())}
    assert exported["t-third"]["data"]["history"] == HISTORY  # as Label Studio keeps and exports it
    imported = ragmon(env, "labels", "import", str(export))
    assert "2 cases added" in " ".join(imported.output.split())
    cases = {c["id"]: c for c in map(json.loads, dataset.read_text().splitlines())}
    assert cases["t-third"]["history"] == [
        {"message": FIRST_QUESTION, "answer": "Five days carry over."},
        {"message": "and for part-timers?", "answer": "The same five days.",
         "searched": ["vacation days carry over for part-timers"]}]
    assert cases["t-third"]["searched"] == [SEARCHED]
    # the weekly case carries each turn's number, as the sample's trace gave it
    assert (cases["t-first"]["turn"], cases["t-third"]["turn"]) == (1, 3)
    assert not {"history", "searched"} & set(cases["t-first"])
    assert [u["doc_id"] for u in cases["t-third"]["relevant"] if u["grade"] == 2] == ["contractor-leave"]

    questions_file = tmp_path / "questions.jsonl"
    ragmon(env, "labels", "questions", "--out", str(questions_file))
    questions = [json.loads(line) for line in questions_file.read_text().splitlines()]
    assert [(q["case_id"], len(q["history"])) for q in questions] == [("t-first", 0), ("t-third", 2)]

    # asked in its conversation, the follow-up finds the contractors' leave rule at the top
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(candidate(q)) + "\n" for q in questions))
    args = ["eval", "--cases", str(dataset), "--k", "1,3"]
    report = json.loads(ragmon(env, *args, "--run", str(run), "-o", "json",
                               "--fail-under", "turn:follow-up/recall@1=1").stdout)
    groups = report["groups"]
    assert list(groups)[:3] == ["all", "turn:first", "turn:follow-up"]
    assert groups["turn:first"]["answerable"] == groups["turn:follow-up"]["answerable"] == 1
    assert groups["turn:follow-up"]["metrics"]["recall@1"] == groups["turn:first"]["metrics"]["recall@1"] == 1.0
    assert report["mismatches"] == {} and report["failures"] == []
    table = ragmon(env, *args, "--run", str(run)).output
    assert "turn:follow-up" in table and "turn:first" in table

    # asked alone, it misses at 1; the run says so, and the gate fails on both counts
    alone = [candidate({**q, "history": []}) for q in questions]
    run.write_text("".join(json.dumps(line) + "\n" for line in alone))
    failed = ragmon(env, *args, "--run", str(run), "--fail-under", "turn:follow-up/recall@1=1", code=1)
    assert "FAIL 1 follow-up cases were replayed without their history, e.g. t-third" in failed.output
    assert "FAIL turn:follow-up/recall@1 = 0.0000 is under 1.0000" in failed.output
    assert "FAIL recall@1" not in failed.output and "FAIL turn:first" not in failed.output
