"""Permission violations: a passage the caller may not read reached a retrieval list or the context."""

from __future__ import annotations

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import AccessFindings
from ragmon.monitor.core.signals.stages import flag_passages

EVERYONE = "*"


def caller_principals(trace: TraceEvent) -> frozenset[str]:
    """``user:<id>``, ``tenant:<tenant>`` and ``group:<g>`` for each of the caller's groups."""
    principals = {f"tenant:{trace.tenant}"}
    if trace.caller is not None:
        if trace.caller.id:
            principals.add(f"user:{trace.caller.id}")
        principals.update(f"group:{group}" for group in trace.caller.groups)
    return frozenset(principals)


_ACL_OF_PASSAGE = object()  # the catalog has no say: the passage's own ACL decides


def _document_verdict(doc_id: str, tenant: str, principals: frozenset[str], catalog: Catalog):
    """The catalog's verdict on a document: True (another tenant's, or its ACL excludes the
    caller), False (its ACL admits the caller), or ``_ACL_OF_PASSAGE`` when the catalog does not
    know the document or its ACL."""
    document = catalog.document(doc_id)
    if document is None:
        return _ACL_OF_PASSAGE
    if document.tenant != tenant:
        return True
    if document.acl is None:
        return _ACL_OF_PASSAGE
    return EVERYONE not in document.acl and principals.isdisjoint(document.acl)


def _acl_verdict(acl: list[str] | None, principals: frozenset[str]) -> bool | None:
    if acl is None:
        return None
    if EVERYONE in acl:
        return False
    return principals.isdisjoint(acl)


def permission_violations(trace: TraceEvent, catalog: Catalog) -> AccessFindings:
    """Distinct violating passage ids at stage ``candidates`` (any retrieval list) and ``context``."""
    principals = caller_principals(trace)
    by_document: dict[str, object] = {}  # chunks and copies of one document share its verdict

    def judge(passage: Passage) -> bool | None:
        """The catalog's ACL comes first: it reflects revocations the index has not seen; a
        passage of another tenant's document is a violation whatever its ACL says."""
        doc_id = catalog.document_of(passage)
        if doc_id is not None:
            verdict = by_document.get(doc_id)
            if verdict is None:
                verdict = by_document[doc_id] = _document_verdict(doc_id, trace.tenant, principals, catalog)
            if verdict is not _ACL_OF_PASSAGE:
                return verdict
        return _acl_verdict(passage.acl, principals)

    flagged = flag_passages(trace, judge, catalog.document_of)
    unknown = sum(1 for verdict in flagged.verdicts.values() if verdict is None)
    return AccessFindings(flagged.candidates, flagged.context, unknown, flagged.doc_ids, flagged.context_doc_ids)
