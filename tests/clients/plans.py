"""The documents, catalog, caller and questions every framework's app is given. Document ids are
prefixed with the tenant: the catalog's id space is global, and every framework test has a
tenant of its own on the same servers."""

from __future__ import annotations

import time
from typing import Any

DAY = 86400.0


def standard_plan(tenant: str, index: str = "policies") -> dict[str, Any]:
    """Five documents a staff member asks about:

    - ``leave``: readable by staff, current;
    - ``payroll``: readable by the payroll group only (a leak when it reaches a staff caller);
    - ``handbook``: the index holds version 1, the catalog knows version 2 (a stale passage);
    - ``security``: the index still says staff may read it, the catalog says the ACL was
      narrowed to the security group (a revocation: a leak the catalog alone reveals);
    - ``office``: no ACL anywhere (counted as unknown ACL).
    """
    now = time.time()

    def doc(name: str, text: str, version: str | None, acl: list[str] | None) -> dict[str, Any]:
        return {"doc_id": f"{tenant}/{name}", "text": text, "version": version, "acl": acl}

    documents = [
        doc("leave", "Vacation days carry over: up to five unused vacation days carry over into the next year.",
            "3", ["group:staff"]),
        doc("payroll", "Payroll runs on the 25th of each month; salary bands and payroll records are confidential.",
            "1", ["group:payroll"]),
        doc("handbook", "The employee handbook describes remote work, travel and expense rules.", "1",
            ["group:staff"]),
        doc("security", "Security incident procedures: report security incidents to the security desk at once.",
            "1", ["group:staff"]),
        doc("office", "The office opens at nine in the morning and closes at six.", None, None),
    ]

    def event(name: str, version: str, acl: list[str], modified_days_ago: float) -> dict[str, Any]:
        return {"type": "document", "doc_id": f"{tenant}/{name}", "tenant": tenant, "version": version,
                "modified_at": now - modified_days_ago * DAY, "acl": acl}

    catalog = [
        event("leave", "3", ["group:staff"], 30),
        event("payroll", "1", ["group:payroll"], 30),
        event("handbook", "2", ["group:staff"], 2),
        event("security", "1", ["group:security"], 30),
    ]
    return {
        "tenant": tenant,
        "index": index,
        "caller": {"id": f"{tenant}-alice", "groups": ["staff"]},
        "documents": documents,
        "catalog": catalog,
        "questions": [
            "When does payroll run each month?",
            "How many vacation days carry over into the next year?",
            "What does the employee handbook describe about expense rules?",
            "How do I report security incidents?",
            "When does the office open in the morning?",
        ],
    }



def conversation_plan(tenant: str, index: str = "policies") -> dict[str, Any]:
    """:func:`standard_plan`'s documents, catalog and caller, and chats of three turns each, the
    first turn asked as it stands, the follow-ups leaning on it; every message is worded apart, so
    that no two turns are one question to the sampler (near duplicates are sampled once a week).

    - ``turns`` and ``context_turns``: ``rewrite`` is what the fake model of a condense step
      answers (a standalone question; none for a first turn, which has no history to condense);
    - ``expansion_turns``: ``expansions`` is what the fake model of a multi-query retriever answers
      (three searches), chosen so that no one search finds all that the three find together."""
    plan = standard_plan(tenant, index)
    plan["conversation"] = f"{tenant}-chat"
    plan["turns"] = [
        {"message": "How many vacation days carry over into the next year?", "rewrite": None},
        {"message": "And when does payroll run?", "rewrite": "When does payroll run each month?"},
        {"message": "Does the handbook cover that too?",
         "rewrite": "What does the employee handbook describe about expense rules?"},
    ]
    plan["context_turns"] = [
        {"message": "When does the office open in the morning?", "rewrite": None},
        {"message": "Whom do I tell about an incident there?", "rewrite": "How do I report security incidents?"},
        {"message": "Is my salary band visible to others?",
         "rewrite": "Are salary bands and payroll records confidential?"},
    ]
    plan["expansion_turns"] = [
        {"message": "Vacation leftovers?",
         "expansions": ["vacation days carry over", "payroll each month", "office opens in the morning"]},
        {"message": "Pay day?", "expansions": ["payroll runs on the 25th", "salary bands confidential",
                                               "security incidents desk"]},
        {"message": "Expenses on trips?", "expansions": ["employee handbook expense rules", "remote work travel",
                                                         "vacation days unused"]},
    ]
    return plan
