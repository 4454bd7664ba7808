"""What the read API and the CLI show of the findings: a page of findings, and one trace with its
findings and its sample. ``collectors/http.py`` serves these as ``GET /api/v1/findings`` and
``GET /api/v1/traces/{trace_id}``; ``ragmon findings list`` and ``ragmon trace show`` print them.
:class:`ReadView` serves the unread OTLP traces too (``unread_view.py``).

Ids a sender chose (trace ids, tenants, index names) are stored by their shown id
(``Redactor.shown_id``, docs/sampling.md "Shown ids"): a reader may give either the id itself or
the shown id, and both are looked up (:class:`StoredIds`). A reader whose token is scoped to some
tenants sees only their findings and samples. Every answer is bounded: a page of findings stops at
:data:`RESPONSE_BUDGET_BYTES` and says where to go on (``next_cursor``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragmon.collectors.unread.names import ShownNames
from ragmon.monitor.app.status_page import StatusPage
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.findings.query import QueryError, query_from
from ragmon.monitor.findings.store import FindingQuery, FindingsStore, as_json
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import Sample, SampleStore

if TYPE_CHECKING:
    from ragmon.monitor.app.wiring import Runtime

TRACE_FINDINGS_SHOWN = 1000  # a trace has a handful; this bounds a hostile one
RESPONSE_BUDGET_BYTES = 1024 * 1024  # the findings of one answer, as JSON; a client pages on beyond it


class StoredIds:
    """How an id a reader gives is looked up: by its shown id, and as given (it may be a shown id
    already, copied from another answer or an alert)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def of(self, value: str, parameter: str) -> tuple[str, ...]:
        """The stored values ``value`` may stand for: its shown id under every key of the caller
        keyring (the newest first: rows made before a rotation hold an older one), then ``value``
        itself; raises :class:`QueryError` naming ``parameter`` when the shown id needs a key this
        process lacks, or for a NUL character (no stored id holds one, and PostgreSQL refuses it in
        a query)."""
        if "\x00" in value:
            raise QueryError(f"{parameter}: holds a NUL character")
        try:
            shown = self._redactor.shown_candidates(value)
        except ValueError:
            raise QueryError(f"{parameter}: this id is stored by a keyed hash; set redaction.caller_key (as the "
                             "serving process has it) to look it up") from None
        return shown if value in shown else (*shown, value)

    def shown_id(self, value: str) -> str:
        """``Redactor.shown_id`` of the reading process (raises ValueError when the id needs a key
        this process lacks)."""
        return self._redactor.shown_id(value)

    def scope(self, tenants: Iterable[str]) -> frozenset[str]:
        """The stored tenant values a reader scoped to ``tenants`` (as configured) may see."""
        return frozenset(stored for tenant in tenants for stored in self.of(tenant, "tenant"))


def stored_ids_for(settings: Settings) -> StoredIds:
    """The look-up of a command that reads the database ``serve`` writes: keyed as ``serve`` is.
    Without a key (a shared database and no ``redaction.caller_key``), ids shown as they are are
    still found; one that needs the key is refused, naming the setting."""
    from ragmon.monitor.app.wiring import reading_redactor

    return StoredIds(reading_redactor(settings))


def findings_page(store: FindingsStore, params: Mapping[str, str], now: float, ids: StoredIds, *,
                  tenants: frozenset[str] | None = None, budget: int = RESPONSE_BUDGET_BYTES) -> dict[str, Any]:
    """``{"findings": [...], "next_cursor": id | None}``, newest first, at most ``limit`` rows and
    (but for the first row) ``budget`` bytes of JSON; ``tenants``: the stored tenant values the
    reader may see (None: all). Raises :class:`QueryError` for a bad parameter."""
    query = query_from(params, now)
    stored = _as_stored(query, ids, tenants)
    return bounded_page(store.find(stored) if stored is not None else [], as_json, query.limit, budget)


