"""The real Pinecone client (pinecone 8.1.2), instrumented by the real OpenLLMetry
opentelemetry-instrumentation-pinecone, through the SDK's OTLP/HTTP exporters, into `ragmon serve`.
Pinecone is a hosted service out of reach here: the client is pointed at a stand-in, a local server
of the app's own (apps/pinecone_standin.py) answering Pinecone's REST query and upsert endpoints in
their documented JSON shapes. Only that server is not Pinecone's.

The matches a ``pinecone.query`` span reports as ``db.query.result`` events (their metadata written
as Python reprs) are one list with the chunks' text, document, version and ACL; their score is not
kept (for a euclidean index it is a distance, and the span does not say which metric); their vectors
are never kept; a query no chunk passes is an empty list; the upsert is no question. Expected values
are what the client returned to the app."""

from __future__ import annotations

import json

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def test_pinecone_query_matches_are_the_list_with_their_metadata(ragmon_servers, tmp_path):
    plan = standard_plan("pinecone")
    plan["questions"].append("What do the policies say about parking?")  # queried with a filter: nothing
    run = run_app("pinecone_app", ragmon_servers, plan, tmp_path)
    report = run.report
    assert report["traces_without_retrieval"] == 1  # the upsert
    expectations = assert_agrees(ragmon_servers, run)
    vector_values = [repr(v) for v in report["vector_values"] if len(repr(v)) > 6]  # 0.2886751345948129, ...
    assert vector_values

    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            [passages] = [r.get("passages", []) for r in trace["retrievals"]]  # an empty list is left out
            stored = json.dumps(trace)
            assert not [v for v in vector_values if v in stored], where  # the matches' vectors
            pinecone = q["lists"][0]  # what Index.query returned
            assert [p["id"] for p in passages] == [d["id"] for d in pinecone], where
            assert [p.get("text") for p in passages] == [d["content"] for d in pinecone], where
            assert [p.get("doc_id") for p in passages] == [d["metadata"]["doc_id"] for d in pinecone], where
            assert [p.get("doc_version") for p in passages] == [d["metadata"].get("doc_version")
                                                                for d in pinecone], where
            assert [p.get("acl") for p in passages] == [d["metadata"].get("acl") for d in pinecone], where
            assert all("score" not in p for p in passages) and len(q["scores"]) == len(pinecone), where

    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    assert by_question[plan["questions"][-1]].context == []  # the filtered query: an empty list, still a question
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for d in q["lists"][0]}
    leaked = {doc_of[p] for e in expectations.values() for p in e.leaked_context}
    stale = {doc_of[p] for e in expectations.values() for p in e.stale_context}
    # another group's document and a revocation only the catalog knows; the version the index holds behind
    assert leaked == {"pinecone/payroll", "pinecone/security"}
    assert stale == {"pinecone/handbook"}
