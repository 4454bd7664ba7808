"""A traffic simulator: realistic multi-tenant RAG traffic as native event dicts.

Used by the demo, the tests and the benchmarks, so that all three see the same shapes: several
tenants, each with its own indexes, documents and ACLs; callers with groups; keyword, vector and
reranked retrieval lists with plausible score distributions; answers with citations, some
abstentions; late feedback; rephrased questions; and the catalog (document and index events)
that describes the corpus. Deterministic for a given seed and start time.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

from ragmon.monitor.core.emit import Emitter, ListTransport

TOPICS = {
    "policies": ["vacation carry-over", "parental leave", "remote work", "expense limits", "travel booking",
                 "sick leave", "overtime pay", "equipment budget", "relocation support", "training budget"],
    "handbook": ["onboarding checklist", "laptop setup", "security training", "code review rules",
                 "on-call rotation", "incident reviews", "release process", "access requests"],
    "support-kb": ["password reset", "invoice download", "plan upgrade", "data export", "SSO setup",
                   "API rate limits", "webhook retries", "account deletion", "billing address"],
}
QUESTION_FORMS = [
    "How does {t} work?", "What is the policy on {t}?", "Who approves {t}?", "Where do I find {t}?",
    "Is there a limit for {t}?", "What changed about {t} this year?", "Can contractors use {t}?",
]
REFUSALS = ["I don't know based on the provided documents.",
            "I could not find this in the available sources."]
GROUPS = ["staff", "hr", "finance", "engineering", "support", "managers", "contractors"]


# Memoized: every context passage carries its document's index times, a few hundred distinct
# values written hundreds of thousands of times in a long run
@lru_cache(maxsize=4096)
def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(eq=False)  # identity: documents are used as set members
class Document:
    doc_id: str
    tenant: str
    index: str
    topic: str
    version: int
    modified_at: float
    acl: list[str]
    chunks: int
    embedding_model: str
    # What the index holds: behind `version` while the index is stale.
    indexed_version: int = 0
    indexed_at: float = 0.0
    indexed_source_time: float = 0.0  # when the indexed version was made at the source

    def __post_init__(self) -> None:
        self.indexed_version = self.indexed_version or self.version
        self.indexed_source_time = self.indexed_source_time or self.modified_at
        self.indexed_at = self.indexed_at or self.modified_at + 600


@dataclass
class Caller:
    id: str
    tenant: str
    groups: list[str]


IncidentKind = Literal["stale_index", "leak", "no_answer_spike", "reembedding"]


@dataclass(frozen=True)
class Incident:
    """Something going wrong in the simulated system, from trace number ``start`` to ``end``.

    - ``stale_index``: at ``start``, half the documents of (tenant, index) change at the source and
      are never re-indexed; old versions keep being served.
    - ``leak``: each trace of (tenant, index) gets, with probability ``rate``, a passage in its
      candidates and its context that the caller may not read.
    - ``no_answer_spike``: the abstention rate of (tenant, index) becomes ``rate``.
    - ``reembedding``: at ``start``, half the documents of (tenant, index) are re-embedded with
      another model and the re-embedding stops there.
    """

    kind: IncidentKind
    tenant: str
    index: str
    start: int
    end: int | None = None
    rate: float = 1.0

    def active(self, n: int) -> bool:
        return self.start <= n and (self.end is None or n < self.end)


@dataclass
class Simulator:
    """Generates events from ``start`` on, about ``rate`` traces per simulated second."""

    seed: int = 7
    start: float = 1_795_000_000.0  # 2026-11-18
    tenants: tuple[str, ...] = ("acme", "globex", "initech")
    docs_per_index: int = 40
    callers_per_tenant: int = 300
    rate: float = 20.0
    feedback_probability: float = 0.08
    rephrase_probability: float = 0.04
    abstain_probability: float = 0.06
    candidates_per_retriever: int = 5
    context_size: int = 5
    incidents: Sequence[Incident] = ()
    documents: dict[tuple[str, str], list[Document]] = field(init=False)
    callers: dict[str, list[Caller]] = field(init=False)
    #: ground truth of what the incidents injected, e.g. ("leak_context", tenant, index) -> traces
    injected: Counter = field(init=False)
    #: ground truth: the ids of the traces given a passage their caller may not read
    leaked_traces: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = self.start
        self.asked = 0  # questions yielded by traffic()
        self._transport = ListTransport()
        self._emitter = Emitter(self._transport, clock=lambda: self.now)
        self._serial = 0
        self.injected = Counter()
        self.documents = {}
        self.callers = {}
        for tenant in self.tenants:
            self.callers[tenant] = [
                Caller(f"{tenant}-u{i:03d}", tenant, self.rng.sample(GROUPS[:5], k=self.rng.randint(1, 3)))
                for i in range(self.callers_per_tenant)
            ]
            for index, topics in TOPICS.items():
                docs = []
                for i in range(self.docs_per_index):
                    topic = topics[i % len(topics)]
                    restricted = self.rng.random() < 0.3
                    acl = [f"group:{self.rng.choice(GROUPS[1:5])}"] if restricted else [f"tenant:{tenant}"]
                    docs.append(Document(
                        doc_id=f"{tenant}-{index}-{i:03d}", tenant=tenant, index=index, topic=topic,
                        version=self.rng.randint(1, 4), modified_at=self.start - self.rng.uniform(5, 60) * 86400,
                        acl=acl, chunks=self.rng.randint(4, 30), embedding_model="e5-large-v2@2",
                    ))
                self.documents[(tenant, index)] = docs

    def catalog(self) -> Iterator[dict[str, Any]]:
        """Document and index events describing the whole corpus, as of ``start``."""
        for docs in self.documents.values():
            for doc in docs:
                yield self.document_event(doc)
                yield self.index_event(doc, doc.indexed_at)

    def document_event(self, doc: Document) -> dict[str, Any]:
        return {"type": "document", "doc_id": doc.doc_id, "tenant": doc.tenant,
                "version": f"v{doc.version}", "modified_at": iso(doc.modified_at), "acl": doc.acl}

    def index_event(self, doc: Document, indexed_at: float) -> dict[str, Any]:
        return {"type": "index", "index": doc.index, "doc_id": doc.doc_id, "version": f"v{doc.indexed_version}",
                "indexed_at": iso(indexed_at), "embedding_model": doc.embedding_model, "chunks": doc.chunks}

    def traffic(self, traces: int) -> Iterator[dict[str, Any]]:
        """``traces`` questions, each a trace event, with rephrases of some (more trace events,
        later) and feedback interleaved, in time order. ``asked`` counts the questions yielded."""
        # Events due later, in a heap by (time, order added): the order a stable sort by time gives,
        # without sorting the whole list (thousands of late feedback events) after every question
        pending: list[tuple[float, int, dict[str, Any]]] = []
        added = 0
        self.asked = 0
        for n in range(traces):
            self.now += self.rng.expovariate(self.rate)
            while pending and pending[0][0] <= self.now:
                yield heapq.heappop(pending)[2]
            for incident in self.incidents:
                if incident.start == n:
                    yield from self._begin(incident)
            tenant = self.rng.choice(self.tenants)
            caller = self.rng.choice(self.callers[tenant])
            index = self.rng.choice(list(TOPICS))
            active = [i for i in self.incidents if i.active(n) and (i.tenant, i.index) == (tenant, index)]
            trace = self.trace(caller, index, incidents=active)
            self.asked = n + 1
            yield trace
            if self.rng.random() < self.rephrase_probability:
                again = self.trace(caller, index, rephrase_of=trace["query"])
                delay = self.rng.uniform(5, 90)
                again["time"] = iso(self.now + delay)
                heapq.heappush(pending, (self.now + delay, added, again))
                added += 1
                self.injected[("rephrase", caller.tenant, index)] += 1
            if self.rng.random() < self.feedback_probability:
                delay = self.rng.uniform(10, 1800)
                feedback = self.feedback(trace)
                feedback["time"] = iso(self.now + delay)
                heapq.heappush(pending, (self.now + delay, added, feedback))
                added += 1
        while pending:  # the stragglers: late feedback and rephrases
            when, _, event = heapq.heappop(pending)
            self.now = max(self.now, when)
            yield event

    def _begin(self, incident: Incident) -> Iterator[dict[str, Any]]:
        """The catalog events an incident starts with."""
        docs = self.documents[(incident.tenant, incident.index)]
        affected = docs[: len(docs) // 2]
        if incident.kind == "stale_index":
            for doc in affected:
                doc.version += 1
                doc.modified_at = self.now
                yield self.document_event(doc)
            self.injected[("stale_docs", incident.tenant, incident.index)] += len(affected)
        elif incident.kind == "reembedding":
            for doc in affected:
                doc.embedding_model = "e5-large-v3@1"
                doc.indexed_at = self.now
                yield self.index_event(doc, self.now)
            self.injected[("reembedded_docs", incident.tenant, incident.index)] += len(affected)

    def trace(self, caller: Caller, index: str, rephrase_of: str | None = None,
              incidents: Sequence[Incident] = ()) -> dict[str, Any]:
        rng = self.rng
        self._serial += 1
        docs = self.documents[(caller.tenant, index)]
        topic = rng.choice(TOPICS[index])
        if rephrase_of is not None:
            query = rephrase_of.rstrip("?") + " exactly?"
        else:
            query = rng.choice(QUESTION_FORMS).format(t=topic)
        on_topic = [d for d in docs if d.topic == topic]
        principals = {f"user:{caller.id}", f"tenant:{caller.tenant}", *(f"group:{g}" for g in caller.groups)}
        visible = [d for d in docs if principals.intersection(d.acl)]
        pool = [d for d in on_topic if d in visible] + rng.sample(visible, k=min(12, len(visible)))
        k = self.candidates_per_retriever
        bm25 = self._ranked(pool, lambda: rng.lognormvariate(2.0, 0.5), k=k, empty=0.03)
        vector = self._ranked(pool, lambda: rng.betavariate(8, 3), k=k)
        # The reranker sees the union of both lists; the model sees its top passages, in full.
        fused = list({p["id"]: p for p in vector + bm25}.values())
        context = [self.passage(p["_doc"], round(rng.betavariate(5, 2), 4), p["_chunk"]) for p in fused]
        context.sort(key=lambda p: -p["score"])
        context = context[: self.context_size]
        for p in bm25 + vector:
            del p["_doc"], p["_chunk"]
        trace_id = f"{self.seed:x}{self._serial:010x}"
        for incident in incidents:
            if incident.kind == "leak" and rng.random() < incident.rate:
                self._leak(caller, docs, vector, context)
                self.leaked_traces.append(trace_id)
        abstain_probability = next((i.rate for i in incidents if i.kind == "no_answer_spike"),
                                   self.abstain_probability)
        abstained = rng.random() < abstain_probability or not context
        # The application's side of the story, told through the emitter as a RAG app would.
        trace = self._emitter.start_trace(
            query, index=index, caller=caller.id, groups=caller.groups, tenant=caller.tenant,
            conversation=f"{caller.id}-c{self._serial // 7}", index_version="2026-11-17",
            trace_id=trace_id)
        trace.add_retrieval("bm25", bm25).add_retrieval("vector", vector).set_context(context)
        if abstained:
            trace.set_answer(rng.choice(REFUSALS), abstained=True)
        else:
            trace.set_answer(f"According to the {topic} policy, see the cited sections.", abstained=False,
                             citations=[p["id"] for p in context[: rng.randint(1, 3)]])
        retrieve = rng.lognormvariate(3.6, 0.3)
        rerank = rng.lognormvariate(2.4, 0.3)
        generate = rng.lognormvariate(6.7, 0.35)
        trace.set_latency(retrieve=round(retrieve, 1), rerank=round(rerank, 1), generate=round(generate, 1),
                          total=round(retrieve + rerank + generate, 1))
        input_tokens = 300 + 220 * len(context)
        output_tokens = rng.randint(20, 240)
        trace.set_usage(input_tokens, output_tokens, round(input_tokens * 2.5e-6 + output_tokens * 1e-5, 6))
        return self._sent(trace.end)

    def _sent(self, send) -> dict[str, Any]:
        """Run one emitter call and return the event it sent."""
        send()
        event, _ = self._transport.sent.pop()
        return event

    def _leak(self, caller: Caller, docs: list[Document], candidates: list[dict[str, Any]],
              context: list[dict[str, Any]]) -> None:
        """Put a passage the caller may not read into the candidates and the context."""
        principals = {f"user:{caller.id}", f"tenant:{caller.tenant}", *(f"group:{g}" for g in caller.groups)}
        hidden = [d for d in docs if principals.isdisjoint(d.acl)]
        if not hidden:  # nothing restricted here: take another tenant's document
            other = next(t for t in self.tenants if t != caller.tenant)
            hidden = self.documents[(other, docs[0].index)]
        doc = self.rng.choice(hidden)
        chunk = self.rng.randrange(doc.chunks)
        passage = self.passage(doc, 0.99, chunk)
        candidates.insert(0, {k: passage[k] for k in ("id", "score", "doc_id", "doc_version")})
        context.insert(1, passage)
        del context[self.context_size:]
        self.injected[("leak_context", caller.tenant, doc.index)] += 1

    def _ranked(self, pool: list[Document], score, k: int, empty: float = 0.0) -> list[dict[str, Any]]:
        """A candidate list: ids, scores and document versions only, as retrievers report them."""
        if self.rng.random() < empty:
            return []
        chosen = list(dict.fromkeys(pool))[: k + 4]
        self.rng.shuffle(chosen)
        passages = []
        for doc in chosen[:k]:
            chunk = self.rng.randrange(doc.chunks)
            passages.append({"id": f"{doc.doc_id}#{chunk}", "score": round(score(), 4), "doc_id": doc.doc_id,
                             "doc_version": f"v{doc.indexed_version}", "_doc": doc, "_chunk": chunk})
        passages.sort(key=lambda p: -p["score"])
        return passages

    def passage(self, doc: Document, score: float, chunk: int) -> dict[str, Any]:
        """A context passage with everything the signals can use."""
        start = chunk * 480
        return {"id": f"{doc.doc_id}#{chunk}", "score": score, "doc_id": doc.doc_id,
                "doc_version": f"v{doc.indexed_version}", "span": [start, start + 480],
                "text": f"Section {chunk} of {doc.doc_id}: rules about {doc.topic}.",
                "acl": doc.acl, "indexed_at": iso(doc.indexed_at),
                "source_modified_at": iso(doc.indexed_source_time), "embedding_model": doc.embedding_model}

    def feedback(self, trace: dict[str, Any]) -> dict[str, Any]:
        kind = self.rng.choices(["thumb", "citation_click", "copy", "escalation"], [6, 2, 1, 1])[0]
        value = None
        if kind == "thumb":
            value = "down" if trace["answer"]["abstained"] or self.rng.random() < 0.25 else "up"
        return self._sent(lambda: self._emitter.feedback(trace["trace_id"], kind, value))


#: Ways the simulator can break a record, each mapped to the rejection reason it must produce.
CORRUPTIONS: dict[str, str] = {
    "truncated": "malformed_json",
    "not_an_object": "not_an_object",
    "unknown_type": "unknown_type",
    "missing_trace_id": "missing_field",
    "score_as_string": "wrong_type",
    "bad_time": "bad_timestamp",
    "future_time": "future_timestamp",
    "too_many_passages": "too_many_passages",
    "long_trace_id": "too_long",
    "bad_feedback_kind": "invalid_value",
}


def corrupt(trace: dict[str, Any], how: str, encode) -> bytes:
    """Break a trace event in the way named by ``how`` (a key of :data:`CORRUPTIONS`).

    ``encode`` turns a dict into JSON bytes. The result must be rejected with ``CORRUPTIONS[how]``.
    """
    event = dict(trace)
    if how == "truncated":
        data = encode(event)
        return data[: len(data) // 2]
    if how == "not_an_object":
        return encode([event["trace_id"]])
    if how == "unknown_type":
        event["type"] = "span"
    elif how == "missing_trace_id":
        del event["trace_id"]
    elif how == "score_as_string":
        first = dict(event["context"][0], score="high")
        event["context"] = [first, *event["context"][1:]]
    elif how == "bad_time":
        event["time"] = "yesterday at noon"
    elif how == "future_time":
        event["time"] = iso(2_000_000_000.0)  # 2033
    elif how == "too_many_passages":
        event["context"] = [{"id": f"p{i}", "score": 0.5} for i in range(600)]
    elif how == "long_trace_id":
        event["trace_id"] = "x" * 300
    elif how == "bad_feedback_kind":
        event = {"type": "feedback", "trace_id": event["trace_id"], "kind": "like", "value": "up"}
    else:
        raise ValueError(f"unknown corruption {how!r}")
    return encode(event)
