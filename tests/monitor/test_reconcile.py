"""Reconciliation without traffic: stale, deleted and ACL drift per tenant and index, from the
catalog alone; what cannot be judged is counted, never read as health."""

from __future__ import annotations

import pytest

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.reconcile import (
    MAX_EXAMPLES,
    RULES,
    Drift,
    NotJudged,
    Reconciler,
    granted,
    reconcile,
    revoked,
)

NOW = 1_796_000_000.0


def doc(doc_id: str, version: str = "v1", at: float = NOW - 1000, acl: list[str] | None = None,
        tenant: str = "acme", deleted: bool = False) -> DocumentEvent:
    return DocumentEvent(doc_id=doc_id, version=version, modified_at=at, acl=acl, tenant=tenant, deleted=deleted)


def entry(doc_id: str, version: str = "v1", at: float = NOW - 900, acl: list[str] | None = None,
          index: str = "policies", chunks: int | None = 3) -> IndexEvent:
    return IndexEvent(index=index, doc_id=doc_id, version=version, indexed_at=at, acl=acl, chunks=chunks)


def catalog_of(*events) -> Catalog:
    catalog = Catalog()
    for event in events:
        catalog.apply(event)
    return catalog


def walk(catalog: Catalog, now: float = NOW):
    return reconcile(catalog.documents, catalog.indexed.values(), now)


@pytest.mark.parametrize(("source", "index", "narrower", "wider"), [
    (["group:hr"], ["group:hr", "group:staff"], {"group:staff"}, set()),  # a revocation
    (["group:hr", "group:staff"], ["group:hr"], set(), {"group:staff"}),  # a grant
    (["group:b"], ["group:a"], {"group:a"}, {"group:b"}),  # swapped: both
    (["group:hr"], ["*"], {"*"}, set()),  # everyone no longer
    (["*"], ["group:hr", "user:ann"], set(), {"*"}),  # opened to everyone
    (["*", "group:hr"], ["*"], set(), set()),  # both admit everyone
    ([], ["group:hr"], {"group:hr"}, set()),  # nobody any more
    (["group:hr", "tenant:acme"], ["tenant:acme", "group:hr"], set(), set()),  # order does not matter
    (["group:hr"], ["group:hr", "staff", "role:x"], set(), set()),  # principals that admit no caller
    (["user:ann"], ["user:ann", "user:bob"], {"user:bob"}, set()),
])
def test_narrower_and_wider_are_decided_on_the_callers_each_acl_admits(source, index, narrower, wider):
    assert revoked(source, index) == narrower
    assert granted(source, index) == wider


def test_each_kind_is_counted_per_tenant_and_index_with_the_age_of_its_oldest():
    catalog = catalog_of(
        doc("fresh", acl=["group:hr"]), entry("fresh", acl=["group:hr"]),
        doc("edited", version="v1", at=NOW - 5000, acl=["group:hr"]),
        doc("edited", version="v2", at=NOW - 3000, acl=["group:hr"]),
        doc("edited", version="v3", at=NOW - 1000, acl=["group:hr"]),
        entry("edited", version="v1", at=NOW - 4000, acl=["group:hr"]),
        doc("revoked", at=NOW - 600, acl=["group:hr"]), entry("revoked", at=NOW - 900, acl=["group:hr", "group:staff"]),
        doc("opened", at=NOW - 2000, acl=["*"]), entry("opened", at=NOW - 700, acl=["group:hr"]),
        doc("gone", at=NOW - 400, acl=["group:hr"], deleted=True), entry("gone", at=NOW - 900, acl=["group:hr"]),
        doc("other", tenant="globex", acl=["group:hr"]), entry("other", acl=["group:board"]),
    )
    result = walk(catalog)
    assert result.entries == {("acme", "policies"): 5, ("globex", "policies"): 1}
    counts = {key: tally.documents for key, tally in result.drift.items()}
    assert counts == {("acme", "policies", Drift.STALE): 1, ("acme", "policies", Drift.ACL_NARROWER): 1,
                      ("acme", "policies", Drift.ACL_WIDER): 1, ("acme", "policies", Drift.DELETED): 1,
                      ("globex", "policies", Drift.ACL_NARROWER): 1, ("globex", "policies", Drift.ACL_WIDER): 1}
    # stale from its oldest change not taken in (v2), not its newest
    assert result.oldest_seconds("acme", "policies", Drift.STALE) == 3000
    # an ACL drift from the later of the source's change and the indexing
    assert result.oldest_seconds("acme", "policies", Drift.ACL_NARROWER) == 600
    assert result.oldest_seconds("acme", "policies", Drift.ACL_WIDER) == 700
    assert result.oldest_seconds("acme", "policies", Drift.DELETED) == 400
    [example] = result.tally("acme", "policies", Drift.ACL_NARROWER).examples
    assert (example.doc_id, example.principals) == ("revoked", ("group:staff",))
    assert result.not_judged == {}
    assert result.oldest_seconds("acme", "archive", Drift.STALE) == 0.0  # nothing there


