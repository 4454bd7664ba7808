"""LanceDB (``lancedb``, embedded: a database directory) instrumented by OpenLLMetry's
``opentelemetry-instrumentation-lancedb``, with no framework and no span of the application's around
it: what a vector-store-only app sends.

The instrumentation wraps ``LanceTable.add``, ``.search`` and ``.delete`` in spans ``lancedb.add``,
``lancedb.search`` and ``lancedb.delete`` with ``db.system = lancedb`` and ``db.operation``, and no
result: ``search`` only builds the query (``LanceTable.search(vector).limit(k).to_list()`` runs it
after the span has ended). The plan's documents are added in one call (a trace of its own), then each
question is one search, a trace whose root is ``lancedb.search``. Embeddings are the app's own
(hashed word counts): no model.

Besides the usual report (per question its trace and the ids LanceDB returned), the app reports what
the SDK itself made of each trace (every span's name, kind, scope and attribute keys, from an
in-memory exporter on the same provider), the texts ragmon must never keep, and which traces are the
first of their shape.
"""

from __future__ import annotations

import re
import tempfile
import zlib
from typing import Any

from opentelemetry.instrumentation.lancedb import LanceInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
made = InMemorySpanExporter()
tracer_provider.add_span_processor(SimpleSpanProcessor(made))
LanceInstrumentor().instrument(tracer_provider=tracer_provider)

import lancedb  # noqa: E402  (instrumented first, as the instrumentation asks)
import pyarrow as pa  # noqa: E402

DIMENSIONS, TOP_K = 64, 2


def embed(text: str) -> list[float]:
    counts = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        counts[zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
    norm = sum(c * c for c in counts) ** 0.5 or 1.0
    return [c / norm for c in counts]


schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), DIMENSIONS)), ("text", pa.string()),
                    ("doc_id", pa.string())])
database = lancedb.connect(tempfile.mkdtemp(prefix="lancedb-app-"))
table = database.create_table(plan["index"], schema=schema)
rows = [{"id": f"{d['doc_id']}#0", "vector": embed(d["text"]), "text": d["text"], "doc_id": d["doc_id"]}
        for d in plan["documents"]]
questions: list[dict[str, Any]] = []
_, added = one_trace(roots, lambda: table.add(rows))
traces = [{"trace_id": added, "shape": "add", "first_of_its_shape": True}]
for question in plan["questions"]:
    found, trace_id = one_trace(roots, lambda q=question: table.search(embed(q)).limit(TOP_K).to_list())
    questions.append({"trace_id": trace_id, "question": question, "found": [row["id"] for row in found]})
    traces.append({"trace_id": trace_id, "shape": "search", "first_of_its_shape": len(questions) == 1})
tracer_provider.force_flush()

spans: dict[str, list[dict[str, Any]]] = {}
for span in made.get_finished_spans():
    spans.setdefault(format(span.context.trace_id, "032x"), []).append({
        "name": span.name, "kind": span.kind.name.lower(), "scope": span.instrumentation_scope.name,
        "scope_version": span.instrumentation_scope.version or "", "keys": sorted(span.attributes),
        "attributes": {k: v for k, v in span.attributes.items() if isinstance(v, str | int | float | bool)}})
texts = sorted({d["text"] for d in plan["documents"]} | set(plan["questions"]) | {r["id"] for r in rows})
report(tracer_provider, {"questions": questions, "traces": traces, "traces_without_retrieval": len(traces),
                         "spans": spans, "texts": texts})
