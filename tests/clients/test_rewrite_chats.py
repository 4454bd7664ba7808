"""The rewrite signal on a real LangChain chat: ``create_history_aware_retriever`` whose condense
model (a fake chat model answering scripted rewrites) drops the conversation's entity on the second
turn and returns the chat history as text on the third, beside a ``MultiQueryRetriever`` chat whose
every search keeps a word of its message. The expected counts come from the plan and from what the
app's own retriever was called with, never from ragmon."""

from __future__ import annotations

import pytest

from tests.clients.agreement import wait_for
from tests.clients.conftest import run_app
from tests.clients.plans import conversation_plan
from tests.ragmon_process import scraped

# the answers the app's answering model gives, turn by turn (apps/langchain_chat_app.py)
ANSWERS = [f"Answer {n} from the documents." for n in (1, 2, 3)]


def rewrite_plan(tenant: str) -> dict:
    """:func:`conversation_plan`, its history-aware turns' rewrites made to fail:

    - turn 2, "And when does payroll run?", is condensed to a question that shares no word but
      stopwords with the conversation ("schedule" is nowhere in it): the entity is lost;
    - turn 3's condense model returns the history as LangChain formats it (``Human:``/``AI:``
      lines, the answers the app's model gave): it keeps the conversation, word for word.

    Each multi-query search repeats a word of its own message ("pay", "expenses"), which the
    documents do not hold, so the searches find what they found before."""
    plan = conversation_plan(tenant)
    first, second, third = plan["turns"]
    second["rewrite"] = "What is the schedule for that?"
    said = zip((first, second), ANSWERS[:2], strict=True)
    third["rewrite"] = "\n".join(f"Human: {t['message']}\nAI: {answer}" for t, answer in said)
    plan["expansion_turns"][1]["expansions"] = [f"pay {e}" for e in plan["expansion_turns"][1]["expansions"]]
    plan["expansion_turns"][2]["expansions"] = [f"expenses {e}" for e in plan["expansion_turns"][2]["expansions"]]
    plan["expected"] = {"kept": 3, "lost": 1, "history_unseen": 0, "no_retrieval": 0,  # follow-ups
                        "other": 1 + 9, "history": 1, "empty": 0}  # rewritten queries
    return plan


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_a_condense_step_that_drops_the_entity_or_returns_its_history_is_counted(ragmon_servers, tmp_path,
                                                                                instrumentation):
    plan = rewrite_plan(f"rwchat-{instrumentation[:5]}")
    run = run_app("langchain_chat_app", ragmon_servers, plan, tmp_path, options=("--instrumentation", instrumentation))
    # the premise, from the app: each follow-up searched the rewrite the plan scripted, with the
    # answers the history was written from; each multi-query search (not their union) its expansion
    chat = [q for q in run.report["questions"] if q["shape"] == "history-aware"]
    assert [q["searched"] for q in chat] == [[t["message"] if t["rewrite"] is None else t["rewrite"]]
                                             for t in plan["turns"]]
    assert [q["answer"] for q in chat] == ANSWERS
    expanded = [q for q in run.report["questions"] if q["shape"] == "multi-query"]
    assert [q["searched"][:3] for q in expanded] == [t["expansions"] for t in plan["expansion_turns"]]
    assert all(q["searched"][3] == q["question"] for q in expanded)

    expected = plan["expected"]
    for export, server in ragmon_servers.items():
        wait_for(server, plan["tenant"], len(run.report["questions"]))
        found = {outcome: scraped(server.url, "ragmon_follow_up_turns_total", tenant=plan["tenant"], outcome=outcome)
                 for outcome in ("kept", "lost", "history_unseen", "no_retrieval")}
        found |= {outcome: scraped(server.url, "ragmon_rewritten_queries_total", tenant=plan["tenant"],
                                   outcome=outcome) for outcome in ("other", "history", "empty")}
        assert found == {k: float(v) for k, v in expected.items()}, export
