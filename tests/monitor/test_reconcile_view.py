"""Reconciliation in words: the rule names who is still let in, user principals as pseudonyms and
at most a few principals by name; rows put revocations pending first."""

from __future__ import annotations

from ragmon.monitor.app.reconcile_view import PRINCIPALS_SHOWN, drift_findings, drift_rows
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.reconcile import reconcile
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

NOW = 1_796_000_000.0


def test_a_finding_names_the_document_the_rule_and_who_is_still_let_in_pseudonymized():
    redactor = Redactor(RedactionConfig(caller_key="view-test-key-0123456789"))
    catalog = Catalog()
    still = ["user:ann@example.com", *(f"group:g{n}" for n in range(PRINCIPALS_SHOWN + 1))]
    catalog.apply(DocumentEvent(doc_id="memo", tenant="acme", version="v1", modified_at=NOW - 60, acl=["group:board"]))
    catalog.apply(IndexEvent(index="kb", doc_id="memo", version="v1", indexed_at=NOW - 600,
                             acl=["group:board", *still]))
    catalog.apply(DocumentEvent(doc_id="faq", tenant="acme", version="v1", modified_at=NOW - 60, acl=["*"]))
    catalog.apply(IndexEvent(index="faq", doc_id="faq", version="v1", indexed_at=NOW - 600, acl=["*"]))
    result = reconcile(catalog.documents, catalog.indexed.values(), NOW)
    [finding] = drift_findings(result, redactor.shown_id, redactor.principal)
    assert (finding.tenant, finding.index, finding.kind, finding.doc_id, finding.age_seconds) == (
        "acme", "kb", "acl_narrower", "memo", 60.0)
    assert "ann@example.com" not in finding.rule
    # sorted: the groups first, the user last and so not named; two left over
    shown = sorted(still)[:PRINCIPALS_SHOWN]
    assert finding.rule == ("revocation pending: the index still lets read " + ", ".join(shown)
                            + " and 2 more, whom the source no longer allows")
    assert drift_findings(result, redactor.shown_id, redactor.principal, kind="acl_wider") == []
    assert drift_findings(result, redactor.shown_id, redactor.principal, index="faq") == []
    # the revocation pending first, though "faq" comes first by name
    assert [(r.index, r.documents["acl_narrower"]) for r in drift_rows(result, redactor.shown_id)] == [
        ("kb", 1), ("faq", 0)]


def test_a_user_principal_named_in_a_rule_is_its_pseudonym():
    redactor = Redactor(RedactionConfig(caller_key="view-test-key-0123456789"))
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id="memo", tenant="acme", version="v1", modified_at=NOW - 60, acl=["group:a"]))
    catalog.apply(IndexEvent(index="kb", doc_id="memo", version="v1", indexed_at=NOW - 600,
                             acl=["group:a", "user:ann@example.com"]))
    [finding] = drift_findings(reconcile(catalog.documents, catalog.indexed.values(), NOW), redactor.shown_id,
                               redactor.principal)
    assert "ann" not in finding.rule and redactor.principal("user:ann@example.com") in finding.rule
