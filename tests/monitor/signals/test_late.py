"""Judging again: the recent traces that served documents the catalog changed are judged against
what was in force when they were answered; only what is new is reported, in words that say it was
found late; the kept traces are bounded by count and bytes."""

from __future__ import annotations

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Caller, DocumentEvent, IndexEvent, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.core.signals.explain import FindingSignal
from ragmon.monitor.core.signals.late import LateJudge

NOW = 1_796_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_trace(trace_id: str, at: float, *passages: Passage, context: list[Passage] | None = None) -> TraceEvent:
    return TraceEvent(trace_id=trace_id, time=at, query="q", index=IndexRef("policies"), tenant="acme",
                      caller=Caller("u-1", ["staff"]), retrievals=[Retrieval("vector", list(passages))],
                      context=context)


def judged(catalog: Catalog, late: LateJudge, *traces: TraceEvent, size: int = 100) -> None:
    engine = SignalEngine(SignalsConfig(), catalog)
    for trace in traces:
        late.keep(trace, engine.observe(trace), b"x" * size)


def apply(catalog: Catalog, late: LateJudge, *events) -> None:
    for event in events:
        changed = catalog.apply(event)
        if changed:
            late.changed([changed])


def test_a_revocation_in_force_before_a_trace_is_a_leak_found_late_and_one_made_after_is_not():
    catalog, clock = Catalog(), Clock()
    late = LateJudge(catalog, 100, 10**6, interval=5.0, clock=clock)
    pay, memo = Passage("pay#1", doc_id="pay"), Passage("memo#1", doc_id="memo")
    judged(catalog, late, make_trace("t1", NOW, pay, memo, context=[pay]))
    apply(catalog, late, DocumentEvent(doc_id="pay", version="1", modified_at=NOW - 60, tenant="acme",
                                       acl=["group:payroll"]),
          DocumentEvent(doc_id="memo", version="1", modified_at=NOW + 60, tenant="acme", acl=["group:board"]))
    [(trace, found)] = late.judge_again()
    assert trace.trace_id == "t1"
    assert (found.access.candidates, found.access.context, found.access.context_doc_ids) == (1, 1, ["pay"])
    assert (found.stale.candidates, found.stale.context) == (0, 0)
    words = {(f.signal, f.stage): f.reason for f in found.findings}
    assert words == {(FindingSignal.PERMISSION_VIOLATION, stage): "found late, after the catalog changed: catalog ACL "
                     "{acl} excludes the caller {caller}" for stage in ("candidates", "context")}
    assert all(f.passage_ids == ["pay#1"] and f.principals["acl"] == ["group:payroll"] for f in found.findings)
    # the same change again, or another look, finds nothing new
    apply(catalog, late, DocumentEvent(doc_id="pay", version="1", modified_at=NOW - 60, tenant="acme",
                                       acl=["group:payroll", "group:hr"]))
    assert late.judge_again() == []  # within the interval: waits
    clock.now += 5
    assert late.judge_again() == []  # judged again: still excluded, already reported


def test_a_leak_the_trace_was_flagged_for_is_not_reported_again():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="pay", version="1", modified_at=NOW - 60, tenant="acme", acl=["group:board"]))
    late = LateJudge(catalog, 100, 10**6, interval=0.0)
    judged(catalog, late, make_trace("t1", NOW, Passage("pay#1", doc_id="pay")))
    apply(catalog, late, DocumentEvent(doc_id="pay", version="2", modified_at=NOW - 30, tenant="acme",
                                       acl=["group:payroll"]))
    assert late.judge_again() == []


def test_a_version_replaced_before_the_trace_is_stale_found_late_by_the_version_history():
    catalog = Catalog()
    late = LateJudge(catalog, 100, 10**6, interval=0.0)
    named, unnamed = Passage("hb#1", doc_id="hb", doc_version="1"), Passage("faq#1", doc_id="faq")
    early = make_trace("early", NOW - 500, named)
    judged(catalog, late, make_trace("t1", NOW, named, unnamed), early)
    apply(catalog, late,
          DocumentEvent(doc_id="hb", version="1", modified_at=NOW - 1000, tenant="acme", acl=["*"]),
          DocumentEvent(doc_id="hb", version="2", modified_at=NOW - 100, tenant="acme", acl=["*"]),
          DocumentEvent(doc_id="hb", version="3", modified_at=NOW + 100, tenant="acme", acl=["*"]),
          DocumentEvent(doc_id="faq", version="1", modified_at=NOW - 1000, tenant="acme", acl=["*"]),
          DocumentEvent(doc_id="faq", version="2", modified_at=NOW - 100, tenant="acme", acl=["*"]),
          IndexEvent(index="policies", doc_id="faq", version="1", indexed_at=NOW - 900))
    [(trace, found)] = late.judge_again()  # the early trace served version 1 while it was current
    assert trace.trace_id == "t1" and found.stale.candidates == 2
    reasons = {f.reason.format(**f.terms) for f in found.findings}
    assert reasons == {"found late, after the catalog changed: version 1 was served; the version current at "
                       "the time of the trace was 2"}


def test_the_kept_traces_are_bounded_by_count_and_by_bytes():
    catalog = Catalog()
    by_count = LateJudge(catalog, 3, 10**6, interval=0.0)
    judged(catalog, by_count, *(make_trace(f"t{n}", NOW, Passage("p", doc_id="d")) for n in range(5)))
    assert len(by_count) == 3
    by_bytes = LateJudge(catalog, 100, 1000, interval=0.0)
    judged(catalog, by_bytes, *(make_trace(f"t{n}", NOW, Passage("p", doc_id="d")) for n in range(5)), size=300)
    assert len(by_bytes) == 3
    judged(catalog, by_bytes, make_trace("t4", NOW, Passage("p", doc_id="d")), size=300)  # again: replaced
    assert len(by_bytes) == 3
    apply(catalog, by_bytes, DocumentEvent(doc_id="d", version="1", modified_at=NOW - 9, tenant="acme", acl=[]))
    assert sorted(trace.trace_id for trace, _ in by_bytes.judge_again()) == ["t2", "t3", "t4"]
