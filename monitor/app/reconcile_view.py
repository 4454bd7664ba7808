"""Reconciliation in words, for the status page and ``ragmon catalog reconcile``: a row per tenant and
index, and a finding per document named (the oldest :data:`MAX_EXAMPLES` of each kind) with the rule
it broke. Ids are shown as every surface shows them (``shown``: ``Redactor.shown_id``); ``user:``
principals as pseudonyms (``principal``: ``Redactor.principal``). Document ids are named here as SPEC
§4 allows alerts and findings to: at most ten per tenant, index and kind, never in a metric label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragmon.monitor.core.reconcile import MAX_EXAMPLES, RULES, Drift, NotJudged, Reconciliation

PRINCIPALS_SHOWN = 5  # principals named in a rule; the rest counted


@dataclass(frozen=True, slots=True)
class DriftFinding:
    """One document an index serves unlike its source: where, what kind, since when, and the rule."""

    tenant: str
    index: str
    kind: str
    doc_id: str
    age_seconds: float
    rule: str


@dataclass(frozen=True, slots=True)
class DriftRow:
    """One tenant and index: live entries, documents and oldest age per kind, entries not judged."""

    tenant: str
    index: str
    entries: int
    documents: dict[str, int]
    oldest_seconds: dict[str, float]
    not_judged: dict[str, int]


def drift_rows(result: Reconciliation, shown: Callable[[str], str]) -> list[DriftRow]:
    """A row per tenant and index holding live entries: revocations pending first (the oldest
    first), then the rest by name."""
    rows = [DriftRow(shown(tenant), shown(index), n,
                     {kind.value: result.tally(tenant, index, kind).documents for kind in Drift},
                     {kind.value: result.oldest_seconds(tenant, index, kind) for kind in Drift},
                     {reason.value: result.not_judged.get((tenant, index, reason), 0) for reason in NotJudged})
            for (tenant, index), n in result.entries.items()]
    return sorted(rows, key=lambda r: (-r.oldest_seconds[Drift.ACL_NARROWER], r.tenant, r.index))


def drift_findings(result: Reconciliation, shown: Callable[[str], str], principal: Callable[[str], str],
                   tenant: str | None = None, index: str | None = None,
                   kind: str | None = None) -> list[DriftFinding]:
    """The documents named, oldest first within each tenant, index and kind (at most
    :data:`MAX_EXAMPLES` each); ``tenant``, ``index``, ``kind`` select (a tenant or index as shown)."""
    findings = []
    for (where_tenant, where_index, drift), tally in sorted(result.drift.items()):
        if (tenant is not None and shown(where_tenant) != tenant) or (
                index is not None and shown(where_index) != index) or (kind is not None and drift.value != kind):
            continue
        for example in tally.examples[:MAX_EXAMPLES]:
            named = [principal(p) for p in example.principals[:PRINCIPALS_SHOWN]]
            rest = len(example.principals) - len(named)
            who = ", ".join(named) + (f" and {rest} more" if rest > 0 else "")
            findings.append(DriftFinding(shown(where_tenant), shown(where_index), drift.value, shown(example.doc_id),
                                         max(0.0, result.as_of - example.since), RULES[drift].format(principals=who)))
    return findings
