"""The real Pinecone client (``pinecone``) instrumented by OpenLLMetry's
``opentelemetry-instrumentation-pinecone``, with no framework around it, under root spans the
application makes itself (OpenInference CHAIN: ``input.value``, ``user.id``, ``metadata`` JSON with
tenant, groups and index; ``output.value`` when it answers).

Pinecone is a hosted service: the client is pointed (``Pinecone(...).Index(host=...)``) at the
stand-in of ``pinecone_standin.py``, a local server answering upsert and query in the JSON shapes of
Pinecone's REST API. The client, its instrumentation and the spans they make are real.

The instrumentation reports each ``Index.query`` as a ``pinecone.query`` span (``db.system =
Pinecone``, no ``db.operation``) with one ``db.query.result`` span event per match: the id, the
score, the metadata written as ``str(dict)`` (Python's repr, not JSON) and the match's vector
(asked for here with ``include_values``, so that the events carry it). ``upsert`` is a trace of its
own (ingestion: no retrieval). The chunks keep ``text``, ``doc_id``, ``doc_version`` and ``acl`` (a
list of strings) in their metadata. Embeddings are the application's own (word counts over the
corpus' vocabulary): no model. The last question queries with a filter no chunk passes: an empty
list.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry.instrumentation.pinecone import PineconeInstrumentor
from otel_export import arguments, document_metadata, load_plan, one_trace, provider, report
from pinecone_standin import StandIn
from word_vectors import WordVectors

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
PineconeInstrumentor().instrument(tracer_provider=tracer_provider)
tracer = tracer_provider.get_tracer("rag-app")

from pinecone import Pinecone  # noqa: E402  (instrumented first, as the instrumentation asks)

TOP_K = 2
caller = plan["caller"]
vectors = WordVectors(d["text"] for d in plan["documents"])
embed = vectors.embed

stand_in = StandIn()
index = Pinecone(api_key="stand-in-key").Index(host=stand_in.host)

before = len(roots.trace_ids)
index.upsert(vectors=[{"id": f"{d['doc_id']}#0", "values": embed(d["text"]),
                       "metadata": {"text": d["text"], **document_metadata(d)}} for d in plan["documents"]],
             namespace=plan["index"])
ingestion_traces = len(roots.trace_ids) - before


def query(question: str, filter_: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[float]]:
    """What Pinecone returned, as the report's documents, and the matches' scores apart (ragmon keeps
    none: see docs/events.md)."""
    found = index.query(vector=embed(question), top_k=TOP_K, namespace=plan["index"], filter=filter_,
                        include_metadata=True, include_values=True)
    documents = [{"id": m.id, "content": m.metadata["text"],
                  "metadata": {k: v for k, v in m.metadata.items() if k != "text"}} for m in found.matches]
    return documents, [m.score for m in found.matches]


def answer(question: str, filter_: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[float], str]:
    metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
    with tracer.start_as_current_span("rag-answer", attributes={
            "openinference.span.kind": "CHAIN", "input.value": question, "user.id": caller["id"],
            "metadata": json.dumps(metadata)}) as span:
        found, scores = query(question, filter_)
        text = f"From {len(found)} passages: {re.split(r'[:;.]', found[0]['content'])[0]}." if found else \
            "No passage answers that."
        span.set_attribute("output.value", text)
        return found, scores, text


questions = []
for n, question in enumerate(plan["questions"]):
    last = n == len(plan["questions"]) - 1
    (found, scores, text), trace_id = one_trace(
        roots, lambda q=question, f={"doc_id": {"$eq": "nothing-here"}} if last else None: answer(q, f))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": found, "answer": text, "scores": scores})
stand_in.close()
report(tracer_provider, {"questions": questions, "traces_without_retrieval": ingestion_traces,
                         "vector_values": sorted({v for d in plan["documents"] for v in embed(d["text"]) if v})})
