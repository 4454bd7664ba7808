"""MLflow tracing (mlflow-tracing, its LlamaIndex and LangChain autolog and ``@mlflow.trace``),
exported by MLflow's own OTLP span processor and by the SDK's exporters into `ragmon serve`: every
MLflow attribute is JSON text; RETRIEVER and RERANKER spans list their documents in
``mlflow.spanOutputs`` (MLflow's ``Document``: ``page_content``, ``metadata``, ``id``; LlamaIndex's
scores in the metadata; a reranker's ``NodeWithScore``\\ s); the caller comes from the application's
own span attributes or LangChain's run metadata, since MLflow exports no trace metadata."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan
from tests.clients.test_genai import conversation_pseudonym


def test_mlflow_llamaindex_langchain_and_traced_functions(ragmon_servers, tmp_path):
    plan = standard_plan("mlflow")
    run = run_app("mlflow_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    by_question = {q["question"]: expectations[q["trace_id"]] for q in report["questions"]}
    # LlamaIndex's nested retrieve -> _retrieve is one list; the query engine's reranker output is the context
    alone = by_question[plan["questions"][0]]
    assert len(alone.lists) == 1 and alone.context == alone.lists[0]
    engine = by_question[plan["questions"][1]]
    assert len(engine.lists) == 2 and engine.context == engine.lists[1] and len(engine.context) == 1
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            # scores as the framework gave them (LlamaIndex's and the traced search's, in MLflow's metadata)
            assert [[p.get("score") for p in r["passages"]] for r in trace["retrievals"]] == [
                [d["score"] for d in documents] for documents in q["lists"]], where
            assert trace["conversation_id"] == conversation_pseudonym(server, f"{plan['tenant']}-conversation"), where
    doc_of = {}
    for q in report["questions"]:
        for documents, ids in zip(q["lists"], expectations[q["trace_id"]].lists, strict=True):
            doc_of.update(zip(ids, (d["metadata"].get("doc_id") or d["metadata"]["source"] for d in documents),
                              strict=True))
    assert {doc_of[p] for e in expectations.values() for p in e.leaked_context} == {"mlflow/payroll", "mlflow/security"}
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"mlflow/handbook"}
