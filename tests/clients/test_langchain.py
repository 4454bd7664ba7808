"""LangChain with OpenInference's instrumentation, through the SDK's OTLP/HTTP exporters, into
`ragmon serve`. Its spans carry no document ids: a Document's own id is read back from the span's
output, the rest are named from metadata or content, and no trace is dead-lettered for it. An
ensemble retriever's sources and its fused list stay three lists."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def test_langchain_documents_with_and_without_ids_chains_and_an_ensemble(ragmon_servers, tmp_path):
    plan = standard_plan("langchain")
    run = run_app("langchain_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    every_id = {p for e in expectations.values() for ids in e.lists for p in ids}
    # the three ways a LangChain document gets its id were all exercised
    assert any(p.endswith("#0") for p in every_id)  # Document(id=...)
    assert any(p.startswith("sha:") for p in every_id)  # content only
    assert any(p.endswith(("#1", "#4")) for p in every_id)  # source#page
    fused = expectations[report["questions"][4]["trace_id"]]
    assert len(fused.lists) == 3 and fused.context == fused.lists[2]
    doc_of = {}
    for question in report["questions"]:
        for documents, ids in zip(question["lists"], expectations[question["trace_id"]].lists, strict=True):
            doc_of.update(zip(ids, (d["metadata"]["source"] for d in documents), strict=True))
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {
        "langchain/payroll", "langchain/security"}
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"langchain/handbook"}
