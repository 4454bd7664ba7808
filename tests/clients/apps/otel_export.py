"""What every client app shares. Runs in the frameworks' own virtual environment (never imports
ragmon): the OpenTelemetry SDK set up as an application sets it up, exporting over OTLP/HTTP to
one ragmon server per span processor and encoding at once, a record of the trace each question
made, and the report the test compares ragmon with.

An app is run as ``python APP.py --plan PLAN.json --tenant T --export batch:protobuf=URL
--export simple:json=URL ...``. The plan holds the documents to index, the caller and the
questions. The app prints one JSON object, ``{"questions": [...]}``: per question the OTel trace
id it made, the caller, and what the framework itself returned — ``lists``, the documents of each
retrieval list in order (as ``{"id", "content", "metadata", "score"}``), ``context``, the
documents the model was given, and ``answer``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

PROCESSORS = {"batch": BatchSpanProcessor, "simple": SimpleSpanProcessor}
EXPORTERS = {"protobuf": ProtobufExporter, "json": JsonExporter}


def arguments(extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--export", action="append", default=[], metavar="PROCESSOR:ENCODING=URL",
                        help="a ragmon server to export to, e.g. batch:protobuf=http://127.0.0.1:4318")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--plan", required=True, help="JSON: documents, caller, questions")
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def load_plan(args: argparse.Namespace) -> dict[str, Any]:
    with open(args.plan) as file:
        return json.load(file)


def document_metadata(d: dict[str, Any]) -> dict[str, Any]:
    """The metadata an app indexes a plan document with: its id, and its version and ACL when the
    plan gives them (a document without them tests what ragmon does without them)."""
    metadata = {"doc_id": d["doc_id"]}
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = d["acl"]
    return metadata


class Roots(SpanProcessor):
    """The trace id of every root span, in the order they started."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []

    def on_start(self, span, parent_context=None) -> None:
        if span.parent is None:
            self.trace_ids.append(format(span.context.trace_id, "032x"))


def span_processors(exports: list[str]) -> list[SpanProcessor]:
    """A span processor exporting to each ``PROCESSOR:ENCODING=URL``."""
    processors = []
    for spec in exports:
        kind, url = spec.split("=", 1)
        processor, encoding = kind.split(":")
        exporter = EXPORTERS[encoding](endpoint=f"{url}/v1/traces", timeout=30)
        processors.append(PROCESSORS[processor](exporter))
    return processors


def provider(exports: list[str], resource: dict[str, Any] | None = None) -> tuple[TracerProvider, Roots]:
    """A TracerProvider exporting every span to each ``PROCESSOR:ENCODING=URL``."""
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "rag-app", **(resource or {})}))
    roots = Roots()
    tracer_provider.add_span_processor(roots)
    for processor in span_processors(exports):
        tracer_provider.add_span_processor(processor)
    return tracer_provider, roots


def traceloop_provider(exports: list[str]) -> tuple[TracerProvider, Roots]:
    """OpenLLMetry's SDK set up as its users set it up, ``Traceloop.init`` (its default
    instrumentations, the global TracerProvider), with span processors of our own: each
    ``PROCESSOR:ENCODING=URL``, and the one that notes the root spans."""
    from opentelemetry import trace
    from traceloop.sdk import Traceloop

    roots = Roots()
    Traceloop.init(app_name="rag-app", processor=[roots, *span_processors(exports)], telemetry_enabled=False)
    return trace.get_tracer_provider(), roots


def one_trace(roots: Roots, run: Callable[[], Any]) -> tuple[Any, str]:
    """Run one question; returns its result and the id of the one trace it made."""
    before = len(roots.trace_ids)
    result = run()
    made = roots.trace_ids[before:]
    if len(made) != 1:
        raise SystemExit(f"expected one trace per question, got {len(made)}")
    return result, made[0]


def report(tracer_provider: TracerProvider, data: dict[str, Any]) -> None:
    """Flush every exporter, then print the report for the test."""
    if not tracer_provider.force_flush(60_000):
        raise SystemExit("the span processors did not flush")
    tracer_provider.shutdown()
    json.dump(data, sys.stdout)
    sys.stdout.write("\n")
