"""The events of docs/events.md as typed structs.

Structs are declared ``gc=False``: they hold no reference cycles, and leaving them out of the
cyclic garbage collector keeps its pauses short when millions are alive.

Decoding (``ragmon.monitor.core.decode``) validates types and required fields in one pass over the bytes and
then normalizes: every :data:`Timestamp` field holds float Unix seconds (UTC) once an event has
left the decoder, whatever form it arrived in (``ragmon.monitor.core.times``), and every ACL a list
of principals, whether it came as a list or as a string (``ragmon.monitor.core.acl``). Unknown JSON
fields are ignored, so producers can add fields without breaking us.
"""

from __future__ import annotations

from typing import Literal

import msgspec

#: On the wire: a string or a number in one of the forms of ``ragmon.monitor.core.times``. After
#: decoding: float Unix seconds.
Timestamp = str | float
#: On the wire: a list of principals or one string of them (``ragmon.monitor.core.acl``). After
#: decoding: a list; None = unknown.
Acl = list[str] | str

FeedbackKind = Literal["thumb", "escalation", "citation_click", "copy", "comment"]
FEEDBACK_KINDS: tuple[str, ...] = FeedbackKind.__args__  # type: ignore[attr-defined]


class Passage(msgspec.Struct, omit_defaults=True, gc=False):
    """A retrieved chunk. Its rank is its position in the list that holds it, from 1."""

    id: str
    score: float | None = None
    doc_id: str | None = None
    doc_version: str | None = None
    span: tuple[int, int] | None = None  # [start, end) characters in the source document version
    text: str | None = None
    acl: Acl | None = None  # principals allowed to read; "*" = everyone; None = unknown
    indexed_at: Timestamp | None = None
    source_modified_at: Timestamp | None = None
    embedding_model: str | None = None


class Retrieval(msgspec.Struct, omit_defaults=True, gc=False):
    """One retriever's candidate list (keyword, vector, fused, reranked ...), in rank order.

    ``query`` is what this retriever searched when it was not the user's message as asked: a
    question condensed with the chat history, one of a multi-query retriever's rewrites, a
    hypothetical answer (HyDE). None: it searched the trace's ``query``."""

    retriever: str
    passages: list[Passage] = []
    query: str | None = None

    def searched(self, trace: TraceEvent) -> str:
        """What this list was searched with: its own ``query``, else the user's message."""
        return trace.query if self.query is None else self.query


class Caller(msgspec.Struct, omit_defaults=True, gc=False):
    id: str | None = None
    groups: list[str] = []


class IndexRef(msgspec.Struct, omit_defaults=True, gc=False):
    name: str
    version: str | None = None


class Answer(msgspec.Struct, omit_defaults=True, gc=False):
    text: str | None = None
    abstained: bool | None = None  # None: decide from the text (refusal patterns)
    citations: list[str] = []


class Latency(msgspec.Struct, omit_defaults=True, gc=False):
    """Milliseconds per stage, as reported by the RAG application."""

    retrieve: float | None = None
    rerank: float | None = None
    generate: float | None = None
    total: float | None = None


class Usage(msgspec.Struct, omit_defaults=True, gc=False):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


def partition_key(caller_id: str | None, conversation_id: str | None) -> str | None:
    """The key that keeps one asker's questions together: the caller id, else the conversation id.

    The emitter keys Kafka records by it (one consumer then sees a caller's questions in order),
    and rephrase detection compares a question with the previous one of the same key.
    """
    return caller_id or conversation_id or None


#: The highest ``turn`` a trace may carry (docs/events.md): far above any real conversation.
MAX_TURN = 1_000_000


class TraceEvent(msgspec.Struct, tag="trace", tag_field="type", omit_defaults=True, gc=False):
    """One question answered. ``trace_id`` is the idempotency key.

    A chat turn is a trace too: ``query`` is the user's message as they typed it (never a
    rewrite: what each retriever searched is its :attr:`Retrieval.query`), ``conversation_id``
    groups the turns, and ``turn`` orders them (1 for the first; None: by ``time``)."""

    trace_id: str
    time: Timestamp
    query: str
    index: IndexRef
    tenant: str = "default"
    conversation_id: str | None = None
    turn: int | None = None  # 1, 2, ... within the conversation; None: ordered by time
    caller: Caller | None = None
    retrievals: list[Retrieval] = []
    context: list[Passage] | None = None  # None: the last retrieval list is what the model saw
    answer: Answer | None = None  # None: the trace carries no answer (outcome "unknown")
    latency_ms: Latency | None = None
    usage: Usage | None = None

    def final_context(self) -> list[Passage]:
        """The passages sent to the model: ``context`` if given, else the last retrieval list."""
        if self.context is not None:
            return self.context
        return self.retrievals[-1].passages if self.retrievals else []


class FeedbackEvent(msgspec.Struct, tag="feedback", tag_field="type", omit_defaults=True, gc=False):
    """A user's reaction to an earlier trace; may arrive minutes or hours after it."""

    trace_id: str
    kind: FeedbackKind
    time: Timestamp | None = None  # absent: the decoder sets the time it was received
    value: Literal["up", "down"] | None = None
    comment: str | None = None


class DocumentEvent(msgspec.Struct, tag="document", tag_field="type", omit_defaults=True, gc=False):
    """The source system's change feed: the newest version of a document and who may read it."""

    doc_id: str
    version: str
    modified_at: Timestamp
    tenant: str = "default"
    acl: Acl | None = None
    deleted: bool = False


class IndexEvent(msgspec.Struct, tag="index", tag_field="type", omit_defaults=True, gc=False):
    """The indexing pipeline reports that a document version was embedded into an index.

    ``acl``: who the index lets read the document's chunks, as written into their metadata when
    they were embedded (None: unknown); compared with the document's own ACL it shows a
    revocation still waiting in the index."""

    index: str
    doc_id: str
    version: str
    indexed_at: Timestamp
    embedding_model: str | None = None
    chunks: int | None = None
    acl: Acl | None = None


Event = TraceEvent | FeedbackEvent | DocumentEvent | IndexEvent
EVENT_TYPES: tuple[str, ...] = ("trace", "feedback", "document", "index")
