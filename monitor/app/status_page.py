"""The status page of ``ragmon serve`` (``GET /``) and a page per trace (``GET /traces/{id}``):
server-rendered HTML, no script, refreshing itself. What an on-call engineer looks at first:
ingest and dead letters, signals per tenant and index, pushed alerts, the latest findings (each
linking to its trace's page), the labeling queue, and catalog health.

Everything shown is what the metrics, the findings and the stores already hold (ids, counts,
rules in words): no query or passage text. Every value goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ragmon.monitor.findings.store import FindingQuery, FindingRow

if TYPE_CHECKING:
    from ragmon.monitor.app.wiring import Runtime

REFRESH_SECONDS = 3  # a new leak shows within 5 s
LATEST_FINDINGS = 20
# (column, metric, labels it must have): the signals per tenant and index, from the metrics
SIGNAL_COLUMNS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("answers", "ragmon_answers_total", {}),
    ("abstained", "ragmon_answers_total", {"outcome": "abstained"}),
    ("leaks (context)", "ragmon_permission_violations_total", {"stage": "context"}),
    ("stale served", "ragmon_stale_passages_served_total", {"stage": "context"}),
    ("low-score lists", "ragmon_low_score_retrievals_total", {}),
    ("unsupported citations", "ragmon_unsupported_citations_total", {}),
    ("mixed embeddings", "ragmon_mixed_embedding_results_total", {}),
    ("rephrases", "ragmon_rephrases_total", {}),
)
_STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}
h2{font-size:1.05em;margin-top:1.6em}table{border-collapse:collapse}td,th{padding:.25em .7em;
border-bottom:1px solid #ddd;text-align:left;vertical-align:top}td.n{text-align:right}
.bad{color:#b00;font-weight:600}.muted{color:#777}"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """Rows of cells already escaped (or markup of ours)."""
    body = "".join("<tr>" + "".join(f'<td class="n">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    if not body:
        return '<p class="muted">none</p>'
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + f"</tr>{body}</table>"


def _page(title: str, body: str, refresh: int | None) -> str:
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}<title>{_e(title)}</title>'
            f'<link rel="icon" href="data:,"><style>{_STYLE}</style></head><body>{body}</body></html>')


class StatusPage:
    """Renders the pages from a runtime's parts; ``clock`` gives the time shown and the rates."""

    def __init__(self, runtime: Runtime, clock: Callable[[], float] = time.time) -> None:
        self._runtime = runtime
        self._clock = clock
        self._lock = threading.Lock()
        self._previous: tuple[float, dict[str, int]] | None = None  # (when, events per source): for rates

    def render(self) -> str:
        now = self._clock()
        body = (f"<h1>ragmon</h1><p class=\"muted\">{_e(_when(now))}, refreshes every {REFRESH_SECONDS} s · "
                f'<a href="/metrics">metrics</a> · <a href="/api/v1/findings">findings (JSON)</a></p>'
                + self._ingest(now) + self._signals() + self._alerts() + self._findings() + self._samples()
                + self._catalog(now))
        return _page("ragmon status", body, REFRESH_SECONDS)

    def trace(self, trace_id: str) -> str | None:
        """The page of one trace: its findings and its sample's strata; None when ragmon holds neither."""
        rows = self._runtime.findings.find(FindingQuery(trace_id=trace_id, limit=1000))
        sample = self._runtime.samples.find_one(trace_id)
        if not rows and sample is None:
            return None
        body = (f'<p><a href="/">← status</a></p><h1>trace {_e(trace_id)}</h1><h2>findings</h2>'
                + _findings_table(rows, with_trace=False) + "<h2>sample</h2>"
                + (f"<p>week {_e(sample.week)}, {_e(sample.status)}, strata {_e(', '.join(sample.strata))}</p>"
                   if sample is not None else '<p class="muted">not sampled</p>'))
        return _page(f"ragmon trace {trace_id}", body, None)

    # -- sections ----------------------------------------------------------------------------------

    def _ingest(self, now: float) -> str:
        accepted, rejected, last, _, duplicates = self._runtime.pipeline.stats.full_snapshot()
        by_source: Counter[str] = Counter()
        for (source, _), n in accepted.items():
            by_source[source] += n
        with self._lock:
            previous, self._previous = self._previous, (now, dict(by_source))
        rows = []
        for source, n in sorted(by_source.items()):
            rate = "–"
            if previous is not None and now > previous[0]:
                rate = f"{(n - previous[1].get(source, 0)) / (now - previous[0]):.1f}"
            newest = max((t for (s, _), t in last.items() if s == source), default=None)
            rows.append((_e(source), _e(n), rate, _e(duplicates.get(source, 0)),
                         _e(_when(newest)) if newest else "–"))
        reasons: Counter[str] = Counter()
        for (_, reason), n in rejected.items():
            reasons[reason] += n
        letters = _table(("reason", "records"), ((_e(r), _e(n)) for r, n in reasons.most_common()), numeric=(1,))
        return ("<h2>ingest</h2>" + _table(("source", "events", "per second", "duplicates", "last event"), rows,
                                            numeric=(1, 2, 3))
                + "<h2>dead letters by reason</h2>" + letters)

    def _signals(self) -> str:
        wanted = {metric for _, metric, _ in SIGNAL_COLUMNS}
        counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for family in self._runtime.registry.collect():
            for sample in family.samples:
                if sample.name not in wanted or "tenant" not in sample.labels:
                    continue
                key = (sample.labels["tenant"], sample.labels.get("index", ""))
                for column, metric, match in SIGNAL_COLUMNS:
                    if metric == sample.name and all(sample.labels.get(k) == v for k, v in match.items()):
                        counts[key][column] += sample.value
        rows = []
        for (tenant, index), row in sorted(counts.items()):
            cells = []
            for column, _, _ in SIGNAL_COLUMNS:
                value = int(row[column])
                bad = value and column in ("leaks (context)", "stale served")
                cells.append(f'<span class="bad">{value}</span>' if bad else str(value))
            rows.append((_e(tenant), _e(index), *cells))
        headers = ("tenant", "index", *(column for column, _, _ in SIGNAL_COLUMNS))
        return "<h2>signals per tenant and index</h2>" + _table(headers, rows, numeric=range(2, len(headers)))

    def _alerts(self) -> str:
        dispatcher = self._runtime.alerts
        if dispatcher is None:
            return ('<h2>alerts</h2><p class="muted">no direct push configured (alerts.alertmanager_url, '
                    "alerts.webhook_url): Prometheus raises them from the rules</p>")
        firing = [a for a in dispatcher.book.alerts() if not a.resolved]
        rows = [(_e(a.name), _e(", ".join(f"{k}={v}" for k, v in a.labels)), _e(a.count),
                 " ".join(f'<a href="/traces/{quote(t, safe="")}">{_e(t)}</a>' for t in a.trace_ids),
                 _e(_when(a.starts_at))) for a in firing]
        return "<h2>alerts firing (pushed)</h2>" + _table(("alert", "labels", "count", "traces", "since"), rows,
                                                          numeric=(2,))

    def _findings(self) -> str:
        rows = self._runtime.findings.find(FindingQuery(limit=LATEST_FINDINGS))
        return f"<h2>latest findings</h2>{_findings_table(rows, with_trace=True)}"

    def _samples(self) -> str:
        store = self._runtime.samples
        statuses = store.counts_by_status()
        weeks = store.latest_weeks(1)
        strata: Counter[str] = Counter()
        if weeks:
            for sample in store.find(week=weeks[0], status="queued"):
                strata.update(sample.strata)
        return ("<h2>labeling queue</h2><p>" + _e(", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
                                                  or "empty") + "</p>"
                + (f"<p>queued in {_e(weeks[0])}, by stratum:</p>" if weeks else "")
                + _table(("stratum", "samples"), ((_e(s), _e(n)) for s, n in strata.most_common()), numeric=(1,)))

    def _catalog(self, now: float) -> str:
        health = self._runtime.catalog.health(now)
        rows = [(_e(index), _e(h.stale_documents), _e(f"{h.max_staleness_seconds / 3600:.1f}"),
                 _e(h.embedding_models), _e(", ".join(h.stalest))) for index, h in sorted(health.items())]
        return ("<h2>catalog</h2>" + f"<p>{_e(len(self._runtime.catalog.documents))} documents</p>"
                + _table(("index", "stale documents", "max staleness (h)", "embedding models", "stalest"), rows,
                         numeric=(1, 2, 3)))


def _findings_table(rows: Sequence[FindingRow], with_trace: bool) -> str:
    cells = []
    for row in rows:
        documents = ", ".join(doc + (f"@{version}" if version else "") for doc, version in row.documents)
        trace = [f'<a href="/traces/{quote(row.trace_id, safe="")}">{_e(row.trace_id)}</a>'] if with_trace else []
        cells.append((_e(_when(row.time)), *trace, _e(row.tenant), _e(row.index_name), _e(row.signal),
                      _e(row.stage or ""), _e(documents), _e(row.reason)))
    headers = ("time", *(["trace"] if with_trace else []), "tenant", "index", "signal", "stage", "documents",
               "reason")
    return _table(headers, cells)
