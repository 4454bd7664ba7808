"""SignalEngine: one observe() per event type, the catalog kept current, late feedback joined,
rephrases and baselines carried across traces."""

from __future__ import annotations

import json

from ragmon.monitor.config.pipeline import Limits, SignalsConfig
from ragmon.monitor.core.catalog import Catalog, IndexHealth
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.model import (
    Answer,
    Caller,
    DocumentEvent,
    FeedbackEvent,
    IndexEvent,
    IndexRef,
    Latency,
    Passage,
    Retrieval,
    TraceEvent,
    Usage,
)
from ragmon.monitor.core.signals import (
    AccessFindings,
    FeedbackSignals,
    IndexSignals,
    Outcome,
    RetrievalFinding,
    SignalEngine,
    StaleFindings,
    TraceRef,
    TraceSignals,
)

NOW = 1_796_000_000.0
QUESTION = "How many vacation days carry over?"
E5 = "e5@2"


def staged(signals: SignalEngine, event):
    """The catalog stage, then the signals: the order the pipeline runs them in."""
    signals.catalog.apply(event)
    return signals.observe(event)


def engine(**config) -> SignalEngine:
    return SignalEngine(SignalsConfig(**config), Catalog())


def decode(event: dict):
    return Decoder(Limits(), clock=lambda: NOW).decode(json.dumps(event).encode())


def make_trace(trace_id="t1", time=NOW, query=QUESTION, caller="u-1", tenant="acme", conversation_id=None,
               retrievals=(), context=None, answer=None) -> TraceEvent:
    return TraceEvent(trace_id=trace_id, time=time, query=query, index=IndexRef("policies"), tenant=tenant,
                      conversation_id=conversation_id, caller=Caller(caller, ["staff"]) if caller else None,
                      retrievals=[Retrieval(name, list(ps)) for name, ps in retrievals], context=context,
                      answer=answer)


FULL_TRACE = {
    "type": "trace", "trace_id": "9f1c2e", "time": "2026-11-29T10:00:00Z", "tenant": "acme",
    "conversation_id": "c-77", "caller": {"id": "u-123", "groups": ["staff", "hr"]},
    "query": QUESTION, "index": {"name": "policies", "version": "2026-11-28"},
    "retrievals": [
        {"retriever": "bm25", "passages": []},
        {"retriever": "vector", "passages": [
            {"id": "leave#4", "score": 0.82, "doc_id": "leave", "doc_version": "2026-3", "acl": ["group:staff"],
             "embedding_model": "e5@2"},
            {"id": "pay#1", "score": 0.41, "doc_id": "pay", "doc_version": "1", "acl": ["group:board"],
             "embedding_model": "e5@1"},
            {"id": "memo#2", "score": 0.3, "indexed_at": "2026-11-20T00:00:00Z",
             "source_modified_at": "2026-11-25T00:00:00Z"}]}],
    "context": [
        {"id": "leave#4", "doc_id": "leave", "doc_version": "2026-3", "acl": ["group:staff"], "embedding_model": E5},
        {"id": "leave#4", "doc_id": "leave", "doc_version": "2026-3", "acl": ["group:staff"], "embedding_model": E5},
        {"id": "leave#9", "doc_id": "leave", "doc_version": "2026-4", "acl": ["group:staff"], "embedding_model": E5},
        {"id": "pay#1", "doc_id": "pay", "doc_version": "1", "acl": ["group:board"], "embedding_model": "e5@1"},
        {"id": "x#1"}],
    "answer": {"text": "Five days carry over.", "citations": ["leave#4", "ghost#1", "ghost#1"]},
    "latency_ms": {"retrieve": 41, "rerank": 12, "generate": 850, "total": 910},
    "usage": {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0031},
}


def test_a_decoded_trace_yields_every_signal():
    signals = engine(low_score_thresholds={"policies": {"vector": 0.9}})
    staged(signals, decode({"type": "document", "doc_id": "leave", "tenant": "acme", "version": "2026-4",
                            "modified_at": "2026-11-25T09:00:00Z", "acl": ["group:staff"]}))
    result = staged(signals, decode(FULL_TRACE))
    assert result == TraceSignals(
        tenant="acme", index="policies", has_caller=True, outcome=Outcome.ANSWERED,
        access=AccessFindings(candidates=1, context=1, unknown_acl=2, doc_ids=["pay"]),
        stale=StaleFindings(candidates=2, context=1, doc_ids=["leave"]),
        retrievals=[RetrievalFinding("bm25", None, False, True, True),
                    RetrievalFinding("vector", 0.82, True, False, False)],
        duplicate_passages=1, duplicate_doc_versions=1, mixed_embeddings=True, unsupported_citations=1,
        rephrase_of=None,
        latency=Latency(41, 12, 850, 910), usage=Usage(1200, 80, 0.0031),
    )
    assert result.empty_keyword_side is True
    assert result.low_score is True


