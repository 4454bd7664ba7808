"""Milvus Lite, instrumented by OpenLLMetry's opentelemetry-instrumentation-milvus, through the SDK's
OTLP/HTTP exporters, into `ragmon serve`: the results a ``milvus.search`` span reports as
``db.search.result`` events (their output fields written as Python reprs) are one list with the
chunks' text, document, version and ACL (a list in Milvus's dynamic field); a search no chunk
passes is an empty list; the ingestion (create_collection, insert) is no question."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def test_milvus_search_results_are_the_list_with_their_output_fields(ragmon_servers, tmp_path):
    plan = standard_plan("milvus")
    plan["questions"].append("What do the policies say about parking?")  # searched with a filter: nothing
    run = run_app("milvus_app", ragmon_servers, plan, tmp_path)
    report = run.report
    assert report["traces_without_retrieval"] == 2  # create_collection, insert
    expectations = assert_agrees(ragmon_servers, run)

    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            [passages] = [r.get("passages", []) for r in trace["retrievals"]]  # an empty list is left out
            milvus = q["lists"][0]  # what MilvusClient.search returned
            assert [p["id"] for p in passages] == [d["id"] for d in milvus], where
            assert [p.get("text") for p in passages] == [d["content"] for d in milvus], where
            assert [p.get("doc_id") for p in passages] == [d["metadata"]["doc_id"] for d in milvus], where
            assert [p.get("doc_version") for p in passages] == [d["metadata"].get("doc_version") for d in milvus], where
            assert all("score" not in p for p in passages), where  # Milvus's distance is not a score

    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    assert by_question[plan["questions"][-1]].context == []  # the filtered search: an empty list, still a question
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for d in q["lists"][0]}
    leaked = {doc_of[p] for e in expectations.values() for p in e.leaked_context}
    stale = {doc_of[p] for e in expectations.values() for p in e.stale_context}
    # another group's document and a revocation only the catalog knows; the version the index holds behind
    assert leaked == {"milvus/payroll", "milvus/security"}
    assert stale == {"milvus/handbook"}
