"""Transports for the emitter (``ragmon.monitor.core.emit``): native events to Kafka, or OpenTelemetry spans
in OpenInference shape through the application's own TracerProvider, or through one of the
transport's own that exports over OTLP/HTTP (``ragmon[otel]``).

    from ragmon.collectors.emitter import Emitter, KafkaTransport, OpenInferenceTransport

    emitter = Emitter(OpenInferenceTransport(tracer_provider))
    # or: Emitter(OpenInferenceTransport.otlp("http://ragmon:4318/v1/traces", service_name="support-bot"))
    # or: Emitter(KafkaTransport(KafkaTransport.producer(["kafka:9092"]), "rag.traces"))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ragmon.collectors import semconv as sc
from ragmon.monitor.core.emit import Emitter, ListTransport, TraceBuilder, Transport, event_key

__all__ = ["Emitter", "KafkaTransport", "ListTransport", "OpenInferenceTransport", "TraceBuilder", "Transport",
           "event_key"]


class KafkaTransport:
    """Native events to a Kafka topic through a kafka-python producer (JSON values, keyed)."""

    def __init__(self, producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._encode = msgspec.json.Encoder().encode

    @staticmethod
    def producer(bootstrap_servers: list[str], **options: Any):
        """An idempotent, all-replicas-acknowledged producer, as the emitter expects. Batches of up
        to 256 KB per partition (``batch_size`` in ``options`` overrides it): with kafka-python's
        16 KB default, every five 3 KB traces to a partition cost a request of their own."""
        from kafka import KafkaProducer

        return KafkaProducer(**{"bootstrap_servers": bootstrap_servers, "acks": "all", "enable_idempotence": True,
                                "linger_ms": 5, "batch_size": 256 * 1024, **options})

    def send(self, event: dict[str, Any], key: str | None) -> None:
        self.send_encoded(self._encode(event), key)
        return None

    def send_encoded(self, value: bytes, key: str | None) -> None:
        """Send an event already encoded as JSON (what the OTLP receiver forwards)."""
        self._producer.send(self._topic, value=value, key=key.encode() if key else None)

    def flush(self, timeout: float) -> None:
        self._producer.flush(timeout)


class OpenInferenceTransport:
    """Trace events as OpenTelemetry spans in OpenInference shape, through the application's
    own ``TracerProvider`` (and whatever exporter it has, e.g. OTLP/HTTP to ragmon).

    One trace becomes a CHAIN root span (query, answer, caller, conversation, a ``metadata`` JSON
    with tenant, groups, index, abstained, citations and turn, and the ids of the context passages in
    ``ragmon.context.document_ids``), a RETRIEVER span per retrieval list (its input: what it
    searched), a RERANKER span for the context when one is given, and an LLM span with token counts.
    The names and the document encoding are those the receiver reads (``ragmon.collectors.semconv``).
    The trace is then known by its OTel trace id, which :meth:`send` returns. Feedback becomes a
    span carrying ``ragmon.feedback.*`` attributes.

    Given the application's provider, the transport needs only ``opentelemetry-api`` (the
    application has it): its spans take the application's sampler, resource and exporter, and the
    root span is a child of the application's current span. An application without an
    OpenTelemetry set-up uses :meth:`otlp` instead.
    """

    def __init__(self, tracer_provider) -> None:
        self._provider = tracer_provider
        self._tracer = tracer_provider.get_tracer("ragmon.emitter")
        self._owns_provider = False

    @classmethod
    def otlp(cls, endpoint: str, *, service_name: str | None = None, headers: Mapping[str, str] | None = None,
             timeout: float = 10.0) -> OpenInferenceTransport:
        """Spans exported over OTLP/HTTP (protobuf) to ``endpoint``, the full traces URL (e.g.
        ``http://ragmon:4318/v1/traces``), through a provider of the transport's own built on the
        OpenTelemetry SDK: its ``TracerProvider``, its ``BatchSpanProcessor`` (a bounded queue,
        exported on a thread of its own, so :meth:`send` never waits on the network) and its OTLP
        exporter, so what reaches the receiver is the SDK's encoding. ``service_name`` names the
        application (else ``OTEL_SERVICE_NAME``); ``headers`` go with every export (e.g.
        ``{"authorization": "Bearer ..."}``). :meth:`flush` waits until what was sent is exported;
        :meth:`shutdown` also stops the export thread.

        Needs ``pip install "ragmon[otel]"`` (opentelemetry-sdk and its OTLP/HTTP exporter); the
        base install raises ImportError naming that extra."""
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as missing:
            raise ImportError(f"OpenInferenceTransport.otlp needs the OpenTelemetry SDK and its OTLP/HTTP exporter "
                              f"(no module {missing.name!r}): pip install 'ragmon[otel]'") from missing
        resource = Resource.create({SERVICE_NAME: service_name} if service_name else {})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=headers,
                                                                        timeout=timeout)))
        transport = cls(provider)
        transport._owns_provider = True
        return transport

    def send(self, event: dict[str, Any], key: str | None) -> str | None:
        if event["type"] == "trace":
            return self._trace(event)
        if event["type"] == "feedback":
            attributes = {sc.FEEDBACK_TRACE_ID: event["trace_id"], sc.FEEDBACK_KIND: event["kind"]}
            if event.get("value") is not None:
                attributes[sc.FEEDBACK_VALUE] = event["value"]
            start = int(event["time"] * 1e9)
            self._tracer.start_span("ragmon.feedback", start_time=start, attributes=attributes).end(end_time=start)
            return None
        raise ValueError("OpenInference carries traces and feedback; send catalog events as native events")

    def flush(self, timeout: float) -> None:
        self._provider.force_flush(int(timeout * 1000))

    def shutdown(self) -> None:
        """Export what waits and stop the provider, when it is the transport's own (:meth:`otlp`);
        an application's provider is the application's to shut down."""
        if self._owns_provider:
            self._provider.shutdown()

    def _trace(self, event: dict[str, Any]) -> str:
        from opentelemetry import trace as otel

        start = int(event["time"] * 1e9)
        latency = event.get("latency_ms") or {}
        end = start + int(latency.get("total", 1) * 1e6)
        answer = event.get("answer") or {}
        caller = event.get("caller") or {}
        metadata: dict[str, Any] = {"tenant": event.get("tenant", "default"), "index": event["index"]["name"],
                                    "groups": caller.get("groups", [])}
        if event["index"].get("version"):
            metadata["index_version"] = event["index"]["version"]
        if "abstained" in answer:
            metadata["abstained"] = answer["abstained"]
        if answer.get("citations"):
            metadata["citations"] = answer["citations"]
        if event.get("turn") is not None:
            metadata["turn"] = event["turn"]
        retrievals = event.get("retrievals", [])
        context = event.get("context")
        final = context if context is not None else (retrievals[-1]["passages"] if retrievals else [])
        attributes = {sc.SPAN_KIND: sc.CHAIN, sc.INPUT_VALUE: event["query"], sc.METADATA: sc.json_text(metadata),
                      sc.CONTEXT_DOCUMENT_IDS: [p["id"] for p in final]}
        if answer.get("text") is not None:
            attributes[sc.OUTPUT_VALUE] = answer["text"]
        if caller.get("id"):
            attributes[sc.USER_ID] = caller["id"]
        if event.get("conversation_id"):
            attributes[sc.SESSION_ID] = event["conversation_id"]
        root = self._tracer.start_span("rag", start_time=start, attributes=attributes)
        cursor = start
        stages = [(sc.RETRIEVER, r["retriever"], sc.RETRIEVAL_DOCUMENTS, r["passages"], latency.get("retrieve"),
                   r.get("query", event["query"])) for r in retrievals]
        if context is not None:
            stages.append((sc.RERANKER, "reranker", sc.RERANKER_OUTPUT_DOCUMENTS, context, latency.get("rerank"),
                           event["query"]))
        parent = otel.set_span_in_context(root)
        for kind, name, prefix, passages, took, searched in stages:
            span_end = cursor + int((took or 1) * 1e6 / max(1, len(stages)))
            span = self._tracer.start_span(name, context=parent, start_time=cursor, attributes={
                sc.SPAN_KIND: kind, sc.INPUT_VALUE: searched, sc.METADATA: sc.json_text({"retriever": name}),
                **sc.document_attributes(prefix, passages)})
            span.end(end_time=span_end)
            cursor = span_end
        usage = event.get("usage") or {}
        llm = {sc.SPAN_KIND: sc.LLM}
        if answer.get("text") is not None:
            llm[sc.OUTPUT_VALUE] = answer["text"]
        if usage.get("input_tokens") is not None:
            llm[sc.LLM_PROMPT_TOKENS] = usage["input_tokens"]
        if usage.get("output_tokens") is not None:
            llm[sc.LLM_COMPLETION_TOKENS] = usage["output_tokens"]
        generate_end = min(end, cursor + int((latency.get("generate") or 1) * 1e6))
        self._tracer.start_span("llm", context=parent, start_time=cursor, attributes=llm).end(end_time=generate_end)
        root.end(end_time=end)
        return format(root.get_span_context().trace_id, "032x")