def test_a_minimal_trace_without_answer_is_unknown_with_empty_findings():
    result = staged(engine(), decode({"type": "trace", "trace_id": "t", "time": NOW, "query": "",
                                      "index": {"name": "i"}}))
    assert result == TraceSignals(
        tenant="default", index="i", has_caller=False, outcome=Outcome.UNKNOWN, access=AccessFindings(),
        stale=StaleFindings(),
        retrievals=[], duplicate_passages=0, duplicate_doc_versions=0, mixed_embeddings=False,
        unsupported_citations=0, rephrase_of=None, latency=None, usage=None)
    assert (result.empty_keyword_side, result.low_score) == (False, False)


def test_the_outcome_uses_the_configured_refusal_patterns():
    default = engine()
    custom = engine(refusal_patterns=[r"\bkeine Antwort\b"])
    context = [Passage("a")]
    refusal_en = make_trace(answer=Answer("I don't know."), context=context)
    refusal_de = make_trace(trace_id="t2", answer=Answer("Dazu gibt es keine Antwort."), context=context)
    assert [staged(default, t).outcome for t in (refusal_en, refusal_de)] == [Outcome.ABSTAINED, Outcome.ANSWERED]
    assert [staged(custom, t).outcome for t in (refusal_en, refusal_de)] == [Outcome.ANSWERED, Outcome.ABSTAINED]


def test_an_empty_context_answer_is_empty_context():
    trace = make_trace(retrievals=[("vector", [Passage("a", score=0.9)])], context=[], answer=Answer("Five days."))
    assert staged(engine(), trace).outcome is Outcome.EMPTY_CONTEXT


# --- catalog events --------------------------------------------------------------------------------


def test_the_signals_read_the_catalog_and_the_catalog_stage_writes_it():
    signals = engine()
    event = DocumentEvent(doc_id="leave", version="4", modified_at=NOW - 100, tenant="acme", acl=["group:hr"])
    index = IndexEvent(index="policies", doc_id="leave", version="4", indexed_at=NOW - 40)
    assert signals.observe(event) is None and signals.observe(index) == IndexSignals("policies", None)
    assert signals.catalog.documents == {} and signals.catalog.indexed == {}  # the signals changed nothing
    assert staged(signals, event) is None
    state = signals.catalog.document("leave")
    assert state is not None and (state.version, state.acl) == ("4", ("group:hr",))


def test_an_index_event_yields_the_index_lag():
    signals = engine()
    staged(signals, DocumentEvent(doc_id="leave", version="4", modified_at=NOW - 100))
    result = staged(signals, IndexEvent(index="policies", doc_id="leave", version="4", indexed_at=NOW - 40,
                                        embedding_model="e5@2", chunks=14))
    assert result == IndexSignals("policies", 60.0)
    assert signals.catalog.health(NOW) == {"policies": IndexHealth(0, 0.0, 1)}


def test_an_index_event_for_an_unknown_document_has_no_lag():
    result = staged(engine(), IndexEvent(index="policies", doc_id="ghost", version="1", indexed_at=NOW))
    assert result == IndexSignals("policies", None)


def test_catalog_events_change_later_trace_signals():
    signals = engine()
    passage = Passage("leave#4", doc_id="leave", doc_version="3", acl=["group:staff"])
    trace = make_trace(retrievals=[("vector", [passage])])
    first = staged(signals, trace)
    assert (first.access, first.stale) == (AccessFindings(0, 0, 0, []), StaleFindings(0, 0, []))
    staged(signals, DocumentEvent(doc_id="leave", version="4", modified_at=NOW, tenant="acme", acl=["group:hr"]))
    second = staged(signals, make_trace(trace_id="t2", retrievals=[("vector", [passage])]))
    assert (second.access, second.stale) == (AccessFindings(1, 1, 0, ["leave"]), StaleFindings(1, 1, ["leave"]))


def test_a_document_of_another_tenant_is_a_violation_through_the_engine():
    signals = engine()
    staged(signals, DocumentEvent(doc_id="plan", version="1", modified_at=NOW, tenant="globex", acl=["*"]))
    result = staged(signals, make_trace(retrievals=[("vector", [Passage("plan#1", doc_id="plan", acl=["*"])])]))
    assert result.access == AccessFindings(1, 1, 0, ["plan"])


# --- feedback --------------------------------------------------------------------------------------


def test_feedback_is_joined_to_its_recent_trace():
    signals = engine()
    staged(signals, make_trace(trace_id="t1", tenant="acme"))
    result = staged(signals, FeedbackEvent(trace_id="t1", kind="thumb", value="down"))
    assert result == FeedbackSignals(TraceRef("t1", "acme", "policies", NOW), "thumb", "down")


def test_feedback_for_an_unknown_trace_has_no_trace():
    result = staged(engine(), FeedbackEvent(trace_id="nope", kind="escalation"))
    assert result == FeedbackSignals(None, "escalation", None)


