"""The Langfuse SDK (its LangChain callback handler, ``@observe`` and ``propagate_attributes``, and
LlamaIndex through OpenInference's instrumentation on Langfuse's TracerProvider), exported by
Langfuse's own span processor (protobuf, gzip, Basic credentials) and by the SDK's exporters into
`ragmon serve`: ``langfuse.observation.type`` marks retrievers, documents are the JSON
``langfuse.observation.output``, the caller is ``user.id`` and the application's keys under
``langfuse.trace.metadata.*`` / ``langfuse.observation.metadata.*`` (JSON text each)."""

from __future__ import annotations

from tests.clients.agreement import assert_agrees, samples_of
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan


def test_langfuse_langchain_observed_functions_and_llamaindex(ragmon_servers, tmp_path):
    plan = standard_plan("langfuse")
    run = run_app("langfuse_app", ragmon_servers, plan, tmp_path)
    expectations, report = assert_agrees(ragmon_servers, run), run.report
    # Langfuse sets the user only under a chain root: the retriever alone is read with groups and no id
    assert [bool(q["caller"].get("id")) for q in report["questions"]] == [True, True, False, True, True]
    for export, server in ragmon_servers.items():
        samples = samples_of(server, plan["tenant"])
        for q in report["questions"]:
            trace = samples[q["trace_id"]][1]
            where = f"{export}, question {q['question']!r}"
            assert [[p.get("score") for p in r["passages"]] for r in trace["retrievals"]] == [
                [d["score"] for d in documents] for documents in q["lists"]], where
            assert bool(trace.get("conversation_id")) == bool(q["caller"].get("id")), where
    doc_of = {}
    for q in report["questions"]:
        for documents, ids in zip(q["lists"], expectations[q["trace_id"]].lists, strict=True):
            doc_of.update(zip(ids, (d["metadata"].get("doc_id") or d["metadata"]["source"] for d in documents),
                              strict=True))
    leaked = {doc_of[p] for e in expectations.values() for p in e.leaked_context}
    assert leaked == {"langfuse/payroll", "langfuse/security"}, leaked
    assert {doc_of[p] for e in expectations.values() for p in e.stale_context} == {"langfuse/handbook"}
