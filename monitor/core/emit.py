"""Building ragmon events the way a RAG application describes its work: the transport-free core
of the emitter (``ragmon.collectors.emitter`` adds the Kafka and OpenTelemetry transports).

    emitter = Emitter(transport)
    trace = emitter.start_trace("How many days carry over?", caller="u-123", groups=["staff"],
                                tenant="acme", index="policies", conversation="c-77")
    trace.add_retrieval("bm25", [{"id": "leave#4", "score": 12.1, "doc_id": "leave", "doc_version": "3"}])
    trace.set_context([...])
    trace.set_answer("Five days.", citations=["leave#4"])
    trace_id = trace.end()                             # hands the trace event to the transport
    emitter.feedback(trace_id, "thumb", "down")        # later, when the user reacts

Events are keyed by caller id (else conversation id): on Kafka, one consumer then sees all of a
caller's questions, in order, which rephrase detection needs (a conversation has one caller, so
its order holds too).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragmon.monitor.core.model import partition_key


def event_key(event: Mapping[str, Any]) -> str | None:
    """The partition key of an emitted trace event (see :func:`partition_key`)."""
    caller = event.get("caller") or {}
    return partition_key(caller.get("id"), event.get("conversation_id"))


class Transport(Protocol):
    """Where emitted events go. ``send`` may buffer, and returns the id the trace will be known
    by when the transport assigns its own (OTel trace ids); ``flush`` waits until sent."""

    def send(self, event: dict[str, Any], key: str | None) -> str | None: ...

    def flush(self, timeout: float) -> None: ...


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

    def add_retrieval(self, retriever: str, passages: Iterable[Mapping[str, Any]], *,
                      query: str | None = None) -> TraceBuilder:
        """A candidate list from one retriever, in rank order; ``query``: what it searched when that
        was not the user's message (a condensed or expanded rewrite, a hypothetical answer)."""
        retrieval: dict[str, Any] = {"retriever": retriever, "passages": [dict(p) for p in passages]}
        if query is not None:
            retrieval["query"] = query
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
                    trace_id: str | None = None, turn: int | None = None) -> TraceBuilder:
        """A trace of ``query``, the user's message as asked; ``turn``: its place in ``conversation``
        (1 for the first)."""
        event: dict[str, Any] = {"type": "trace", "trace_id": trace_id or uuid.uuid4().hex, "time": self._clock(),
                                 "tenant": tenant, "query": query, "index": {"name": index}}
        if index_version:
            event["index"]["version"] = index_version
        if caller is not None or groups:
            event["caller"] = {"id": caller, "groups": list(groups)} if caller else {"groups": list(groups)}
        if conversation:
            event["conversation_id"] = conversation
        if turn is not None:
            event["turn"] = turn
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


class ListTransport:
    """Keeps what is sent, in order: for simulations and tests."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], str | None]] = []

    def send(self, event: dict[str, Any], key: str | None) -> None:
        self.sent.append((event, key))
        return None

    def flush(self, timeout: float) -> None:
        pass
