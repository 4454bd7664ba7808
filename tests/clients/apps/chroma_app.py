"""Chroma (in process, ``chromadb.EphemeralClient``) instrumented by OpenLLMetry's
``opentelemetry-instrumentation-chromadb``, under root spans the application makes itself.

The instrumentation reports each ``collection.query`` as a ``chroma.query`` span (``db.system =
chroma``) with one ``db.query.result`` span event per result: ``db.query.result.id``,
``.distance``, ``.document`` and ``.metadata`` (JSON text). It reports no query text (only
embeddings), and ``collection.add`` makes a trace of its own (an ingestion: no retrieval). Chroma
keeps only scalar metadata, so a chunk's ACL is a comma-separated string of principals.
Embeddings are the application's own (word counts over the corpus' vocabulary): no model.

1. questions 1-2: an OpenInference CHAIN root (``input.value``, ``output.value`` for question 2,
   ``user.id``, ``metadata`` JSON with tenant, groups and index) around the query alone;
2. questions 3-6: a GenAI ``invoke_workflow`` root (``user.id`` or ``enduser.id``,
   ``ragmon.caller.groups``), the application's own framework retrieval span (``retrieval``:
   ``gen_ai.data_source.id``, ``gen_ai.retrieval.query.text``) around the query, then a
   ``chat {model}`` span with ``gen_ai.output.messages``; on question 5 the retrieval span also
   lists the results in ``gen_ai.retrieval.documents`` with the application's scores (1 - d/2,
   the cosine similarity of unit vectors at squared-L2 distance d);
3. a plan may name other ``shapes``: ``chain+answer+filter`` pre-filters by ACL (``where``), which
   for a caller of no group the chunks name returns nothing: a ``chroma.query`` without events.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry.instrumentation.chromadb import ChromaInstrumentor
from opentelemetry.trace import SpanKind
from otel_export import arguments, load_plan, one_trace, provider, report
from word_vectors import WordVectors

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
ChromaInstrumentor().instrument(tracer_provider=tracer_provider)
tracer = tracer_provider.get_tracer("rag-app")

import chromadb  # noqa: E402  (instrumented first, as the instrumentation asks)

MODEL, TOP_K = "stub-chat-1", 2
caller = plan["caller"]


vectors = WordVectors(d["text"] for d in plan["documents"])
embed = vectors.embed


def chunk_metadata(d: dict[str, Any]) -> dict[str, Any]:
    metadata = {"doc_id": d["doc_id"]}
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = ", ".join(d["acl"])
    return metadata


documents = plan["documents"]
collection = chromadb.EphemeralClient().create_collection(plan["index"], embedding_function=None)
collection.add(ids=[f"{d['doc_id']}#0" for d in documents], embeddings=[embed(d["text"]) for d in documents],
               documents=[d["text"] for d in documents], metadatas=[chunk_metadata(d) for d in documents])
# (the add above is an ingestion: a trace of its own, without retrieval)


def query(question: str, where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What Chroma returned, as the report's documents (a distance is not a score: none given)."""
    found = collection.query(query_embeddings=[embed(question)], n_results=TOP_K, where=where)
    return [{"id": i, "content": text, "metadata": metadata, "distance": distance} for i, text, metadata, distance
            in zip(found["ids"][0], found["documents"][0], found["metadatas"][0], found["distances"][0], strict=True)]


def stub_chat(context: list[dict[str, Any]]) -> str:
    if not context:
        return "No passage answers that."
    return f"From {len(context)} passages: {re.split(r'[:;.]', context[0]['content'])[0]}."


def chain_root(question: str, with_answer: bool, acl_filter: bool = False):
    metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
    with tracer.start_as_current_span("rag-answer", attributes={
            "openinference.span.kind": "CHAIN", "input.value": question, "user.id": caller["id"],
            "metadata": json.dumps(metadata)}) as span:
        # an ACL pre-filter: only chunks whose ACL is exactly one of the caller's groups
        where = {"acl": {"$in": [f"group:{g}" for g in caller["groups"]]}} if acl_filter else None
        found = query(question, where)
        text = stub_chat(found) if with_answer else None
        if text is not None:
            span.set_attribute("output.value", text)
        return found, text


def genai_root(question: str, n: int, with_documents: bool):
    with tracer.start_as_current_span("invoke_workflow policy-assistant", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": "policy-assistant",
            "user.id" if n % 2 == 0 else "enduser.id": caller["id"], "ragmon.caller.groups": caller["groups"]}):
        with tracer.start_as_current_span("retrieval", kind=SpanKind.INTERNAL, attributes={
                "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": plan["index"],
                "gen_ai.retrieval.query.text": question, "gen_ai.retrieval.top_k": TOP_K}) as span:
            found = query(question)
            if with_documents:
                for d in found:
                    d["score"] = round(1 - d["distance"] / 2, 6)
                span.set_attribute("gen_ai.retrieval.documents", [{"id": d["id"], "score": d["score"]} for d in found])
        text = stub_chat(found)
        with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "stub", "gen_ai.request.model": MODEL,
                "gen_ai.usage.input_tokens": sum(len(d["content"].split()) for d in found) + len(question.split()),
                "gen_ai.usage.output_tokens": len(text.split())}) as chat:
            chat.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]))
        return found, text


def ask(question: str, n: int, shape: str):
    if shape.startswith("chain"):
        return chain_root(question, "answer" in shape, shape.endswith("filter"))
    return genai_root(question, n, shape.endswith("documents"))


shapes = plan.get("shapes") or ["chain", "chain+answer", "genai", "genai", "genai+documents", "genai"]
questions = []
for n, (question, shape) in enumerate(zip(plan["questions"], shapes, strict=True)):
    (found, text), trace_id = one_trace(roots, lambda q=question, n=n, s=shape: ask(q, n, s))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": found, "answer": text, "shape": shape})
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
