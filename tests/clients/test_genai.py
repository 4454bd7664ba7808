"""Spans made by hand with the OTel GenAI semantic conventions, through the SDK's OTLP/HTTP exporters,
into `ragmon serve`: ``gen_ai.retrieval.documents`` read in structured form (an array of maps on the
wire) and as a JSON string, the index named by ``gen_ai.data_source.id``, the query, answer, usage
and conversation taken from the retrieval and chat spans, the caller from the workflow root. GenAI
documents carry only ids and scores, so leaks, revocations and stale passages come from the
catalog: the document events and what the index reported embedding."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import DAY, standard_plan

#: The version each document's index holds: the handbook's is older than the catalog's.
INDEXED = {"leave": "3", "payroll": "1", "handbook": "1", "security": "1"}


def genai_plan(tenant: str) -> dict[str, Any]:
    """The standard plan, its catalog completed with what the indexing pipeline reported
    embedding into the plan's index ten days ago (before the handbook's change two days ago)."""
    plan, now = standard_plan(tenant), time.time()
    indexed = [{"type": "index", "index": plan["index"], "doc_id": f"{tenant}/{name}", "version": version,
                "indexed_at": now - 10 * DAY} for name, version in INDEXED.items()]
    plan["catalog"] += indexed
    return plan


def test_genai_structured_and_json_documents_judged_by_the_catalog(ragmon_servers, tmp_path):
    plan = genai_plan("genai")
    run = run_app("genai_app", ragmon_servers, plan, tmp_path)
    report = run.report
    assert [q["shape"] for q in report["questions"]] == ["structured"] * 2 + ["json"] * 2 + ["framework"]
    expectations = assert_agrees(ragmon_servers, run)

    # what ragmon read besides the lists: per server, the stored sample against the app's own values
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, {q['shape']} question {q['question']!r}"
            assert [r["retriever"] for r in trace["retrievals"]] == [q["retriever"]], where
            assert [p.get("score") for p in trace["retrievals"][0]["passages"]] == [
                d["score"] for d in q["lists"][0]], where
            assert trace["conversation_id"] == conversation_pseudonym(server, q["conversation_id"]), where
            assert trace["usage"] == q["usage"], where
            assert trace["caller"]["groups"] == q["caller"]["groups"] and trace["caller"]["id"], where

    # every shape reached the catalog: a leak of another group's document, a revocation only the
    # catalog knows, a version older than the catalog's (from the index's report), no ACL at all
    by_shape: dict[str, set[str]] = {}
    for q in report["questions"]:
        by_shape.setdefault(q["shape"], set()).update(d["id"] for d in q["context"])
    assert all(by_shape.values())
    leaked = {p for e in expectations.values() for p in e.leaked_context}
    stale = {p for e in expectations.values() for p in e.stale_context}
    unknown = {p for e in expectations.values() for p in e.unknown_acl}
    assert leaked == {"genai/payroll", "genai/security"}
    assert stale == {"genai/handbook"}
    assert unknown == {"genai/office#0"}


def conversation_pseudonym(server, conversation_id: str) -> str:
    """The stored form of a conversation id by the rule docs/sampling.md states: ``conversation:``
    and the first 24 hex digits of HMAC-SHA256 over ``conversation\\0`` + the id, keyed with the
    caller key (here the one an embedded server made beside its database)."""
    key = (server.scratch / "caller.key").read_text().strip().encode()
    digest = hmac.new(key, b"conversation\x00" + conversation_id.encode(), hashlib.sha256).hexdigest()
    return "conversation:" + digest[:24]
