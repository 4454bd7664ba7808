"""Findings in words: each agrees with the signal it explains (a property over random traces and
catalogs), and says which rule fired."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import (
    Answer,
    Caller,
    DocumentEvent,
    FeedbackEvent,
    IndexEvent,
    IndexRef,
    Passage,
    Retrieval,
    TraceEvent,
)
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.core.signals.explain import FindingSignal, explain_feedback
from ragmon.monitor.core.signals.results import FeedbackSignals, TraceRef

NOW = 1_796_000_000.0
PRINCIPALS = ["group:staff", "group:payroll", "tenant:acme", "tenant:globex", "user:alice", "*"]
DOCS = ["d1", "d2", "d3", "d4"]


ALICE = Caller("alice", ["staff"])


def trace(passages: list[Passage], context: list[Passage] | None = None, caller: Caller | None = ALICE,
          answer: Answer | None = None, trace_id: str = "t1") -> TraceEvent:
    return TraceEvent(trace_id=trace_id, time=NOW, query="q", index=IndexRef("hr"), tenant="acme", caller=caller,
                      retrievals=[Retrieval("vector", passages)], context=context, answer=answer)


def by_signal(findings):
    out: dict = {}
    for finding in findings:
        out.setdefault(finding.signal, []).append(finding)
    return out


documents = st.builds(lambda doc_id, tenant, acl, version: DocumentEvent(
    doc_id=doc_id, version=version, modified_at=NOW - 10, tenant=tenant, acl=acl),
    st.sampled_from(DOCS), st.sampled_from(["acme", "globex"]),
    st.none() | st.lists(st.sampled_from(PRINCIPALS), max_size=3), st.sampled_from(["v1", "v2"]))
passages = st.builds(lambda n, doc, acl, version: Passage(id=f"{doc}#{n}", doc_id=doc, doc_version=version, acl=acl,
                                                          score=0.5),
                     st.integers(0, 3), st.sampled_from(DOCS), st.none() | st.lists(st.sampled_from(PRINCIPALS),
                                                                                      max_size=3),
                     st.none() | st.sampled_from(["v1", "v2"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(documents, max_size=4), st.lists(passages, max_size=8), st.none() | st.lists(passages, max_size=5),
       st.sampled_from([Caller("alice", ["staff"]), Caller(None, ["payroll"]), None]))
def test_the_passages_named_are_exactly_those_the_signals_count(docs, candidates, context, caller):
    engine = SignalEngine(SignalsConfig(), Catalog())
    for document in docs:
        engine.catalog.apply(document)
        engine.catalog.apply(IndexEvent(index="hr", doc_id=document.doc_id, version=document.version,
                                        indexed_at=NOW - 5))
    event = trace(candidates, context, caller)
    signals = engine.observe(event)
    found = by_signal(signals.findings)
    for signal, counts in ((FindingSignal.PERMISSION_VIOLATION, signals.access),
                           (FindingSignal.STALE_PASSAGE, signals.stale)):
        named = {f.stage: f.passage_ids for f in found.get(signal, [])}
        assert len(named.get("candidates", [])) == min(counts.candidates, 10), (signal, named, counts)
        assert len(named.get("context", [])) == min(counts.context, 10), (signal, named, counts)


def test_each_rule_of_access_in_words():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="pay", version="v1", modified_at=NOW, tenant="acme", acl=["group:payroll"]))
    catalog.apply(DocumentEvent(doc_id="other", version="v1", modified_at=NOW, tenant="globex", acl=["*"]))
    engine = SignalEngine(SignalsConfig(), catalog)

    def words(passage: Passage) -> str:
        findings = engine.observe(trace([passage], [passage])).findings
        return next(f.reason for f in findings if f.signal is FindingSignal.PERMISSION_VIOLATION)

    assert words(Passage("pay#1", doc_id="pay")) == "catalog ACL {acl} excludes the caller {caller}"
    assert words(Passage("x#1", doc_id="other")) == (
        "the catalog puts the document in tenant {owner}; the caller is of tenant {tenant}")
    assert words(Passage("free#1", doc_id="free", acl=["group:board"])) == (
        "passage ACL {acl} excludes the caller {caller}")
    finding = next(f for f in engine.observe(trace([Passage("pay#1", doc_id="pay")])).findings
                   if f.signal is FindingSignal.PERMISSION_VIOLATION)
    assert finding.principals == {"acl": ["group:payroll"], "caller": ["group:staff", "tenant:acme", "user:alice"]}


def test_stale_citation_duplicates_mixed_models_and_outcomes():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="hb", version="v1", modified_at=NOW - 100, tenant="acme"))
    catalog.apply(DocumentEvent(doc_id="hb", version="v2", modified_at=NOW - 50, tenant="acme"))
    engine = SignalEngine(SignalsConfig(), catalog)
    old = Passage("hb#1", doc_id="hb", doc_version="v1", embedding_model="e5@1")
    new = Passage("hb#2", doc_id="hb", doc_version="v2", embedding_model="e5@2")
    found = by_signal(engine.observe(trace([old, new], [old, new, old], answer=Answer(
        text="see", citations=["hb#2", "zz#9"]))).findings)
    stale = found[FindingSignal.STALE_PASSAGE][0]
    assert (stale.reason, stale.terms) == ("version {served} was served; the catalog's current version is {current}",
                                           {"served": "v1", "current": "v2"})
    assert stale.passage_ids == ["hb#1"] and stale.documents == [("hb", "v1")]
    assert found[FindingSignal.UNSUPPORTED_CITATION][0].passage_ids == ["zz#9"]
    assert found[FindingSignal.MIXED_EMBEDDING][0].principals == {"models": ["e5@1", "e5@2"]}
    duplicate = found[FindingSignal.DUPLICATE_SLOT][0]
    assert duplicate.reason == "1 context slot(s) repeat a passage, 1 hold another version of a document already there"
    assert set(duplicate.passage_ids) == {"hb#1", "hb#2"}
    assert by_signal(engine.observe(trace([old], [], answer=Answer(text="no idea"))).findings).keys() >= {
        FindingSignal.EMPTY_CONTEXT}
    assert by_signal(engine.observe(trace([old], answer=Answer(text="...", abstained=True))).findings).keys() >= {
        FindingSignal.ABSTAINED}


def test_a_low_score_names_its_retriever_and_limit():
    engine = SignalEngine(SignalsConfig(low_score_thresholds={"hr": {"vector": 0.4}}), Catalog())
    low = by_signal(engine.observe(trace([Passage("a", score=0.3)])).findings)[FindingSignal.LOW_SCORE][0]
    assert low.reason == "top score 0.3 of retriever {retriever} is below the threshold configured for it, 0.4"
    assert low.ids == {"retriever": "vector"}
    assert FindingSignal.LOW_SCORE not in by_signal(engine.observe(trace([Passage("a", score=0.5)])).findings)


def test_a_rephrase_is_a_finding_of_the_earlier_trace_and_feedback_of_its_trace():
    engine = SignalEngine(SignalsConfig(), Catalog())
    engine.observe(trace([Passage("a", score=0.5)], trace_id="first"))
    again = engine.observe(TraceEvent(trace_id="second", time=NOW + 30, query="q", index=IndexRef("hr"),
                                      tenant="acme", caller=Caller("alice", ["staff"]),
                                      retrievals=[Retrieval("vector", [Passage("a", score=0.5)])]))
    rephrase = by_signal(again.findings)[FindingSignal.REPHRASED][0]
    assert rephrase.trace.trace_id == "first" and rephrase.ids == {"later": "second"}
    assert "30 s later" in rephrase.reason
    ref = TraceRef("first", "acme", "hr", NOW)
    down = FeedbackEvent(trace_id="first", kind="thumb", value="down", time=NOW + 60)
    assert [f.trace for f in explain_feedback(down, FeedbackSignals(ref, "thumb", "down"))] == [ref]
    up = FeedbackEvent(trace_id="first", kind="thumb", value="up", time=NOW + 60)
    assert explain_feedback(up, FeedbackSignals(ref, "thumb", "up")) == []
    lost = explain_feedback(down, FeedbackSignals(None, "thumb", "down"))
    assert lost[0].trace.trace_id == "first" and lost[0].trace.tenant == ""


def test_nothing_is_explained_when_turned_off():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="pay", version="v1", modified_at=NOW, tenant="acme", acl=["group:payroll"]))
    signals = SignalEngine(SignalsConfig(), catalog, explain=False).observe(trace([Passage("p", doc_id="pay")]))
    assert signals.access.candidates == 1 and signals.findings == []


def test_a_passage_stale_by_its_own_times_says_so():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="hb", version="v2", modified_at=NOW - 50, tenant="acme"))
    engine = SignalEngine(SignalsConfig(), catalog)
    # the catalog knows the document but not which version the passage is of: its own times decide
    old = Passage("hb#1", doc_id="hb", source_modified_at=NOW - 10, indexed_at=NOW - 100)
    stale = by_signal(engine.observe(trace([old], [old])).findings)[FindingSignal.STALE_PASSAGE]
    assert [f.reason for f in stale] == ["the source changed after the passage was indexed"] * 2


def test_passages_no_check_could_judge_are_a_finding_with_the_reasons_in_words():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="memo", version="v1", modified_at=NOW - 50, tenant="acme"))  # no ACL
    engine = SignalEngine(SignalsConfig(), catalog)
    passages = [Passage("memo#1", doc_id="memo"), Passage("ghost#1", doc_id="ghost"),
                Passage("open#1", doc_id="open", acl=["*"], indexed_at=NOW - 9, source_modified_at=NOW - 99)]
    [finding] = by_signal(engine.observe(trace(passages, passages[:1])).findings)[FindingSignal.NOT_JUDGED]
    assert finding.reason == (
        "not judged: access of 2 passage(s) (1 of documents the catalog does not know, 1 whose document has no "
        "ACL in the catalog nor on the passage); freshness of 2 passage(s) (1 of documents the catalog does not "
        "know, 1 whose served version is known neither from the passage nor from its index)")
    assert finding.stage is None
    assert finding.passage_ids == ["memo#1", "ghost#1"]  # the context's first
    assert finding.documents == [("memo", None), ("ghost", None)]
    judged = [Passage("open#1", doc_id="open", acl=["*"], indexed_at=NOW - 9, source_modified_at=NOW - 99)]
    assert engine.observe(trace(judged, judged)).findings == []  # every passage judged, nothing fired
