"""LlamaIndex with OpenInference's instrumentation, through the SDK's OTLP/HTTP exporters, into
`ragmon serve`: the nested RETRIEVER spans of one retrieval are one list, a reranker's output is the
context, an application's explicit context wins, and leaks, revocations and stale passages are
counted as the framework's own return values say they must be."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def test_llamaindex_bm25_query_engine_and_explicit_context(ragmon_servers, tmp_path):
    plan = standard_plan("llamaindex")
    plan["questions"].append("Which train goes to the seaside?")  # no word of the corpus: BM25 pads with zeros
    run = run_app("llamaindex_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    # one retrieval reported as nested RETRIEVER spans is one list, and the retriever alone gives the context
    alone = by_question[plan["questions"][0]]
    assert len(alone.lists) == 1 and alone.context == alone.lists[0]
    # the query engine: the retriever's list, then the reranker's, which is the context
    engine = by_question[plan["questions"][2]]
    assert len(engine.lists) == 2 and engine.context == engine.lists[1] and len(engine.context) == 1
    # the similarity cutoff dropped passages the application's explicit context leaves out
    explicit = by_question[plan["questions"][4]]
    assert len(explicit.lists) == 1 and set(explicit.context) < set(explicit.lists[0])
    # the application's retriever dropped the zero-score padding: nested spans, the outermost's list
    nothing = by_question[plan["questions"][5]]
    assert nothing.lists == [[]] and nothing.context == []
    # the run reached what the corpus holds: a leak of another group's document, a revocation only
    # the catalog knows, and a stale version
    doc_of = {d["id"]: d["metadata"]["doc_id"] for q in report["questions"] for docs in q["lists"] for d in docs}
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {
        "llamaindex/payroll", "llamaindex/security"}
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"llamaindex/handbook"}
