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


class Transport(Protocol):
    """Where emitted events go. ``send`` may buffer; ``flush`` waits until sent."""

    def send(self, event: dict[str, Any], key: str | None) -> None: ...

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
        self.emitter.transport.send(self.event, self.key)
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
