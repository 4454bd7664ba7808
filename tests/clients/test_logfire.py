"""Logfire (pydantic), exporting to an OpenTelemetry backend with its own span processor and with the
SDK's exporters, into `ragmon serve`: OpenInference's LlamaIndex spans and Logfire's own, the caller
on every span through ``logfire.set_baggage``, the question and answer from an
``@logfire.instrument`` function's arguments and recorded return, a ``logfire.span`` read by its GenAI
attributes. Logfire scrubs ``session.id``: ragmon keeps no conversation of a scrubbed value, and
keeps ``gen_ai.conversation.id``."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan
from tests.clients.test_genai import conversation_pseudonym


def test_logfire_llamaindex_baggage_scrubbed_session_and_genai_spans(ragmon_servers, tmp_path):
    plan = standard_plan("logfire")
    run = run_app("logfire_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    assert [q["conversation_kept"] for q in report["questions"]] == [False, False, True, True, True]
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            assert [[p.get("score") for p in r["passages"]] for r in trace["retrievals"]] == [
                [d["score"] for d in documents] for documents in q["lists"]], where
            kept = conversation_pseudonym(server, f"{plan['tenant']}-conversation")
            assert trace.get("conversation_id") == (kept if q["conversation_kept"] else None), where
    doc_of = {d["id"] if d["id"] else None: d["metadata"]["doc_id"] for q in report["questions"]
              for documents in q["lists"] for d in documents}
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {
        "logfire/payroll", "logfire/security"}
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"logfire/handbook"}
