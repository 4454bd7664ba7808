"""The rewrite signal end to end: chat turns posted to a running ``ragmon serve`` are counted per
outcome in ``/metrics`` (no text in any label), and the follow-up whose rewrite dropped the
conversation's entity is a finding that ``ragmon trace show`` puts in words: the retriever, the
message's terms it dropped (redacted), the earlier turns it kept nothing of."""

from __future__ import annotations

import json
import time

import httpx
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from tests.ragmon_process import RagmonServer

FIRST, FIRST_ANSWER = "How many vacation days carry over into the next year?", "Five days carry over."
LOST = "And for contractors who report to alice.liddell@example.com?"
LOST_ANSWER = "Contractors carry none over."


def _turn(trace_id: str, at: float, conversation: str, turn: int, message: str, *searched: tuple[str, str | None],
          answer: str | None = None) -> dict:
    return {"type": "trace", "trace_id": trace_id, "time": at, "tenant": "acme", "conversation_id": conversation,
            "turn": turn, "caller": {"id": "u-1", "groups": ["staff"]}, "query": message,
            "index": {"name": "policies"},
            "retrievals": [{"retriever": name, "passages": [{"id": f"{trace_id}#{i}"}],
                            **({} if query is None else {"query": query})}
                           for i, (name, query) in enumerate(searched)],
            **({} if answer is None else {"answer": {"text": answer}})}


def _events(now: float) -> list[dict]:
    history = f"Human: {FIRST}\nAI: {FIRST_ANSWER}\nHuman: {LOST}\nAI: {LOST_ANSWER}"
    return [
        _turn("c1-t1", now - 60, "c-1", 1, FIRST, ("vector", None), answer=FIRST_ANSWER),
        # the condense step dropped every term of the conversation
        _turn("c1-t2", now - 40, "c-1", 2, LOST, ("vector", "What is the stipulation on it?"), answer=LOST_ANSWER),
        # it returned its history, and the keyword side got nothing: lost too
        _turn("c1-t3", now - 20, "c-1", 3, "Why?", ("vector", history), ("bm25", "")),
        # a follow-up whose first turn never reached ragmon: not judged
        _turn("c2-t2", now - 10, "c-2", 2, "And for interns?", ("vector", "What is the stipulation on it?")),
        _turn("c3-t1", now - 30, "c-3", 1, FIRST, ("vector", None)),
        _turn("c3-t2", now - 5, "c-3", 2, "And for interns?", ("vector", "vacation days carry over for interns")),
    ]


def test_chat_turns_are_counted_by_what_their_rewrites_kept_and_the_lost_one_is_explained(tmp_path):
    with RagmonServer(tmp_path) as server:
        answer = httpx.post(f"{server.url}/v1/events", json=_events(time.time()), timeout=30)
        assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text

        exposition = httpx.get(f"{server.url}/metrics").text
        counts = {}
        for line in exposition.splitlines():
            for name in ("ragmon_follow_up_turns_total", "ragmon_rewritten_queries_total"):
                if line.startswith(name + "{") and 'tenant="acme"' in line and 'index="policies"' in line:
                    outcome = line.split('outcome="')[1].split('"')[0]
                    counts[(name, outcome)] = float(line.rsplit(" ", 1)[1])
        assert counts == {
            ("ragmon_follow_up_turns_total", "kept"): 1.0,  # c3-t2
            ("ragmon_follow_up_turns_total", "lost"): 2.0,  # c1-t2, c1-t3 (its empty search)
            ("ragmon_follow_up_turns_total", "history_unseen"): 1.0,  # c2-t2
            ("ragmon_follow_up_turns_total", "no_retrieval"): 0.0,
            ("ragmon_rewritten_queries_total", "other"): 3.0,  # c1-t2, c2-t2, c3-t2
            ("ragmon_rewritten_queries_total", "history"): 1.0,
            ("ragmon_rewritten_queries_total", "empty"): 1.0,
        }
        assert "contractors" not in exposition and "alice" not in exposition and "stipulation" not in exposition

        findings = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "lost_in_rewrite"}).json()["findings"]
        assert [f["trace_id"] for f in findings] == ["c1-t3", "c1-t2"]  # newest first
        reason = findings[1]["reason"]
        assert reason == ("the query retriever vector searched shares no content term with the conversation: it "
                          "keeps none of the message's terms [contractors, report], nor any of the 6 other term(s) "
                          "of the 1 earlier turn(s) ragmon holds")
        trace = httpx.get(f"{server.url}/api/v1/traces/c1-t3").json()
        # 14: turn 1's vacation, days, carry, next, year, five; turn 2's six of the message, its
        # rewrite's stipulation and its answer's none
        assert sorted((f["signal"], f["reason"]) for f in trace["findings"] if f["signal"] != "not_judged") == [
            ("empty_rewrite", "retriever bm25 searched a rewrite of the message that holds no word"),
            ("history_rewrite", "retriever vector searched the 2 earlier turn(s) word for word instead of a question "
                                "written from them: the condense step returned its history"),
            ("lost_in_rewrite", "the query retriever bm25 searched shares no content term with the conversation: it "
                                "keeps none of the message (it holds no content term), nor any of the 14 other "
                                "term(s) of the 2 earlier turn(s) ragmon holds")]

        env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
        shown = CliRunner().invoke(main, ["trace", "show", "c1-t2"], env=env)
        assert shown.exit_code == 0, shown.output
        words = " ".join(shown.stdout.split())
        assert "lost_in_rewrite" in words and "[contractors, report]" in words
        assert "alice" not in json.dumps(findings) + shown.stdout and "example" not in shown.stdout
