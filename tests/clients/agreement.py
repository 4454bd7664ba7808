"""Comparing what ragmon reported (``/metrics`` and the stored samples) with what it must report
(``tests.clients.expect``), for every server of the run."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.clients.expect import Catalog, Expected, expected, findings, principals
from tests.ragmon_process import RagmonServer, scraped

GLOBAL_COUNTERS = (("ragmon_derived_passage_ids_total", {"how": "metadata"}),
                   ("ragmon_derived_passage_ids_total", {"how": "content_hash"}),
                   ("ragmon_unmapped_passages_total", {}),
                   ("ragmon_otlp_traces_without_retrieval_total", {}))


@dataclass
class AppRun:
    """One run of a client app: its plan (documents, catalog, caller, questions), what it
    reported, and the counters without a tenant label on every server just before it."""

    plan: dict[str, Any]
    report: dict[str, Any]
    before: dict[str, dict[str, float]]


def snapshot(servers: dict[str, RagmonServer]) -> dict[str, dict[str, float]]:
    """The counters without a tenant label, per server, to compare a run's increments."""
    return {export: {f"{name}{labels}": scraped(server.url, name, **labels) for name, labels in GLOBAL_COUNTERS}
            for export, server in servers.items()}


def samples_of(server: RagmonServer, tenant: str) -> dict[str, tuple[list[str], dict[str, Any]]]:
    import json

    with sqlite3.connect(server.scratch / "ragmon.db") as db:
        rows = db.execute("select trace_id, strata, payload from sample where tenant = ?", (tenant,)).fetchall()
    return {trace_id: (json.loads(strata), json.loads(payload)) for trace_id, strata, payload in rows}


