"""The labeling loop end to end, on SQLite and on the real PostgreSQL, with the real Label Studio:
simulator traffic -> samples -> weekly pull -> push -> a labeler's annotations through the API ->
labels pull -> import -> eval of the production run, and a failing --fail-under exits non-zero."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.simulate import Incident, Simulator
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.labels import dataset_ids
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.labeling.weeks import iso_week
from ragmon.monitor.storage.store import make_engine, upgrade

pytestmark = pytest.mark.integration


def feed(env: dict[str, str], events) -> None:
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    records = [RawRecord("file", msgspec.json.encode(e), privilege=Privilege.TRUSTED) for e in events]
    for start in range(0, len(records), 500):
        runtime.pipeline.process(records[start:start + 500])
    runtime.close()


def ragmon(env: dict[str, str], *args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == code, f"ragmon {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


def context_docs(payload: dict) -> list[str]:
    context = payload.get("context")
    if context is None:
        lists = payload.get("retrievals") or []
        context = lists[-1]["passages"] if lists else []
    return [p.get("doc_id") or p["id"] for p in context]


def labeler(task: dict, number: int, payload: dict) -> tuple[list[dict], str]:
    """A labeler's annotation, following a plan the test can score by hand: every fourth case is
    unanswerable; of the others, every third has its evidence outside what reached the model (a
    miss); the rest have it at the top of the context (a hit). Returns (result, kind)."""
    passages = task["data"]["passages"]
    in_context = set(context_docs(payload))
    outside = [p for p in passages if (p.get("doc_id") or p["id"]) not in in_context]
    grades = {p["idx"]: 0 for p in passages}
    if number % 4 == 3 or not in_context:
        kind = "unanswerable"
    elif number % 3 == 2 and outside:
        kind, grades[outside[0]["idx"]] = "miss", 2
    else:
        kind, grades[0] = "hit", 2  # candidates list the context first
    result = [{"from_name": f"grade_{i}", "to_name": f"passage_{i}", "type": "choices",
               "value": {"choices": [str(g)]}} for i, g in grades.items()]
    result.append({"from_name": "answerable", "to_name": "question", "type": "choices",
                   "value": {"choices": ["unanswerable" if kind == "unanswerable" else "answerable"]}})
    if kind != "unanswerable":
        result.append({"from_name": "reference_answer", "to_name": "question", "type": "textarea",
                       "value": {"text": ["See the handbook."]}})
    return result, kind


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ragmon.db'}"
    url = request.getfixturevalue("postgres").create_database(f"loop_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))  # what `ragmon db upgrade` does
    return url


TRAFFIC_SECONDS = 1500 + 90  # 1,500 traces at 1/s, and rephrases up to 90 s later


def one_week_start(start: float, seconds: float) -> float:
    """``start``, or three hours earlier when traffic from ``start`` would cross into the next ISO
    week (UTC): the test pulls one week, and on a Tuesday night its traffic starts on a Sunday night."""
    return start if iso_week(start) == iso_week(start + seconds) else start - 3 * 3600


def test_traffic_to_labeled_regression_set_to_eval_gate(tmp_path, label_studio, database_url):
    project = f"regression {uuid.uuid4().hex[:8]}"
    dataset = tmp_path / "regression" / "cases.jsonl"
    env = {"RAGMON_DATABASE__URL": database_url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_REDACTION__CALLER_KEY": "k" * 32, "RAGMON_SAMPLING__WEEKLY_CAP": "15",
           "RAGMON_LABEL_STUDIO__URL": label_studio.url,
           "RAGMON_LABEL_STUDIO__TOKEN": label_studio.personal_access_token(),
           "RAGMON_LABEL_STUDIO__PROJECT": project, "RAGMON_REGRESSION__CASES": str(dataset)}
    simulator = Simulator(seed=5, start=one_week_start(time.time() - 2 * 86400, TRAFFIC_SECONDS), rate=1.0, incidents=[
        Incident("leak", "globex", "handbook", start=200, end=1200, rate=0.2)])
    feed(env, [*simulator.catalog(), *simulator.traffic(1500)])
    store = SampleStore(make_engine(database_url))
    weeks = Counter(s.week for s in store.find())
    week = weeks.most_common(1)[0][0]
    batch = store.batch(week)
    assert len(batch) >= 40

    # the weekly pull, then the push (twice: the second imports nothing)
    ragmon(env, "samples", "pull", "--week", week, "--out", str(tmp_path / "batch"))
    pushed = ragmon(env, "samples", "push", "--week", week)
    assert f"{len(batch)} of {len(batch)} cases" in " ".join(pushed.output.split())
    again = ragmon(env, "samples", "push", "--week", week)
    assert f"0 of {len(batch)} cases" in " ".join(again.output.split())
    assert store.counts_by_status() == {"exported": len(batch)}

    # a labeler annotates every task but one; one annotation is incomplete
    payloads = {s.trace_id: s.payload for s in batch}
    kinds: dict[str, str] = {}
    with label_studio.api() as api:
        project_id = next(p["id"] for p in api.get("/api/projects", params={"title": project}).json()["results"])
        tasks = api.get(f"/api/projects/{project_id}/export",
                        params={"exportType": "JSON", "download_all_tasks": "true"}).json()
        tasks.sort(key=lambda t: t["data"]["case_id"])
        assert len(tasks) == len(batch)
        unlabeled, incomplete = tasks[0], tasks[1]
        for number, task in enumerate(tasks[2:]):
            result, kinds[task["data"]["case_id"]] = labeler(task, number, payloads[task["data"]["case_id"]])
            api.post(f"/api/tasks/{task['id']}/annotations", json={"result": result}).raise_for_status()
        partial = [r for r in labeler(incomplete, 0, payloads[incomplete["data"]["case_id"]])[0]
                   if r["from_name"] != "answerable"]
        api.post(f"/api/tasks/{incomplete['id']}/annotations", json={"result": partial}).raise_for_status()

    export = tmp_path / "labels.json"
    pulled = ragmon(env, "labels", "pull", "--out", str(export))
    assert f"{len(batch)} tasks" in pulled.output and f"{len(batch) - 1} annotated" in " ".join(pulled.output.split())

    # import: the incomplete task is reported by task and fails the command; the rest go in
    imported = ragmon(env, "labels", "import", str(export), code=1)
    text = " ".join(imported.output.split())
    assert f"task {incomplete['id']} (case {incomplete['data']['case_id']})" in text
    assert "not marked answerable or unanswerable" in text
    assert f"{len(kinds)} cases added" in text and "1 tasks not labeled yet" in text
    assert sorted(dataset_ids(dataset)) == sorted(kinds)
    first = dataset.read_bytes()
    ragmon(env, "labels", "import", str(export), code=1)  # the same export again: nothing added
    assert dataset.read_bytes() == first
    assert store.counts_by_status() == {"labeled": len(kinds), "exported": 2}
    assert {s.trace_id for s in store.find(status="exported")} == {unlabeled["data"]["case_id"],
                                                                   incomplete["data"]["case_id"]}

    cases = [json.loads(line) for line in first.splitlines()]
    assert cases == sorted(cases, key=lambda c: (c["tenant"], c["id"]))  # one week: ordered by tenant, id
    assert all(c["tenant"] == payloads[c["id"]]["tenant"] for c in cases)
    unanswerable = [c for c in cases if kinds[c["id"]] == "unanswerable"]
    assert all(c["expected"] == "abstain" and all(u["grade"] == 0 for u in c["relevant"]) for c in unanswerable)
    assert all(c["expected"] == "answer" and c["reference_answer"] == "See the handbook."
               for c in cases if kinds[c["id"]] != "unanswerable")
    assert all(c["origin"] == {"trace_id": c["id"], "week": week} for c in cases)

    # eval of what production retrieved: hits score 1, misses 0, so recall is the share of hits
    counts = Counter(kinds.values())
    assert counts["hit"] > 5 and counts["miss"] > 3 and counts["unanswerable"] > 5
    report = json.loads(ragmon(env, "eval", "--cases", str(dataset), "--run-from-store", "--k", "1,5",
                               "-o", "json").output)
    overall = report["groups"]["all"]
    share = counts["hit"] / (counts["hit"] + counts["miss"])
    assert overall["answerable"] == counts["hit"] + counts["miss"]
    assert overall["unanswerable"] == counts["unanswerable"]
    for metric in ("recall@1", "recall@5", "hit@5", "mrr@5", "ndcg@5"):
        assert overall["metrics"][metric] == pytest.approx(share)
    assert overall["metrics"]["precision@1"] == pytest.approx(share)
    assert overall["missing_runs"] == 0

    printed = ragmon(env, "eval", "--cases", str(dataset), "--run-from-store", "--k", "5").output
    assert "recall" in printed and "ndcg" in printed
    gate = f"recall@5={share + 0.01:.4f}"
    failed = ragmon(env, "eval", "--cases", str(dataset), "--run-from-store", "--fail-under", gate, code=1)
    assert "FAIL recall@5" in failed.output
    ragmon(env, "eval", "--cases", str(dataset), "--run-from-store", "--fail-under", f"recall@5={share - 0.01:.4f}")