def trace_view(store: FindingsStore, samples: SampleStore, trace_id: str, ids: StoredIds, *,
               tenants: frozenset[str] | None = None, budget: int = RESPONSE_BUDGET_BYTES) -> dict[str, Any] | None:
    """Every finding of the trace, newest first, and its stored sample (redacted) if one was
    stored; None when ragmon holds neither (or none the reader's ``tenants`` may see). The trace is
    named by its shown id. Findings beyond ``budget`` bytes are left for the findings API:
    ``findings_next_cursor`` is then the ``cursor`` of ``/api/v1/findings?trace_id=…``."""
    for stored in ids.of(trace_id, "trace_id"):
        rows = store.find(FindingQuery(trace_id=stored, limit=TRACE_FINDINGS_SHOWN))
        sample = samples.find_one(stored)
        if tenants is not None:
            rows = [row for row in rows if row.tenant in tenants]
            sample = sample if sample is not None and sample.tenant in tenants else None
        if rows or sample is not None:
            break
    else:
        return None
    shown_sample = None if sample is None else _sample_json(sample)
    sample_size = len(json.dumps(shown_sample, ensure_ascii=False).encode())
    page = bounded_page(rows, as_json, TRACE_FINDINGS_SHOWN, budget - sample_size)
    return {"trace_id": stored, "findings": page["findings"], "findings_next_cursor": page["next_cursor"],
            "sample": shown_sample}


class ReadView:
    """The read API and pages of ``ragmon serve`` (``collectors.http.ReadApi``) over a runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._status = StatusPage(runtime, runtime.clock)
        self._ids = StoredIds(runtime.redactor)
        self._names = ShownNames(self._ids.shown_id)

    def findings(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]:
        scope = None if tenants is None else self._ids.scope(tenants)
        return findings_page(self._runtime.findings, params, self._runtime.clock(), self._ids, tenants=scope)

    def trace(self, trace_id: str, tenants: Collection[str] | None = None) -> dict[str, Any] | None:
        scope = None if tenants is None else self._ids.scope(tenants)
        return trace_view(self._runtime.findings, self._runtime.samples, trace_id, self._ids, tenants=scope)

    def unread(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]:
        from ragmon.monitor.app.unread_view import unread_page  # which imports this module's StoredIds

        scope = None if tenants is None else self._ids.scope(tenants)
        return unread_page(self._runtime.unread, params, self._runtime.clock(), self._ids, self._names, tenants=scope)

    def page(self) -> str:
        return self._status.render()

    def trace_page(self, trace_id: str) -> str | None:
        for stored in self._ids.of(trace_id, "trace_id"):
            if (page := self._status.trace(stored)) is not None:
                return page
        return None


def _sample_json(sample: Sample) -> dict[str, Any]:
    return {"strata": sample.strata, "status": sample.status, "week": sample.week, "split": sample.split,
            "trace": sample.payload}


def bounded_page(rows: Sequence[Any], shown: Callable[[Any], dict[str, Any]], limit: int, budget: int,
                 name: str = "findings") -> dict[str, Any]:
    """``rows`` as JSON (``shown`` each, under ``name``) up to ``budget`` bytes (but at least one),
    and the cursor of the next page: the id of the last row shown when the budget or ``limit`` cut
    the page short, else None."""
    page: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        item = shown(row)
        size += len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()) + 1
        if page and size > budget:
            return {name: page, "next_cursor": page[-1]["id"]}
        page.append(item)
    return {name: page, "next_cursor": rows[-1].id if rows and len(rows) >= limit else None}


def _as_stored(query: FindingQuery, ids: StoredIds, tenants: frozenset[str] | None) -> FindingQuery | None:
    """``query`` over the stored values its tenant, index and trace id may stand for (any of
    them), tenants limited to ``tenants``; None when that leaves no tenant to read."""
    def values(given: str | None, name: str) -> tuple[str, ...] | None:  # one value each, as a reader gives it
        return None if given is None else ids.of(given, name)

    tenant_values = values(query.tenant, "tenant")
    if tenants is not None:
        tenant_values = tuple(sorted(tenants if tenant_values is None else set(tenant_values) & tenants))
        if not tenant_values:
            return None
    return replace(query, tenant=tenant_values, index=values(query.index, "index"),
                   trace_id=values(query.trace_id, "trace_id"))
