"""Permission violations: a passage the caller may not read reached a retrieval list or the context."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from ragmon.monitor.core.acl import EVERYONE
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import AccessFindings, Unjudged
from ragmon.monitor.core.signals.stages import StageIds, flag_passages


def caller_principals(trace: TraceEvent) -> frozenset[str]:
    """``user:<id>``, ``tenant:<tenant>`` and ``group:<g>`` for each of the caller's groups."""
    principals = {f"tenant:{trace.tenant}"}
    if trace.caller is not None:
        if trace.caller.id:
            principals.add(f"user:{trace.caller.id}")
        principals.update(f"group:{group}" for group in trace.caller.groups)
    return frozenset(principals)


class Access(Enum):
    """Why a passage may or may not be read by the caller: the verdict and the rule that gave it.
    ``violation``: True (may not), False (may), None (no ACL is known anywhere)."""

    OTHER_TENANT = ("other_tenant", True)  # the catalog puts its document in another tenant
    CATALOG_EXCLUDES = ("catalog_excludes", True)
    CATALOG_ADMITS = ("catalog_admits", False)
    PASSAGE_EXCLUDES = ("passage_excludes", True)  # the catalog has no ACL for it: the passage's own
    PASSAGE_ADMITS = ("passage_admits", False)
    UNKNOWN = ("unknown", None)

    def __init__(self, _name: str, violation: bool | None) -> None:
        self.violation = violation


def document_access(doc_id: str, tenant: str, principals: frozenset[str], catalog: Catalog) -> Access | None:
    """The catalog's verdict on a document; None when it does not know the document or its ACL."""
    document = catalog.document(doc_id)
    if document is None:
        return None
    if document.tenant != tenant:
        return Access.OTHER_TENANT
    if document.acl is None:
        return None
    if EVERYONE in document.acl or not principals.isdisjoint(document.acl):
        return Access.CATALOG_ADMITS
    return Access.CATALOG_EXCLUDES


def _passage_access(acl: list[str] | None, principals: frozenset[str]) -> Access:
    if acl is None:
        return Access.UNKNOWN
    if EVERYONE in acl or not principals.isdisjoint(acl):
        return Access.PASSAGE_ADMITS
    return Access.PASSAGE_EXCLUDES


def access_judge(trace: TraceEvent, catalog: Catalog) -> Callable[[Passage], Access]:
    """The judge of a trace's passages. The catalog's ACL comes first: it reflects revocations the
    index has not seen; a passage of another tenant's document is a violation whatever its ACL
    says. Chunks and copies of one document share the catalog's verdict, computed once."""
    principals = caller_principals(trace)
    by_document: dict[str, Access | None] = {}

    def judge(passage: Passage) -> Access:
        doc_id = catalog.document_of(passage)
        if doc_id is not None:
            if doc_id in by_document:
                verdict = by_document[doc_id]
            else:
                verdict = by_document[doc_id] = document_access(doc_id, trace.tenant, principals, catalog)
            if verdict is not None:
                return verdict
        return _passage_access(passage.acl, principals)

    return judge


def unjudged_access(catalog: Catalog) -> Callable[[list[Passage]], Unjudged]:
    """Why no copy of a passage could be judged for access: the catalog knows the document of one
    of them but holds no ACL for it (``no_acl``), or knows none of their documents
    (``unknown_document``); either way no copy carries an ACL of its own."""

    def reason(copies: list[Passage]) -> Unjudged:
        for passage in copies:
            doc_id = catalog.document_of(passage)
            if doc_id is not None and catalog.document(doc_id) is not None:
                return Unjudged.NO_ACL
        return Unjudged.UNKNOWN_DOCUMENT

    return reason


def permission_violations(trace: TraceEvent, catalog: Catalog, stages: StageIds | None = None) -> AccessFindings:
    """Distinct violating passage ids at stage ``candidates`` (any retrieval list) and ``context``,
    and the coverage of the check (which passages could be judged at all). ``stages``: the
    trace's ``stage_ids``, when at hand."""
    access = access_judge(trace, catalog)

    def judge(passage: Passage) -> bool | None:
        return access(passage).violation

    flagged = flag_passages(trace, judge, catalog.document_of, unjudged_access(catalog), stages)
    unknown = sum(1 for verdict in flagged.verdicts.values() if verdict is None)
    return AccessFindings(flagged.candidates, flagged.context, unknown, flagged.doc_ids, flagged.context_doc_ids,
                          flagged.coverage, flagged.flagged)
