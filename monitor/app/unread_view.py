"""What the read API and the CLI show of the OTLP traces ragmon could not read, or read without a
caller or a context: ``GET /api/v1/unread`` and ``ragmon otlp unread`` take the same parameters
(``scope``, ``missing``, ``tenant``, ``since``, ``limit``, ``cursor``), checked here, each error
naming the parameter.

A scope and a tenant are stored as shown (``collectors/unread/names.py``, ``Redactor.shown_id``):
a reader may give either the name as the application sent it or as shown, and both are looked up.
A reader whose token is scoped to some tenants sees the rows of those tenants only; a trace that
named no tenant (the resource's ``ragmon.tenant`` unset, and nothing read) is seen only by a reader
of every tenant. Every answer is bounded: a page stops at :data:`RESPONSE_BUDGET_BYTES` and says
where to go on (``next_cursor``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ragmon.collectors.unread.closest import MISSING
from ragmon.collectors.unread.names import ShownNames
from ragmon.monitor.app.findings_view import RESPONSE_BUDGET_BYTES, StoredIds, bounded_page
from ragmon.monitor.findings.query import MAX_LIMIT, QueryError, parse_since, whole_number
from ragmon.monitor.storage.unread_store import UnreadQuery, UnreadStore, as_json

PARAMETERS = ("scope", "missing", "tenant", "since", "limit", "cursor")


def unread_query(params: Mapping[str, str], now: float) -> UnreadQuery:
    """The query the parameters describe, as a reader gave them. Unknown parameters are refused
    (a typo would otherwise widen the answer silently)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise QueryError(f"{unknown[0]}: unknown parameter (known: {', '.join(PARAMETERS)})")
    missing = params.get("missing") or None
    if missing is not None and missing not in MISSING:
        raise QueryError(f"missing: {missing[:40]!r} is not one of {', '.join(MISSING)}")
    limit = whole_number(params, "limit", 50)
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit: {limit} is not between 1 and {MAX_LIMIT}")
    since = params.get("since") or None
    return UnreadQuery(scope=params.get("scope") or None, missing=missing, tenant=params.get("tenant") or None,
                       since=parse_since(since, now) if since is not None else None, limit=limit,
                       cursor=whole_number(params, "cursor", None))


def unread_page(store: UnreadStore, params: Mapping[str, str], now: float, ids: StoredIds, names: ShownNames, *,
                tenants: frozenset[str] | None = None, budget: int = RESPONSE_BUDGET_BYTES) -> dict[str, Any]:
    """``{"unread": [...], "next_cursor": id | None}``, newest first, at most ``limit`` rows and
    (but for the first row) ``budget`` bytes of JSON; ``tenants``: the stored tenant values the
    reader may see (None: all). Raises :class:`QueryError` for a bad parameter."""
    query = unread_query(params, now)
    tenant_values = None if query.tenant is None else ids.of(str(query.tenant), "tenant")
    if tenants is not None:
        tenant_values = tuple(sorted(tenants if tenant_values is None else set(tenant_values) & tenants))
        if not tenant_values:
            return bounded_page([], as_json, query.limit, budget, "unread")
    scope = None if query.scope is None else _scopes(str(query.scope), ids, names)
    return bounded_page(store.find(replace(query, scope=scope, tenant=tenant_values)), as_json, query.limit, budget,
                        "unread")


def _scopes(given: str, ids: StoredIds, names: ShownNames) -> tuple[str, ...]:
    """The stored values a scope a reader gives may stand for: as shown (under every key of the
    caller keyring, the newest first), and as given (it may be a shown name already, copied from
    another answer or a metric label)."""
    if "\x00" in given:
        raise QueryError("scope: holds a NUL character")
    try:
        shown = names.name(given)
        # a name under a previous key: shaped as ``names`` shapes one, from that key's shown id
        older = [ShownNames(lambda raw, candidate=candidate: candidate).name(given)
                 for candidate in ids.of(given, "scope")[1:] if candidate != given]
    except (ValueError, QueryError):
        raise QueryError("scope: this name is stored by a keyed hash; set redaction.caller_key (as the serving "
                         "process has it) to look it up") from None
    stored = dict.fromkeys((shown, *older, given))
    return tuple(stored)
