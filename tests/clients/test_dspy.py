"""DSPy with OpenInference's instrumentation, through the SDK's OTLP/HTTP exporters, into
`ragmon serve`: ``Retrieve.forward`` (content only) around ``ColBERTv2.__call__`` (ids, scores) is
one list named by ColBERT's ids, the retrieved passages are the context, question and answer come
from the root module's JSON input and output, and since DSPy passages carry no ACL or version,
leaks, revocations and stale passages are found through the catalog alone, by passage id."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.clients import agreement
from tests.clients.agreement import AppRun, assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import DAY, standard_plan

NO_MATCH = "Any news about parking permits?"


def dspy_plan(tenant: str) -> dict[str, Any]:
    """The standard plan (on an index of its own), a question no document matches, and the
    index's account of what it embedded: the catalog's version of each document, except the
    handbook, embedded at version 1 before the catalog's version 2 came out (the passage names
    no version: this is what makes it stale). The office has no catalog entry (unknown ACL)."""
    plan = standard_plan(tenant, index=f"{tenant}-policies")
    plan["questions"].append(NO_MATCH)
    now = time.time()
    indexed = {"leave": "3", "payroll": "1", "handbook": "1", "security": "1"}
    plan["catalog"] += [{"type": "index", "index": plan["index"], "doc_id": f"{tenant}/{name}", "version": version,
                         "indexed_at": now - 20 * DAY} for name, version in indexed.items()]
    return plan


@pytest.fixture(scope="module")
def dspy_run(ragmon_servers, tmp_path_factory) -> AppRun:
    """The app, run once for the tests of this module."""
    return run_app("dspy_app", ragmon_servers, dspy_plan("dspy"), tmp_path_factory.mktemp("dspy"))


def test_dspy_retrieve_over_colbertv2(ragmon_servers, dspy_run):
    plan, report = dspy_run.plan, dspy_run.report
    expectations = assert_agrees(ragmon_servers, dspy_run)
    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    doc_ids = {d["doc_id"] for d in plan["documents"]}
    # each retrieval, reported as Retrieve.forward around ColBERTv2.__call__, is ONE list named by
    # ColBERT's pids (no id derived from content: the content-only level is merged, not a list)
    for question, e in by_question.items():
        assert len(e.lists) == 1 and set(e.lists[0]) <= doc_ids and not e.derived, question
        assert e.context == e.lists[0], question
    assert by_question[NO_MATCH].lists == [[]] and by_question[NO_MATCH].context == []
    # every question was a request to the ColBERT server (a fresh DSPY_CACHEDIR: nothing cached)
    assert report["colbert_requests"] == len(plan["questions"])
    # ColBERT's scores (the question and answer, from the root module's JSON, agreed above)
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            _, payload = samples[q["trace_id"]]
            where = export, q["question"]
            assert [[p.get("score") for p in r.get("passages", [])] for r in payload["retrievals"]] == [
                [d["score"] for d in documents] for documents in q["lists"]], where
    # the run reached what the corpus holds: a leak of another group's document, a revocation only
    # the catalog knows, a stale version only the index events reveal, and a document without ACL
    assert {p for e in expectations.values() for p in e.leaked_context} == {"dspy/payroll", "dspy/security"}
    assert {p for e in expectations.values() for p in e.stale_context} == {"dspy/handbook"}
    assert {p for e in expectations.values() for p in e.unknown_acl} == {"dspy/office"}


def test_dspy_one_retriever_one_name(ragmon_servers, dspy_run):
    """The app has one retriever: every list, found or empty, carries the same retriever name
    (the per-retriever metrics, such as empty retrievals against all retrievals, depend on it)."""
    plan, report = dspy_run.plan, dspy_run.report
    for export, server in ragmon_servers.items():
        agreement.wait_for(server, plan["tenant"], len(report["questions"]))
        names = {q["question"]: [r["retriever"] for r in samples_of(server, plan["tenant"])[q["trace_id"]][1][
            "retrievals"]] for q in report["questions"]}
        assert len({name for found in names.values() for name in found}) == 1, (export, names)
