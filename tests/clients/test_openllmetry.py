"""OpenLLMetry (Traceloop): ``traceloop-sdk`` with its LlamaIndex, LangChain and Qdrant
instrumentations, through the SDK's OTLP/HTTP exporters, into `ragmon serve`. The caller comes from
the SDK's association properties and from LangChain's run metadata; of nested retriever spans the
outermost decides what the caller got; and where the instrumentation reports nothing to read (a
bare Qdrant search), the trace is counted without retrieval."""

from __future__ import annotations

from typing import Any

from tests.clients.agreement import assert_agrees, conversation_pseudonym, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan

OFF_TOPIC = "Who cleans the desk?"  # one word in common with the corpus, a weak match


def test_llamaindex_retrievers_query_engines_and_the_outermost_list(ragmon_servers, tmp_path):
    plan = standard_plan("oll")
    plan["questions"].append(OFF_TOPIC)
    run = run_app("openllmetry_llamaindex_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    by_shape: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for q in report["questions"]:
        by_shape.setdefault(q["shape"], []).append((q, expectations[q["trace_id"]]))
    # nested VectorIndexRetriever spans (retrieve, _retrieve) are one list, and it is the context
    [(_, alone)] = by_shape["retriever"]
    assert len(alone.lists) == 1 and alone.context == alone.lists[0] and alone.context
    # the application's filtering retriever: its innermost span held a top k the caller never got;
    # for the off-topic question the outermost list is empty, so is the context, and no leak is
    # reported of what only the innermost span held
    kept, nothing = by_shape["confident retriever"]
    assert len(kept[1].lists) == 1 and len(kept[0]["unfiltered"]) > len(kept[1].lists[0]) > 0
    assert nothing[0]["question"] == OFF_TOPIC and nothing[1].lists == [[]] and nothing[1].context == []
    assert nothing[0]["unfiltered"] and not nothing[1].leaked_candidates | nothing[1].leaked_context
    assert "oll/security" in {d["metadata"]["doc_id"] for d in nothing[0]["unfiltered"]}  # a leak, had it been read
    # a node postprocessor (the application's reranker, a similarity cutoff) is a reranker list: the context
    for q, e in by_shape["query engine, reranker"] + by_shape["query engine, similarity cutoff"]:
        assert len(e.lists) == 2 and e.context == e.lists[1] and len(e.lists[1]) < len(e.lists[0]), q["question"]
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for docs in q["lists"] for d in docs}
    leaked = {doc_of[p] for e in expectations.values() for p in e.leaked_context}
    stale = {doc_of[p] for e in expectations.values() for p in e.stale_context}
    assert leaked == {"oll/payroll", "oll/security"} and stale == {"oll/handbook"}
    # the conversation from the association properties too (stored pseudonymised, docs/sampling.md)
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            assert samples[q["trace_id"]][1]["conversation_id"] == conversation_pseudonym(
                server, "oll-conversation"), export


def test_langchain_retriever_and_lcel_chains_with_the_caller_in_association_properties_or_run_metadata(
        ragmon_servers, tmp_path):
    plan = standard_plan("olc")
    run = run_app("openllmetry_langchain_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    assert {q["caller_in"] for q in report["questions"]} == {"association properties", "run metadata"}
    fused = expectations[report["questions"][4]["trace_id"]]
    assert len(fused.lists) == 3 and fused.context == fused.lists[2]
    every_id = {p for e in expectations.values() for ids in e.lists for p in ids}
    assert any(p.startswith("sha:") for p in every_id) and any(p.endswith(("#1", "#4")) for p in every_id)
    # upstream: a Document's own id is not exported, so ragmon names those documents otherwise
    lost = {d["framework_id"] for q in report["questions"] for docs in q["lists"] for d in docs if d["framework_id"]}
    assert lost and not lost & every_id
    doc_of = {}
    for question in report["questions"]:
        for documents, ids in zip(question["lists"], expectations[question["trace_id"]].lists, strict=True):
            doc_of.update(zip(ids, (d["metadata"]["source"] for d in documents), strict=True))
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {"olc/payroll", "olc/security"}
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"olc/handbook"}


def test_qdrant_alone_reports_no_results_and_the_application_genai_span_lists_them(ragmon_servers, tmp_path):
    """Upstream: opentelemetry-instrumentation-qdrant reports no results, so a bare search is a
    trace without retrieval (counted: ``traces_without_retrieval``); the application's GenAI
    ``retrieval`` span listing Qdrant's results is read, with the caller from the association
    properties the SDK puts on it."""
    plan = standard_plan("oqd")
    run = run_app("openllmetry_qdrant_app", ragmon_servers, plan, tmp_path)
    assert run.report["traces_without_retrieval"] >= 2 and len(run.report["questions"]) == 3
    expectations = assert_agrees(ragmon_servers, run)
    assert all(len(e.lists) == 1 and e.context == e.lists[0] for e in expectations.values())
