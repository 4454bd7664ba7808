"""Catalog events accepted but suspicious: counted by reason (through the signals, so a retried
batch counts them once) and warned about once per process, never naming a document."""

from __future__ import annotations

import logging

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Caller, DocumentEvent, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.core.signals.catalog_audit import CatalogAudit
from ragmon.monitor.core.signals.results import CatalogSignals

NOW = 1_796_000_000.0
DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def engine_with(clock: Clock) -> SignalEngine:
    catalog = Catalog()
    return SignalEngine(SignalsConfig(), catalog, audit=CatalogAudit(catalog, DAY, clock))


def staged(engine: SignalEngine, event):
    engine.catalog.apply(event)
    return engine.observe(event)


def trace(tenant: str, *doc_ids: str) -> TraceEvent:
    return TraceEvent(trace_id=f"t-{tenant}-{'-'.join(doc_ids)}", time=NOW, query="q", index=IndexRef("i"),
                      tenant=tenant, caller=Caller("u", ["staff"]),
                      retrievals=[Retrieval("v", [Passage(f"{d}#1", doc_id=d) for d in doc_ids])])


def test_a_bare_principal_is_counted_per_event_and_warned_about_once(caplog):
    engine = engine_with(Clock())
    with caplog.at_level(logging.WARNING):
        first = staged(engine, DocumentEvent(doc_id="secret-plan", version="1", modified_at=NOW, acl=["staff", "*"]))
        again = staged(engine, DocumentEvent(doc_id="other", version="1", modified_at=NOW, acl=["group:a", "hr"]))
        fine = staged(engine, DocumentEvent(doc_id="fine", version="1", modified_at=NOW, acl=["group:a", "*"]))
    assert first == again == CatalogSignals({"bare_principal": 1}) and fine is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "kind: prefix" in warnings[0] and "secret-plan" not in warnings[0]


def test_documents_without_a_tenant_are_suspicious_once_the_traffic_has_several_tenants():
    engine = engine_with(Clock())
    for doc_id in ("a", "b", "c"):
        assert staged(engine, DocumentEvent(doc_id=doc_id, version="1", modified_at=NOW)) is None  # default
    staged(engine, DocumentEvent(doc_id="d", version="1", modified_at=NOW, tenant="acme"))
    assert engine.observe(trace("acme", "d")).suspicious == {}
    assert engine.observe(trace("globex", "d")).suspicious == {"no_tenant": 3}  # the ones held, once
    assert engine.observe(trace("initech", "d")).suspicious == {}
    assert staged(engine, DocumentEvent(doc_id="e", version="1", modified_at=NOW)) == CatalogSignals({"no_tenant": 1})


def test_a_single_tenant_or_a_default_tenant_in_the_traffic_is_no_reason():
    engine = engine_with(Clock())
    staged(engine, DocumentEvent(doc_id="a", version="1", modified_at=NOW))
    assert engine.observe(trace("default", "a")).suspicious == {}
    assert engine.observe(trace("acme", "a")).suspicious == {}  # default is one of the traffic's tenants
    assert staged(engine, DocumentEvent(doc_id="b", version="1", modified_at=NOW)) is None


def test_documents_unseen_for_a_day_while_unknown_ones_are_served_are_suspicious():
    clock = Clock()
    engine = engine_with(clock)
    for doc_id in ("seen", "unseen", "also-unseen"):
        staged(engine, DocumentEvent(doc_id=doc_id, version="1", modified_at=NOW, tenant="acme"))
    clock.now += 10
    assert engine.observe(trace("acme", "seen", "ghost")).suspicious == {}  # ghost: not in the catalog
    clock.now = NOW + DAY + 1
    assert engine.observe(trace("acme", "seen")).suspicious == {"unseen_document": 2}
    assert engine.observe(trace("acme", "seen")).suspicious == {}  # each counted once


def test_unseen_documents_are_no_reason_when_every_served_document_is_known():
    clock = Clock()
    engine = engine_with(clock)
    staged(engine, DocumentEvent(doc_id="seen", version="1", modified_at=NOW, tenant="acme"))
    staged(engine, DocumentEvent(doc_id="long-tail", version="1", modified_at=NOW, tenant="acme"))
    engine.observe(trace("acme", "seen"))
    clock.now = NOW + 2 * DAY
    assert engine.observe(trace("acme", "seen")).suspicious == {}  # a document nobody asked about is no mistake
