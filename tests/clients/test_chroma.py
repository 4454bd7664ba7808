"""Chroma in process, instrumented by OpenLLMetry's opentelemetry-instrumentation-chromadb, through
the SDK's OTLP/HTTP exporters, into `ragmon serve`: the results a ``chroma.query`` span reports as
``db.query.result`` events are one list (ids, texts, metadata; distances are not scores), whether
the query sits under an OpenInference CHAIN root or under a GenAI retrieval span of the app's (whose
own ``gen_ai.retrieval.documents`` merge into the same list), the ``chroma.add`` ingestion is no
question, and ACLs that Chroma keeps as comma-separated strings are lists of principals."""

from __future__ import annotations

from typing import Any

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def chroma_plan(tenant: str) -> dict[str, Any]:
    """The standard plan plus a document only its own metadata describes (no catalog entry),
    readable by two groups, one of them the caller's."""
    plan = standard_plan(tenant)
    plan["documents"].append({"doc_id": f"{tenant}/benefits", "version": "1", "acl": ["group:hr", "group:staff"],
                              "text": "The staff health plan covers dental and vision benefits for every employee."})
    plan["questions"].append("Does the health plan cover dental benefits?")
    return plan


def test_chroma_query_results_under_openinference_and_genai_roots(ragmon_servers, tmp_path):
    plan = chroma_plan("chroma")
    run = run_app("chroma_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report

    # what ragmon read besides the lists: per server, the stored sample against Chroma's and the app's values
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, {q['shape']} question {q['question']!r}"
            [passages] = [r["passages"] for r in trace["retrievals"]]
            assert [p.get("text") for p in passages] == [d["content"] for d in q["lists"][0]], where
            assert [p.get("doc_id") for p in passages] == [d["metadata"]["doc_id"] for d in q["lists"][0]], where
            # Chroma's distances never become scores; the app's own GenAI scores do
            assert [p.get("score") for p in passages] == [d.get("score") for d in q["lists"][0]], where

    by_question = {q["question"]: (q, expectations[q["trace_id"]]) for q in report["questions"]}
    assert {q["shape"] for q, _ in by_question.values()} == {"chain", "chain+answer", "genai", "genai+documents"}
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for docs in q["lists"] for d in docs}
    leaked = {doc_of[p] for _, e in by_question.values() for p in e.leaked_context}
    stale = {doc_of[p] for _, e in by_question.values() for p in e.stale_context}
    unknown = {doc_of[p] for _, e in by_question.values() for p in e.unknown_acl}
    # a leak of another group's document, a revocation only the catalog knows, a stale version, no ACL
    assert leaked == {"chroma/payroll", "chroma/security"}
    assert stale == {"chroma/handbook"}
    assert unknown == {"chroma/office"}
    # the document only its metadata describes, readable by the caller's group among two, was served
    q, e = by_question[plan["questions"][5]]
    assert "chroma/benefits#0" in e.context and "chroma/benefits#0" not in e.leaked_context | e.unknown_acl


def test_chroma_query_that_found_nothing_is_still_a_question(ragmon_servers, tmp_path):
    """An ACL pre-filter (``where``) that no chunk passes: Chroma returns no results, so the
    ``chroma.query`` span carries no ``db.query.result`` event. The question was still asked and
    answered from an empty retrieval: one empty list, an empty context (docs/signals.md ``empty_context``)."""
    plan = standard_plan("chromaempty")
    plan["caller"]["groups"] = ["contractors"]
    plan["questions"], plan["shapes"] = plan["questions"][4:], ["chain+answer+filter"]
    run = run_app("chroma_app", ragmon_servers, plan, tmp_path)
    [question] = run.report["questions"]
    assert question["lists"] == [[]] and question["context"] == [] and question["answer"]
    assert_agrees(ragmon_servers, run)
