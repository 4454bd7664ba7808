"""Haystack with OpenInference's instrumentation, through the SDK's OTLP/HTTP exporters, into
`ragmon serve`: the query comes from the retriever span (the root CHAIN span holds the whole
pipeline input), the answer from the generator, not the prompt builder (both are LLM spans), a
ranker's output is the context (completed by the fields the retriever reported), neither the
retriever alone nor a pipeline that only builds the prompt gives an answer, and leaks, revocations
and stale passages are counted as the pipelines' own outputs say they must be."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.agreement import AppRun, assert_agrees, context_of, samples_of, wait_for
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan

PASSAGE_FIELDS = ("doc_id", "doc_version", "acl")


@pytest.fixture(scope="module")
def haystack_run(ragmon_servers, tmp_path_factory) -> AppRun:
    """The app, run once for the tests of this module."""
    plan = standard_plan("haystack")
    plan["questions"].append("Who may read the payroll records?")  # asked of the prompt-only pipeline
    return run_app("haystack_app", ragmon_servers, plan, tmp_path_factory.mktemp("haystack"))


def test_haystack_bm25_pipelines_with_ranker_and_retriever_alone(ragmon_servers, haystack_run):
    plan, report = haystack_run.plan, haystack_run.report
    expectations = assert_agrees(ragmon_servers, haystack_run)
    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    asked = {q["question"]: q for q in report["questions"]}
    # the RAG pipeline: one list, which is what the prompt was built from
    rag = by_question[plan["questions"][0]]
    assert len(rag.lists) == 1 and rag.context == rag.lists[0]
    # the retriever alone: its list is the context, and there is no answer
    alone = by_question[plan["questions"][3]]
    assert len(alone.lists) == 1 and alone.context == alone.lists[0] and asked[plan["questions"][3]]["answer"] is None
    # the ranker kept three of the retriever's four passages, reordered: its output is the context
    ranked = by_question[plan["questions"][4]]
    assert len(ranked.lists) == 2 and ranked.context == ranked.lists[1]
    assert set(ranked.context) < set(ranked.lists[0]) and ranked.context != ranked.lists[0][:3]
    # a pipeline that only built the prompt: the prompt builder's text is no answer
    prompt_only = asked[plan["questions"][5]]
    assert prompt_only["answer"] is None and by_question[plan["questions"][5]].lists[0]
    # both kinds of id: the application's own and Haystack's content hash
    ids = {d["id"] for q in report["questions"] for docs in q["lists"] for d in docs}
    assert any(i.endswith("#0") for i in ids) and any(len(i) == 64 and "/" not in i for i in ids)
    # the run reached what the corpus holds: a leak of another group's document, a revocation only
    # the catalog knows, and a stale version
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for docs in q["lists"] for d in docs}
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {
        "haystack/payroll", "haystack/security"}
    assert {doc_of[p] for p in ranked.leaked_candidates} == {"haystack/payroll", "haystack/security"}
    assert {doc_of[p] for p in ranked.leaked_context} == {"haystack/security"}  # the ranker dropped payroll
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"haystack/handbook"}


def test_haystack_passages_keep_their_document_fields(ragmon_servers, haystack_run):
    """Every stored passage names the document, version and ACL that the pipeline's own Document
    carries in ``meta``, in every list and in the context. The ranker's span reports its output
    documents with id, content and score only (no metadata); the retriever's span of the same trace
    reports the same ids with their metadata. Without these fields a leak at context is pushed
    without the document ids the security owner needs (docs/alerts.md)."""
    plan, report = haystack_run.plan, haystack_run.report

    def fields(passage: dict[str, Any]) -> dict[str, Any]:
        return {k: passage[k] for k in PASSAGE_FIELDS if passage.get(k) is not None}

    for export, server in ragmon_servers.items():
        wait_for(server, plan["tenant"], len(report["questions"]))
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            payload = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            assert [[fields(p) for p in r["passages"]] for r in payload["retrievals"]] == [
                [fields(d["metadata"]) for d in documents] for documents in q["lists"]], where
            assert [fields(p) for p in context_of(payload)] == [fields(d["metadata"]) for d in q["context"]], where