def wait_for(server: RagmonServer, tenant: str, traces: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (scraped(server.url, "ragmon_answers_total", tenant=tenant) >= traces
                and len(samples_of(server, tenant)) >= traces):
            return
        time.sleep(0.25)
    raise AssertionError(f"{server.url}: {scraped(server.url, 'ragmon_answers_total', tenant=tenant):.0f} of "
                         f"{traces} traces of {tenant} arrived in {timeout:.0f} s")


def context_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored trace's context: as given, else its last retrieval list (docs/events.md). A stored event
    leaves out what is empty or at its default."""
    if "context" in trace:
        return trace["context"]
    retrievals = trace.get("retrievals", [])
    return retrievals[-1].get("passages", []) if retrievals else []


def outcome(question: dict[str, Any], expectation: Expected) -> str:
    if question.get("answer") in (None, ""):
        return "unknown"
    return "answered" if expectation.context else "empty_context"


def assert_agrees(servers: dict[str, RagmonServer], run: AppRun) -> dict[str, Expected]:
    """Every server holds one sample per question whose lists, context, question, answer, index,
    caller and strata are the expected ones, and its counters grew by the expected amounts (the
    traces without retrieval by the report's ``traces_without_retrieval``: ingestion runs)."""
    plan, report, before = run.plan, run.report, run.before
    without_retrieval = report.get("traces_without_retrieval", 0)
    tenant, index = plan["tenant"], plan["index"]
    catalog = Catalog.of(plan["catalog"])
    questions = {q["trace_id"]: q for q in report["questions"]}
    expectations = {trace_id: expected(q, tenant, index, catalog) for trace_id, q in questions.items()}
    derived: dict[str, int] = {}
    for e in expectations.values():
        for how, n in e.derived.items():
            derived[how] = derived.get(how, 0) + n
    for export, server in servers.items():
        wait_for(server, tenant, len(questions))
        samples = samples_of(server, tenant)
        assert set(samples) == set(questions), f"{export}: traces stored are not the questions asked"
        for trace_id, e in expectations.items():
            strata, payload = samples[trace_id]
            where = f"{export}, question {questions[trace_id]['question']!r}"
            # a stored event leaves out what is empty
            assert [[p["id"] for p in r.get("passages", [])] for r in payload.get("retrievals", [])] == e.lists, where
            assert [p["id"] for p in context_of(payload)] == e.context, where
            caller = questions[trace_id].get("caller")
            if caller:
                assert payload["caller"]["groups"] == caller["groups"], where
                assert bool(payload["caller"].get("id")) == bool(caller.get("id")), where
            else:
                assert "caller" not in payload, where
            assert ("permission_violation" in strata) == bool(e.leaked_candidates or e.leaked_context), where
            assert payload["query"] == questions[trace_id]["question"], where
            assert_turn(server, questions[trace_id], payload, where)
            assert payload["index"]["name"] == index, where
            assert (payload.get("answer") or {}).get("text") == questions[trace_id].get("answer"), where
            assert_findings(server, questions[trace_id], tenant, index, catalog, where)
        def count(name: str, url: str = server.url, **labels: str) -> float:
            return scraped(url, name, tenant=tenant, **labels)

        assert count("ragmon_permission_violations_total", stage="candidates") == sum(
            len(e.leaked_candidates) for e in expectations.values()), export
        assert count("ragmon_permission_violations_total", stage="context") == sum(
            len(e.leaked_context) for e in expectations.values()), export
        assert count("ragmon_stale_passages_served_total", stage="candidates") == sum(
            len(e.stale_candidates) for e in expectations.values()), export
        assert count("ragmon_stale_passages_served_total", stage="context") == sum(
            len(e.stale_context) for e in expectations.values()), export
        assert count("ragmon_unknown_acl_passages_total") == sum(len(e.unknown_acl) for e in expectations.values())
        for name in ("answered", "unknown", "empty_context", "abstained"):
            assert count("ragmon_answers_total", outcome=name) == sum(
                outcome(questions[t], e) == name for t, e in expectations.items()), (export, name)
        assert count("ragmon_traces_without_caller_total") == sum(
            not q.get("caller") for q in questions.values()), export
        after = snapshot({export: server})[export]
        grew = {key: after[key] - before[export][key] for key in after}
        for how in ("metadata", "content_hash"):
            assert grew[f"ragmon_derived_passage_ids_total{{'how': '{how}'}}"] == derived.get(how, 0), (export, how)
        assert grew["ragmon_otlp_traces_without_retrieval_total{}"] == without_retrieval, export
    return expectations


def assert_findings(server: RagmonServer, question: dict[str, Any], tenant: str, index: str, catalog: Catalog,
                    where: str) -> None:
    """``GET /api/v1/traces/{id}`` lists exactly the expected permission-violation and
    stale-passage findings of the question's trace: per stage, the passages, their documents and
    versions, and the rule in words, the caller's principals shown with the stored pseudonym."""
    answer = httpx.get(f"{server.url}/api/v1/traces/{question['trace_id']}", timeout=10)
    assert answer.status_code == 200, (where, answer.text)
    shown = [f for f in answer.json()["findings"] if f["signal"] in ("permission_violation", "stale_passage")]
    caller = question.get("caller") or {}
    pseudonym = caller_pseudonym(server, caller["id"]) if caller.get("id") else None
    assert {f["caller"] for f in shown} <= {pseudonym}, where
    assert not caller.get("id") or caller["id"] not in answer.text, where
    stored = [f"user:{pseudonym}" if p == f"user:{caller.get('id')}" else p
              for p in sorted(principals(tenant, question.get("caller")))]
    expected_rows = {(e.signal, e.stage, tuple(e.passage_ids), tuple(e.documents),
                      e.reason.replace("{caller}", "[" + ", ".join(stored) + "]"))
                     for e in findings(question, tenant, index, catalog)}
    shown_rows = {(f["signal"], f["stage"], tuple(f["passage_ids"]),
                   tuple((d["doc_id"], d["version"]) for d in f["documents"]), f["reason"]) for f in shown}
    assert shown_rows == expected_rows, where


def assert_turn(server: RagmonServer, question: dict[str, Any], payload: dict[str, Any], where: str) -> None:
    """The stored trace says what each list searched: the question the app reports its retriever
    was called with (``searched``, one per list; absent: every list searched the user's message,
    which a list then does not repeat), and, for a chat turn, its conversation (pseudonymised)
    and turn."""
    lists = payload.get("retrievals", [])
    searched = question.get("searched") or [question["question"]] * len(question["lists"])
    assert [r.get("query", payload["query"]) for r in lists] == searched, where
    assert all(r.get("query") != payload["query"] for r in lists), where  # the message is never repeated
    if "conversation" in question:
        assert payload.get("conversation_id") == conversation_pseudonym(server, question["conversation"]), where
        assert payload.get("turn") == question["turn"], where


def conversation_pseudonym(server: RagmonServer, conversation_id: str) -> str:
    """The stored form of a conversation id by the rule docs/sampling.md states: ``conversation:``
    and 24 hex digits of HMAC-SHA256 over ``conversation``, a NUL and the id, keyed with the caller key."""
    key = (server.scratch / "caller.key").read_text().strip().encode()
    digest = hmac.new(key, b"conversation\x00" + conversation_id.encode(), hashlib.sha256).hexdigest()
    return "conversation:" + digest[:24]


def caller_pseudonym(server: RagmonServer, caller_id: str) -> str:
    """The stored form of a caller id by the rule docs/sampling.md states: ``caller:`` and the first
    24 hex digits of HMAC-SHA256 over the id, keyed with the caller key (here the one an embedded
    server made beside its database)."""
    key = (server.scratch / "caller.key").read_text().strip().encode()
    return "caller:" + hmac.new(key, caller_id.encode(), hashlib.sha256).hexdigest()[:24]