def test_feedback_for_an_evicted_trace_has_no_trace():
    signals = engine(recent_traces=2)
    for trace_id in ("t1", "t2", "t3"):
        staged(signals, make_trace(trace_id=trace_id, caller=None))
    assert signals.recent.evicted == 1
    assert staged(signals, FeedbackEvent(trace_id="t1", kind="thumb", value="up")) == FeedbackSignals(
        None, "thumb", "up")
    assert staged(signals, FeedbackEvent(trace_id="t3", kind="copy")) == FeedbackSignals(
        TraceRef("t3", "acme", "policies", NOW), "copy", None)


# --- rephrase --------------------------------------------------------------------------------------


def test_the_same_caller_asking_again_soon_is_a_rephrase():
    signals = engine()
    assert staged(signals, make_trace(trace_id="t1")).rephrase_of is None
    result = staged(signals, make_trace(trace_id="t2", time=NOW + 60, query="how many vacation days carry over"))
    assert result.rephrase_of == TraceRef("t1", "acme", "policies", NOW)


def test_asking_again_after_the_window_is_not_a_rephrase():
    signals = engine()
    staged(signals, make_trace(trace_id="t1"))
    assert staged(signals, make_trace(trace_id="t2", time=NOW + 121)).rephrase_of is None


def test_the_rephrase_window_and_similarity_are_configurable():
    signals = engine(rephrase_window_seconds=300.0, rephrase_min_jaccard=1.0)
    staged(signals, make_trace(trace_id="t1"))
    assert staged(signals, make_trace(trace_id="t2", time=NOW + 200)).rephrase_of == TraceRef(
        "t1", "acme", "policies", NOW)
    assert staged(signals, make_trace(trace_id="t3", time=NOW + 210, query=QUESTION + " now")).rephrase_of is None


def test_another_caller_or_another_tenant_is_not_a_rephrase():
    signals = engine()
    staged(signals, make_trace(trace_id="t1", caller="u-1", tenant="acme"))
    assert staged(signals, make_trace(trace_id="t2", time=NOW + 5, caller="u-2")).rephrase_of is None
    assert staged(signals, make_trace(trace_id="t3", time=NOW + 5, tenant="globex")).rephrase_of is None


def test_a_redelivered_trace_is_not_a_rephrase():
    signals = engine()
    staged(signals, make_trace(trace_id="t1"))
    assert staged(signals, make_trace(trace_id="t1")).rephrase_of is None


def test_without_caller_id_the_conversation_identifies_the_asker():
    signals = engine()
    staged(signals, make_trace(trace_id="t1", caller=None, conversation_id="c-77"))
    result = staged(signals, make_trace(trace_id="t2", time=NOW + 10, caller=None, conversation_id="c-77"))
    assert result.rephrase_of == TraceRef("t1", "acme", "policies", NOW)
    other = staged(signals, make_trace(trace_id="t3", time=NOW + 10, caller=None, conversation_id="c-78"))
    assert other.rephrase_of is None


def test_without_caller_or_conversation_there_is_no_rephrase():
    signals = engine()
    staged(signals, make_trace(trace_id="t1", caller=None))
    assert staged(signals, make_trace(trace_id="t2", time=NOW + 1, caller=None)).rephrase_of is None


def test_rephrase_callers_are_bounded():
    signals = engine(rephrase_callers=1)
    staged(signals, make_trace(trace_id="a1", caller="a"))
    staged(signals, make_trace(trace_id="b1", caller="b"))  # a is forgotten
    assert staged(signals, make_trace(trace_id="a2", time=NOW + 1, caller="a")).rephrase_of is None


# --- scores ----------------------------------------------------------------------------------------


def test_low_score_uses_the_trailing_percentile_after_min_samples():
    signals = engine(low_score_min_samples=20, low_score_percentile=10.0)
    for i in range(20):
        trace = make_trace(trace_id=f"w{i}", caller=None, retrievals=[("vector", [Passage("a", score=0.5 + i / 100)])])
        assert staged(signals, trace).low_score is False
    assert signals.baselines.threshold(("policies", "vector")) == 0.51  # sorted[int(0.1 * 19)]
    low = make_trace(trace_id="x1", caller=None, retrievals=[("vector", [Passage("a", score=0.505)])])
    fine = make_trace(trace_id="x2", caller=None, retrievals=[("vector", [Passage("a", score=0.51)])])
    assert (staged(signals, low).low_score, staged(signals, fine).low_score) == (True, False)


def test_custom_keyword_retrievers_mark_the_empty_keyword_side():
    trace = make_trace(retrievals=[("bm25", []), ("vector", [Passage("a", score=0.9)])])
    assert staged(engine(), trace).empty_keyword_side is True
    assert engine(keyword_retrievers=["elastic"]).observe(trace).empty_keyword_side is False
