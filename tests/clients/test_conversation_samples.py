"""Conversation samples, end to end: a real LangChain history-aware chat (and its multi-query chat)
and a real LlamaIndex condense-question and condense-plus-context chat engine, three turns each,
into a real `ragmon serve` that samples every turn; the week pushed to a real Label Studio, whose
tasks show each turn's earlier turns (message, searched queries, answer), then the user's message
beside what was searched for it. Expected values come from the apps' own report: the messages
passed to the chat, what their retriever was called with, the answers the chains returned."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict

import pytest
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from ragmon.monitor.labeling.batch import LABEL_CONFIG
from tests.clients.agreement import samples_of, wait_for
from tests.clients.conftest import run_app
from tests.clients.plans import conversation_plan
from tests.ragmon_process import RagmonServer

EXPORT = "simple:protobuf"  # each span as it ends: the turns reach ragmon in the order they were asked


def distinct_searches(question: dict) -> list[str]:
    """What the app's retrievers searched for a turn other than the message, each once, in order."""
    seen: list[str] = []
    for searched in question["searched"]:
        if searched != question["question"] and searched not in seen:
            seen.append(searched)
    return seen


def expected_histories(questions: list[dict]) -> dict[str, list[dict]]:
    """For each turn's trace id, the turns of its conversation before it, as the app asked them."""
    by_conversation: dict[str, list[dict]] = defaultdict(list)
    for question in questions:
        by_conversation[question["conversation"]].append(question)
    histories = {}
    for turns in by_conversation.values():
        turns.sort(key=lambda q: q["turn"])
        for n, question in enumerate(turns):
            histories[question["trace_id"]] = [
                {"turn": q["turn"], "trace_id": q["trace_id"], "message": q["question"],
                 "searched": distinct_searches(q), "answer": q["answer"]} for q in turns[:n]]
    return histories


@pytest.fixture
def server(tmp_path, label_studio):
    project = f"conversations {uuid.uuid4().hex[:8]}"
    (tmp_path / "server").mkdir()
    server = RagmonServer(tmp_path / "server", RAGMON_SAMPLING__RATES='{"random": 1.0}',
                          RAGMON_LABEL_STUDIO__URL=label_studio.url,
                          RAGMON_LABEL_STUDIO__TOKEN=label_studio.personal_access_token(),
                          RAGMON_LABEL_STUDIO__PROJECT=project).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("app", "shapes"), [
    ("langchain_chat_app", {"history-aware", "multi-query"}),
    ("llamaindex_chat_app", {"condense-question", "condense-plus-context"}),
])
def test_each_turns_label_studio_task_shows_its_earlier_turns_and_what_was_searched(
        server, label_studio, tmp_path, app, shapes):
    plan = conversation_plan(f"convsample-{app[:5]}")
    run = run_app(app, {EXPORT: server}, plan, tmp_path, options=("--instrumentation", "openinference"))
    questions = run.report["questions"]
    assert {q["shape"] for q in questions} == shapes
    assert all(sorted(q["turn"] for q in questions if q["shape"] == shape) == [1, 2, 3] for shape in shapes)
    wait_for(server, plan["tenant"], len(questions))
    weeks = {json.loads(line)["week"] for line in CliRunner().invoke(
        main, ["samples", "list", "-o", "json", "--limit", "1000"], env=server.env).output.splitlines()}
    assert len(weeks) == 1
    [week] = weeks
    pushed = CliRunner().invoke(main, ["samples", "push", "--week", week], env=server.env)
    assert pushed.exit_code == 0, pushed.output

    with label_studio.api() as api:
        [project] = api.get("/api/projects", params={"title": server.env["RAGMON_LABEL_STUDIO__PROJECT"]}
                            ).json()["results"]
        tasks = api.get(f"/api/projects/{project['id']}/export",
                        params={"exportType": "JSON", "download_all_tasks": "true"}).json()
    assert project["label_config"].split() == LABEL_CONFIG.split()  # the config that shows them
    shown = {t["data"]["case_id"]: t["data"] for t in tasks}
    assert set(shown) == {q["trace_id"] for q in questions}

    histories = expected_histories(questions)
    follow_ups = 0
    for question in questions:
        data, where = shown[question["trace_id"]], f"{question['shape']} turn {question['turn']}"
        assert data["question"] == question["question"], where
        assert data["searched"] == distinct_searches(question), where
        assert data["searched_shown"] == ("\n".join(distinct_searches(question)) or "(the message as typed)"), where
        expected = histories[question["trace_id"]]
        assert [{key: turn[key] for key in ("turn", "trace_id", "message", "searched", "answer")}
                for turn in data["history"]] == expected, where
        assert data["history_shown"] == [
            {"message": f"Turn {turn['turn']}, the user: {turn['message']}",
             "searched": "Searched: " + ("\n".join(turn["searched"]) or "(the message as typed)"),
             "answer": f"Answered: {turn['answer']}"} for turn in expected], where
        assert data["case"]["history"] == data["history"] and data["case"]["turn"] == question["turn"], where
        follow_ups += bool(expected and data["searched"])
    assert follow_ups >= 4  # follow-ups whose searched query differs from the message, beside their history

    # a leaking turn makes its conversation a sample of the conversation stratum, with its history
    stored = samples_of(server, plan["tenant"])
    whole = [trace_id for trace_id, (strata, _) in stored.items() if "conversation" in strata]
    assert whole and all("permission_violation" in stored[trace_id][0] for trace_id in whole)
    assert all(stored[trace_id][1]["history"] == shown[trace_id]["history"] for trace_id in whole)