def test_what_cannot_be_judged_is_counted_by_reason():
    catalog = catalog_of(
        entry("unknown", acl=["group:hr"]),  # no document event for it
        doc("no-source-acl"), entry("no-source-acl", acl=["group:hr"]),
        doc("no-index-acl", acl=["group:hr"]), entry("no-index-acl"),
        doc("neither"), entry("neither"),
        doc("gone", deleted=True), entry("gone"),  # deleted: judged as such, its ACLs do not matter
    )
    result = walk(catalog)
    assert result.not_judged == {("unknown", "policies", NotJudged.UNKNOWN_DOCUMENT): 1,
                                 ("acme", "policies", NotJudged.SOURCE_ACL_UNKNOWN): 2,
                                 ("acme", "policies", NotJudged.INDEX_ACL_UNKNOWN): 2}
    assert {kind for (_, _, kind) in result.drift} == {Drift.DELETED}
    assert result.entries == {("unknown", "policies"): 1, ("acme", "policies"): 4}


def test_a_removed_entry_and_an_index_ahead_of_the_change_feed_are_not_drift():
    catalog = catalog_of(
        doc("removed", acl=["group:hr"], deleted=True), entry("removed", chunks=0, acl=["*"]),
        doc("ahead", version="v1", at=NOW - 1000, acl=["group:hr"]),
        entry("ahead", version="v2", at=NOW - 500, acl=["group:hr"]),  # a version the feed has not announced
    )
    result = walk(catalog)
    assert result.drift == {} and result.entries == {("acme", "policies"): 1}


def test_at_most_the_oldest_examples_are_named():
    events = []
    for n in range(MAX_EXAMPLES + 5):
        events += [doc(f"d{n:02d}", at=NOW - 100 - n, acl=["group:hr"]),
                   entry(f"d{n:02d}", at=NOW - 5000, acl=["group:hr", "group:staff"])]
    tally = walk(catalog_of(*events)).tally("acme", "policies", Drift.ACL_NARROWER)
    assert tally.documents == MAX_EXAMPLES + 5
    assert [e.doc_id for e in tally.examples] == [f"d{n:02d}" for n in range(MAX_EXAMPLES + 4, 4, -1)]
    assert tally.oldest_since == NOW - 100 - (MAX_EXAMPLES + 4)


def test_the_rules_name_every_kind():
    assert set(RULES) == set(Drift)


def test_a_reconciler_walks_the_catalog_at_most_every_interval():
    catalog = catalog_of(doc("d", acl=["group:hr"]), entry("d", acl=["group:hr"]))
    ticks = [0.0]
    reconciler = Reconciler(catalog, clock=lambda: NOW, every=30.0, monotonic=lambda: ticks[0])
    first = reconciler.current()
    assert first.drift == {}
    catalog.apply(doc("d", version="v1", at=NOW - 10, acl=["group:board"]))  # revoked
    ticks[0] = 29.0
    assert reconciler.current() is first
    ticks[0] = 30.0
    assert reconciler.current().tally("acme", "policies", Drift.ACL_NARROWER).documents == 1
