"""Qdrant in local mode (``QdrantClient(":memory:")``), instrumented by OpenLLMetry
(``Traceloop.init``, which instruments qdrant-client with opentelemetry-instrumentation-qdrant),
with no framework around it: the application embeds the question (word counts over the corpus'
vocabulary: no model), searches, and answers with a stub, the caller in the SDK's association
properties.

The instrumentation reports a ``qdrant.query_points`` span with the collection and the limit
but none of the results (upstream, as of 0.62.4), so a bare search is a trace without retrieval
(questions 1-2, reported as such). The documented way round it (questions 3-5): the application's
own OTel GenAI ``retrieval`` span around the search, listing what Qdrant returned in
``gen_ai.retrieval.documents`` (id, score and the payload's passage fields), and a ``chat`` span
with the answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry.trace import SpanKind
from otel_export import arguments, load_plan, one_trace, report, traceloop_provider
from word_vectors import WordVectors

args = arguments()
plan = load_plan(args)
tracer_provider, roots = traceloop_provider(args.export)
tracer = tracer_provider.get_tracer("rag-app")
from qdrant_client import QdrantClient  # noqa: E402  (instrumented by Traceloop.init)
from qdrant_client.models import Distance, PointStruct, VectorParams  # noqa: E402
from traceloop.sdk import Traceloop  # noqa: E402

MODEL, TOP_K = "stub-chat-1", 2
caller = plan["caller"]


vectors = WordVectors(d["text"] for d in plan["documents"])
embed = vectors.embed


def payload(d: dict[str, Any]) -> dict[str, Any]:
    fields = {"doc_id": d["doc_id"], "text": d["text"]}
    if d["version"] is not None:
        fields["doc_version"] = d["version"]
    if d["acl"] is not None:
        fields["acl"] = d["acl"]
    return fields


before = len(roots.trace_ids)
client = QdrantClient(":memory:")
client.create_collection(plan["index"], vectors_config=VectorParams(size=vectors.dimension, distance=Distance.COSINE))
client.upsert(plan["index"], points=[PointStruct(id=n, vector=embed(d["text"]), payload=payload(d))
                                     for n, d in enumerate(plan["documents"], start=1)])
ingestion_traces = len(roots.trace_ids) - before
Traceloop.set_association_properties({"user_id": caller["id"], "tenant": args.tenant, "groups": caller["groups"],
                                      "index": plan["index"]})


def search(question: str) -> list[dict[str, Any]]:
    """What Qdrant returned, as the report's documents: a chunk's id is its document's id and ``#0``."""
    found = client.query_points(plan["index"], query=embed(question), limit=TOP_K, with_payload=True).points
    return [{"id": f"{p.payload['doc_id']}#0", "content": p.payload["text"], "score": p.score,
             "metadata": {k: v for k, v in p.payload.items() if k != "text"}} for p in found]


def stub_chat(context: list[dict[str, Any]]) -> str:
    return f"From {len(context)} passages: {re.split(r'[:;.]', context[0]['content'])[0]}." if context else \
        "No passage answers that."


def with_genai_spans(question: str):
    with tracer.start_as_current_span("invoke_workflow policy-assistant", attributes={
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": "policy-assistant"}):
        with tracer.start_as_current_span(f"retrieval {plan['index']}", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": plan["index"],
                "gen_ai.retrieval.query.text": question, "gen_ai.retrieval.top_k": TOP_K}) as span:
            found = search(question)
            span.set_attribute("gen_ai.retrieval.documents", json.dumps(
                [{"id": d["id"], "score": d["score"], **d["metadata"]} for d in found]))
        text = stub_chat(found)
        with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "stub",
                "gen_ai.request.model": MODEL}) as chat:
            chat.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]))
        return found, text


bare = 0
for question in plan["questions"][:2]:
    one_trace(roots, lambda q=question: search(q))  # the instrumentation's span alone: no results in it
    bare += 1
questions = []
for question in plan["questions"][2:]:
    (found, text), trace_id = one_trace(roots, lambda q=question: with_genai_spans(q))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": found, "answer": text})
report(tracer_provider, {"questions": questions, "traces_without_retrieval": ingestion_traces + bare})
