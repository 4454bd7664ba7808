"""An emitter for RAG applications: a few calls that describe one answered question, sent as
ragmon events.

    emitter = Emitter(KafkaTransport(producer, "rag.traces"))
    trace = emitter.start_trace("How many days carry over?", caller="u-123", groups=["staff"],
                                tenant="acme", index="policies", conversation="c-77")
    trace.add_retrieval("bm25", [{"id": "leave#4", "score": 12.1, "doc_id": "leave", "doc_version": "3"}])
    trace.set_context([...])
    trace.set_answer("Five days.", citations=["leave#4"])
    trace.end()                                   # sends the trace event
    emitter.feedback(trace.trace_id, "thumb", "down")   # later, when the user reacts

Events are keyed by caller id (else conversation id): on Kafka, one consumer then sees all of a
caller's questions, in order, which rephrase detection needs (a conversation has one caller, so
its order holds too). The Kafka producer is idempotent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec


def event_key(event: Mapping[str, Any]) -> str | None:
    """The partition key of a trace event: its caller id, else its conversation id."""
    caller = event.get("caller") or {}
    return caller.get("id") or event.get("conversation_id")


class Transport(Protocol):
    """Where emitted events go. ``send`` may buffer, and returns the id the trace will be known
    by when the transport assigns its own (OTel trace ids); ``flush`` waits until sent."""

    def send(self, event: dict[str, Any], key: str | None) -> str | None: ...

    def flush(self, timeout: float) -> None: ...


class KafkaTransport:
    """Native events to a Kafka topic through a kafka-python producer (JSON values, keyed)."""

    def __init__(self, producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._encode = msgspec.json.Encoder().encode

    @staticmethod
    def producer(bootstrap_servers: list[str], **options: Any):
        """An idempotent, all-replicas-acknowledged producer, as the emitter expects."""
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", enable_idempotence=True,
                             linger_ms=5, **options)

    def send(self, event: dict[str, Any], key: str | None) -> None:
        self._producer.send(self._topic, value=self._encode(event), key=key.encode() if key else None)
        return None

    def flush(self, timeout: float) -> None:
        self._producer.flush(timeout)


@dataclass
class TraceBuilder:
    """One question being answered. Call :meth:`end` once to send it."""

    emitter: Emitter
    event: dict[str, Any]
    key: str | None
    started: float = field(default_factory=time.monotonic)

    @property
    def trace_id(self) -> str:
        return self.event["trace_id"]

    def add_retrieval(self, retriever: str, passages: Iterable[Mapping[str, Any]]) -> TraceBuilder:
        """A candidate list from one retriever, in rank order."""
        retrieval = {"retriever": retriever, "passages": [dict(p) for p in passages]}
        self.event.setdefault("retrievals", []).append(retrieval)
        return self

    def set_context(self, passages: Iterable[Mapping[str, Any]]) -> TraceBuilder:
        """The passages sent to the model, after rerank and truncation."""
        self.event["context"] = [dict(p) for p in passages]
        return self

    def set_answer(self, text: str | None, *, abstained: bool | None = None,
                   citations: Iterable[str] = ()) -> TraceBuilder:
        answer: dict[str, Any] = {"text": text, "citations": list(citations)}
        if abstained is not None:
            answer["abstained"] = abstained
        self.event["answer"] = answer
        return self

    def set_latency(self, **milliseconds: float) -> TraceBuilder:
        """Per stage: retrieve, rerank, generate, total (total defaults to the time since start)."""
        milliseconds.setdefault("total", round((time.monotonic() - self.started) * 1000, 1))
        self.event["latency_ms"] = milliseconds
        return self

    def set_usage(self, input_tokens: int | None = None, output_tokens: int | None = None,
                  cost_usd: float | None = None) -> TraceBuilder:
        self.event["usage"] = {k: v for k, v in (("input_tokens", input_tokens), ("output_tokens", output_tokens),
                                                  ("cost_usd", cost_usd)) if v is not None}
        return self

    def end(self) -> str:
        """Send the trace; returns its id (for feedback later)."""
        assigned = self.emitter.transport.send(self.event, self.key)
        if assigned:
            self.event["trace_id"] = assigned
        return self.trace_id


class Emitter:
    """Builds ragmon events and hands them to a transport."""

    def __init__(self, transport: Transport, clock: Callable[[], float] = time.time) -> None:
        self.transport = transport
        self._clock = clock

    def start_trace(self, query: str, *, index: str, caller: str | None = None, groups: Iterable[str] = (),
                    tenant: str = "default", conversation: str | None = None, index_version: str | None = None,
                    trace_id: str | None = None) -> TraceBuilder:
        event: dict[str, Any] = {"type": "trace", "trace_id": trace_id or uuid.uuid4().hex, "time": self._clock(),
                                 "tenant": tenant, "query": query, "index": {"name": index}}
        if index_version:
            event["index"]["version"] = index_version
        if caller is not None or groups:
            event["caller"] = {"id": caller, "groups": list(groups)} if caller else {"groups": list(groups)}
        if conversation:
            event["conversation_id"] = conversation
        return TraceBuilder(self, event, key=caller or conversation)

    def feedback(self, trace_id: str, kind: str, value: str | None = None, *, comment: str | None = None,
                 key: str | None = None) -> None:
        """A user's reaction to an earlier trace. ``key``: the trace's key (its caller id, else its
        conversation id), so the feedback travels the same partition as its trace."""
        event: dict[str, Any] = {"type": "feedback", "trace_id": trace_id, "kind": kind, "time": self._clock()}
        if value is not None:
            event["value"] = value
        if comment is not None:
            event["comment"] = comment
        self.transport.send(event, key)

    def send(self, event: dict[str, Any], key: str | None = None) -> None:
        """Any native event as is (document and index events from a pipeline, replays)."""
        self.transport.send(event, key)

    def flush(self, timeout: float = 30.0) -> None:
        self.transport.flush(timeout)


class OpenInferenceTransport:
    """Trace events as OpenTelemetry spans in OpenInference shape, through the application's
    own ``TracerProvider`` (and whatever exporter it has, e.g. OTLP/HTTP to ragmon).

    One trace becomes a CHAIN root span (query, answer, caller, conversation, and a ``metadata``
    JSON with tenant, groups, index, abstained and citations), a RETRIEVER span per retrieval
    list, a RERANKER span for the context when one is given, and an LLM span with token counts.
    The trace is then known by its OTel trace id, which :meth:`send` returns. Feedback becomes a
    span carrying ``ragmon.feedback.*`` attributes.
    """

    def __init__(self, tracer_provider) -> None:
        self._provider = tracer_provider
        self._tracer = tracer_provider.get_tracer("ragmon.emitter")

    def send(self, event: dict[str, Any], key: str | None) -> str | None:
        if event["type"] == "trace":
            return self._trace(event)
        if event["type"] == "feedback":
            attributes = {"ragmon.feedback.trace_id": event["trace_id"], "ragmon.feedback.kind": event["kind"]}
            if event.get("value") is not None:
                attributes["ragmon.feedback.value"] = event["value"]
            start = int(event["time"] * 1e9)
            self._tracer.start_span("ragmon.feedback", start_time=start, attributes=attributes).end(end_time=start)
            return None
        raise ValueError("OpenInference carries traces and feedback; send catalog events as native events")

    def flush(self, timeout: float) -> None:
        self._provider.force_flush(int(timeout * 1000))

    def _trace(self, event: dict[str, Any]) -> str:
        from opentelemetry import trace as otel

        encode = msgspec.json.encode
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
        attributes = {"openinference.span.kind": "CHAIN", "input.value": event["query"],
                      "metadata": encode(metadata).decode()}
        if answer.get("text") is not None:
            attributes["output.value"] = answer["text"]
        if caller.get("id"):
            attributes["user.id"] = caller["id"]
        if event.get("conversation_id"):
            attributes["session.id"] = event["conversation_id"]
        root = self._tracer.start_span("rag", start_time=start, attributes=attributes)
        context = otel.set_span_in_context(root)
        cursor = start
        stages = [("RETRIEVER", r["retriever"], "retrieval.documents", r["passages"], latency.get("retrieve"))
                  for r in event.get("retrievals", [])]
        if event.get("context") is not None:
            rerank = latency.get("rerank")
            stages.append(("RERANKER", "reranker", "reranker.output_documents", event["context"], rerank))
        for kind, name, prefix, passages, took in stages:
            span_end = cursor + int((took or 1) * 1e6 / max(1, len(stages)))
            span = self._tracer.start_span(name, context=context, start_time=cursor, attributes={
                "openinference.span.kind": kind, "input.value": event["query"],
                "metadata": encode({"retriever": name}).decode(), **_document_attributes(prefix, passages)})
            span.end(end_time=span_end)
            cursor = span_end
        usage = event.get("usage") or {}
        llm = {"openinference.span.kind": "LLM"}
        if answer.get("text") is not None:
            llm["output.value"] = answer["text"]
        if usage.get("input_tokens") is not None:
            llm["llm.token_count.prompt"] = usage["input_tokens"]
        if usage.get("output_tokens") is not None:
            llm["llm.token_count.completion"] = usage["output_tokens"]
        generate_end = min(end, cursor + int((latency.get("generate") or 1) * 1e6))
        self._tracer.start_span("llm", context=context, start_time=cursor, attributes=llm).end(end_time=generate_end)
        root.end(end_time=end)
        return format(root.get_span_context().trace_id, "032x")


_PASSAGE_METADATA = ("doc_id", "doc_version", "span", "acl", "indexed_at", "source_modified_at", "embedding_model")


def _document_attributes(prefix: str, passages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for i, passage in enumerate(passages):
        base = f"{prefix}.{i}.document"
        attributes[f"{base}.id"] = passage["id"]
        if passage.get("score") is not None:
            attributes[f"{base}.score"] = float(passage["score"])
        if passage.get("text") is not None:
            attributes[f"{base}.content"] = passage["text"]
        metadata = {k: passage[k] for k in _PASSAGE_METADATA if passage.get(k) is not None}
        if metadata:
            attributes[f"{base}.metadata"] = msgspec.json.encode(metadata).decode()
    return attributes
