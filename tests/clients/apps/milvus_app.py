"""Milvus Lite (``pymilvus`` with ``milvus-lite``: a local Milvus server on a file) instrumented by
OpenLLMetry's ``opentelemetry-instrumentation-milvus``, with no framework around it, under root spans
the application makes itself (OpenInference CHAIN: ``input.value``, ``user.id``, ``metadata`` JSON
with tenant, groups and index; ``output.value`` when it answers).

The instrumentation reports each ``MilvusClient.search`` as a ``milvus.search`` span (``db.system =
milvus``) with one ``db.search.result`` span event per result: ``db.search.result.id``, ``.distance``
as a string (for a COSINE collection, the similarity) and ``.entity``, the requested output fields
written as Python's ``repr`` of a dict (not JSON). ``create_collection`` and ``insert`` are traces of
their own (ingestion: no retrieval). The chunks keep ``doc_id``, ``doc_version`` and ``acl`` (a list)
in Milvus's dynamic field. Embeddings are the application's own (word counts over the corpus'
vocabulary): no model. The last question searches with a filter no chunk passes: an empty list.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.instrumentation.milvus import MilvusInstrumentor
from otel_export import arguments, load_plan, one_trace, provider, report
from word_vectors import WordVectors

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
MilvusInstrumentor().instrument(tracer_provider=tracer_provider)
tracer = tracer_provider.get_tracer("rag-app")

from pymilvus import MilvusClient  # noqa: E402  (instrumented first, as the instrumentation asks)

TOP_K = 2
OUTPUT_FIELDS = ["text", "doc_id", "doc_version", "acl"]
caller = plan["caller"]


vectors = WordVectors(d["text"] for d in plan["documents"])
embed = vectors.embed


def row(d: dict[str, Any]) -> dict[str, Any]:
    fields = {"id": f"{d['doc_id']}#0", "vector": embed(d["text"]), "text": d["text"], "doc_id": d["doc_id"]}
    if d["version"] is not None:
        fields["doc_version"] = d["version"]
    if d["acl"] is not None:
        fields["acl"] = d["acl"]
    return fields


before = len(roots.trace_ids)
client = MilvusClient(str(Path(tempfile.mkdtemp(prefix="milvus-")) / "rag.db"))
client.create_collection(plan["index"], dimension=vectors.dimension, id_type="string", max_length=256,
                         metric_type="COSINE")
client.insert(plan["index"], [row(d) for d in plan["documents"]])
ingestion_traces = len(roots.trace_ids) - before


def search(question: str, filter_: str = "") -> list[dict[str, Any]]:
    """What Milvus returned, as the report's documents (its distance is not a score: none given)."""
    [found] = client.search(plan["index"], data=[embed(question)], limit=TOP_K, filter=filter_,
                            output_fields=OUTPUT_FIELDS)
    return [{"id": hit["id"], "content": hit["entity"]["text"],
             "metadata": {k: v for k, v in hit["entity"].items() if k != "text"}} for hit in found]


def answer(question: str, filter_: str = "") -> tuple[list[dict[str, Any]], str]:
    metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
    with tracer.start_as_current_span("rag-answer", attributes={
            "openinference.span.kind": "CHAIN", "input.value": question, "user.id": caller["id"],
            "metadata": json.dumps(metadata)}) as span:
        found = search(question, filter_)
        text = f"From {len(found)} passages: {re.split(r'[:;.]', found[0]['content'])[0]}." if found else \
            "No passage answers that."
        span.set_attribute("output.value", text)
        return found, text


questions = []
for n, question in enumerate(plan["questions"]):
    last = n == len(plan["questions"]) - 1
    (found, text), trace_id = one_trace(roots, lambda q=question, f='doc_id == "nothing-here"' if last else "":
                                        answer(q, f))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": found, "answer": text})
client.close()
report(tracer_provider, {"questions": questions, "traces_without_retrieval": ingestion_traces})
