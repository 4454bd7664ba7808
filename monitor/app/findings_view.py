"""What the read API and the CLI show of the findings: a page of findings, and one trace with its
findings and its sample. ``collectors/http.py`` serves these as ``GET /api/v1/findings`` and
``GET /api/v1/traces/{trace_id}``; ``ragmon findings list`` and ``ragmon trace show`` print them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragmon.monitor.app.status_page import StatusPage
from ragmon.monitor.findings.query import query_from
from ragmon.monitor.findings.store import FindingQuery, FindingsStore, as_json
from ragmon.monitor.labeling.sample_store import SampleStore

if TYPE_CHECKING:
    from ragmon.monitor.app.wiring import Runtime

TRACE_FINDINGS_SHOWN = 1000  # a trace has a handful; this bounds a hostile one


def findings_page(store: FindingsStore, params: Mapping[str, str], now: float) -> dict[str, Any]:
    """``{"findings": [...], "next_cursor": id | None}``, newest first; raises
    :class:`~ragmon.monitor.findings.query.QueryError` for a bad parameter."""
    query = query_from(params, now)
    rows = store.find(query)
    more = len(rows) == query.limit
    return {"findings": [as_json(row) for row in rows], "next_cursor": rows[-1].id if more and rows else None}


def trace_view(store: FindingsStore, samples: SampleStore, trace_id: str) -> dict[str, Any] | None:
    """Every finding of the trace, newest first, and its stored sample (redacted) if one was
    stored; None when ragmon holds neither."""
    rows = store.find(FindingQuery(trace_id=trace_id, limit=TRACE_FINDINGS_SHOWN))
    sample = samples.find_one(trace_id)
    if not rows and sample is None:
        return None
    return {
        "trace_id": trace_id,
        "findings": [as_json(row) for row in rows],
        "sample": None if sample is None else {
            "strata": sample.strata, "status": sample.status, "week": sample.week, "split": sample.split,
            "trace": sample.payload},
    }


class ReadView:
    """The read API and pages of ``ragmon serve`` (``collectors.http.ReadApi``) over a runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._status = StatusPage(runtime, runtime.clock)

    def findings(self, params: Mapping[str, str]) -> dict[str, Any]:
        return findings_page(self._runtime.findings, params, self._runtime.clock())

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        return trace_view(self._runtime.findings, self._runtime.samples, trace_id)

    def page(self) -> str:
        return self._status.render()

    def trace_page(self, trace_id: str) -> str | None:
        return self._status.trace(trace_id)
