"""Permission violations: a passage the caller may not read reached a retrieval list or the context."""

from __future__ import annotations

from monitor.catalog import Catalog
from monitor.model import Passage, TraceEvent
from monitor.signals.results import AccessFindings
from monitor.signals.stages import flag_passages

EVERYONE = "*"


def caller_principals(trace: TraceEvent) -> frozenset[str]:
    """``user:<id>``, ``tenant:<tenant>`` and ``group:<g>`` for each of the caller's groups."""
    principals = {f"tenant:{trace.tenant}"}
    if trace.caller is not None:
        if trace.caller.id:
            principals.add(f"user:{trace.caller.id}")
        principals.update(f"group:{group}" for group in trace.caller.groups)
    return frozenset(principals)


def _verdict(passage: Passage, tenant: str, principals: frozenset[str], catalog: Catalog) -> bool | None:
    """True: a violation; False: allowed; None: no ACL known.

    The catalog's ACL comes first because it reflects revocations the index has not seen; a
    passage of another tenant's document is a violation whatever its ACL says.
    """
    acl = passage.acl
    if passage.doc_id is not None:
        document = catalog.document(passage.doc_id)
        if document is not None:
            if document.tenant != tenant:
                return True
            if document.acl is not None:
                acl = list(document.acl)
    if acl is None:
        return None
    if EVERYONE in acl:
        return False
    return principals.isdisjoint(acl)


def permission_violations(trace: TraceEvent, catalog: Catalog) -> AccessFindings:
    """Distinct violating passage ids at stage ``candidates`` (any retrieval list) and ``context``."""
    principals = caller_principals(trace)
    flagged = flag_passages(trace, lambda passage: _verdict(passage, trace.tenant, principals, catalog))
    unknown = sum(1 for verdict in flagged.verdicts.values() if verdict is None)
    return AccessFindings(flagged.candidates, flagged.context, unknown, flagged.doc_ids)
