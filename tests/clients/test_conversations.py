"""Chats, turn by turn: LangChain's history-aware retriever and multi-query retriever, LlamaIndex's
condense-question and condense-plus-context chat engines, each for three turns of one conversation,
under OpenInference and OpenLLMetry, into `ragmon serve`. Every turn's trace keeps the user's
message as its query, each list the question its retriever was called with (as the app's own
retriever recorded it), and the conversation and turn number; lists, context, leaks and stale
passages are judged as for any trace."""

from __future__ import annotations

import pytest

from tests.clients.agreement import assert_agrees
from tests.clients.conftest import run_app
from tests.clients.plans import conversation_plan


def follow_ups_searched_rewrites(report: dict, shape: str) -> None:
    """The premise of the run, from the frameworks alone: the first turn searched the message
    itself and each follow-up something else (the condense step's or the expansions')."""
    turns = [q for q in report["questions"] if q["shape"] == shape]
    assert [q["turn"] for q in turns] == [1, 2, 3]
    first, *follow_ups = turns
    if shape in ("history-aware", "condense-question", "condense-plus-context"):
        assert first["searched"] == [first["question"]]
        assert all(q["searched"] != [q["question"]] and len(q["searched"]) == 1 for q in follow_ups)
    else:  # a multi-query retriever: three searches, then their union for the message
        assert all(len(q["searched"]) == 4 and q["searched"][-1] == q["question"] for q in turns)
        assert all(question != q["question"] for q in turns for question in q["searched"][:3])


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_langchain_history_aware_and_multi_query_chats(ragmon_servers, tmp_path, instrumentation):
    plan = conversation_plan(f"lcchat-{instrumentation[:5]}")
    run = run_app("langchain_chat_app", ragmon_servers, plan, tmp_path, options=("--instrumentation", instrumentation))
    expectations = assert_agrees(ragmon_servers, run)
    for shape in ("history-aware", "multi-query"):
        follow_ups_searched_rewrites(run.report, shape)
    # the multi-query turns: three lists of the searches, then the union the chain used, which is the context
    for q in run.report["questions"]:
        e = expectations[q["trace_id"]]
        assert (len(e.lists), e.context) == ((4, e.lists[3]) if q["shape"] == "multi-query" else (1, e.lists[0]))
    assert any(e.leaked_context for e in expectations.values())  # the payroll follow-up reached a staff caller


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_llamaindex_condense_question_and_condense_plus_context_chats(ragmon_servers, tmp_path, instrumentation):
    plan = conversation_plan(f"lichat-{instrumentation[:5]}")
    run = run_app("llamaindex_chat_app", ragmon_servers, plan, tmp_path, options=("--instrumentation", instrumentation))
    expectations = assert_agrees(ragmon_servers, run)
    for shape in ("condense-question", "condense-plus-context"):
        follow_ups_searched_rewrites(run.report, shape)
    # one retrieval a turn (LlamaIndex's nested retriever spans are one list), and it is the context
    assert all(len(e.lists) == 1 and e.context == e.lists[0] for e in expectations.values())
    assert any(e.leaked_context for e in expectations.values())  # the payroll follow-up reached a staff caller
