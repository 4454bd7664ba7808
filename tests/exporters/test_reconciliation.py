"""The reconciliation gauges at scrape time: every kind per tenant and index, zeros included, and
names beyond a label cap added up under `other`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ragmon.exporters.instruments import LabelCap
from ragmon.exporters.prometheus import metric_sum
from ragmon.exporters.reconciliation import ReconciliationCollector
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.reconcile import Reconciler

NOW = 1_796_000_000.0


def scrape(catalog: Catalog, tenants: LabelCap | None = None):
    registry = CollectorRegistry()
    reconciler = Reconciler(catalog, clock=lambda: NOW, every=0.0)
    registry.register(ReconciliationCollector(reconciler, tenants or LabelCap((), 50), LabelCap((), 50)))
    read = lambda name, **labels: metric_sum(registry, name, **labels)  # noqa: E731
    read.kinds = lambda name: {(s.labels["tenant"], s.labels.get("kind") or s.labels["reason"])  # type: ignore
                               for f in registry.collect() for s in f.samples if s.name == name}
    return read


def test_a_pending_revocation_is_a_gauge_with_its_age_and_every_other_kind_is_zero():
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="memo", tenant="acme", version="v1", modified_at=NOW - 120, acl=["group:board"]))
    catalog.apply(IndexEvent(index="policies", doc_id="memo", version="v1", indexed_at=NOW - 3600,
                             acl=["group:board", "group:staff"]))
    catalog.apply(IndexEvent(index="policies", doc_id="nobody-knows", version="v1", indexed_at=NOW - 3600))
    read = scrape(catalog)
    where = {"tenant": "acme", "index": "policies"}
    assert read("ragmon_index_entries", **where) == 1
    assert read("ragmon_index_drift_documents", kind="acl_narrower", **where) == 1
    assert read("ragmon_index_drift_oldest_seconds", kind="acl_narrower", **where) == 120
    for kind in ("stale", "deleted", "acl_wider"):
        assert read("ragmon_index_drift_documents", kind=kind, **where) == 0
    # every kind is a series, zeros included: a resolved drift goes back to 0, it does not vanish
    assert read.kinds("ragmon_index_drift_documents") == read.kinds("ragmon_index_drift_oldest_seconds") == {
        (tenant, kind) for tenant in ("acme", "unknown") for kind in ("stale", "deleted", "acl_narrower", "acl_wider")}
    assert read.kinds("ragmon_index_drift_unjudged_documents") == {
        (tenant, reason) for tenant in ("acme", "unknown")
        for reason in ("unknown_document", "source_acl_unknown", "index_acl_unknown")}
    assert read("ragmon_index_drift_unjudged_documents", reason="unknown_document", tenant="unknown") == 1
    assert read("ragmon_index_drift_unjudged_documents", reason="index_acl_unknown", **where) == 0


def test_tenants_beyond_the_cap_add_up_under_other():
    catalog = Catalog()
    for n, (tenant, age) in enumerate((("acme", 100), ("globex", 300), ("initech", 200))):
        catalog.apply(DocumentEvent(doc_id=f"d{n}", tenant=tenant, version="v1", modified_at=NOW - age,
                                    acl=["group:a"]))
        catalog.apply(IndexEvent(index="policies", doc_id=f"d{n}", version="v1", indexed_at=NOW - 1000,
                                 acl=["group:a", "group:b"]))
    read = scrape(catalog, LabelCap((), 1))
    assert read("ragmon_index_drift_documents", kind="acl_narrower", tenant="acme") == 1
    assert read("ragmon_index_drift_documents", kind="acl_narrower", tenant="other") == 2
    assert read("ragmon_index_drift_oldest_seconds", kind="acl_narrower", tenant="other") == 300
    assert read("ragmon_index_entries", tenant="other") == 2
