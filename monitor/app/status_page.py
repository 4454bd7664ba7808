"""The status page of ``ragmon serve`` (``GET /``) and a page per trace (``GET /traces/{id}``):
server-rendered HTML, no script, refreshing itself. What an on-call engineer looks at first:
ingest and dead letters, the OTLP traces read per instrumentation scope, signals per tenant and
index, pushed alerts, the latest findings (each linking to its trace's page), the labeling queue,
catalog health, and its reconciliation (what the indexes serve against their sources, without
traffic: docs/catalog.md, "Reconciliation").

A count of leaks or stale passages is shown with the share of the passages behind it that its
check could judge (``ragmon_passages_judged_total`` against ``ragmon_passages_unjudged_total``),
and the catalog table gives each index's coverage over the trailing window
(``ragmon_passage_coverage_ratio``), indexes with traffic and no index event among them: a zero
ragmon could not have seen is never shown as a healthy zero.

Everything shown is what the metrics, the findings and the stores already hold (ids, counts,
rules in words): no query or passage text. Every value goes through :func:`html.escape`.

The page is bounded whatever is stored, since it is refreshed every few seconds: each table lists
at most a fixed number of rows (the ones that matter most first) and says how many it left out and
where to read them all; each cell is cut to :data:`CELL_CHARS` characters; the labeling queue is
read as counts, never as samples.
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
LATEST_FINDINGS = 20  # findings listed, newest first; all of them through GET /api/v1/findings
SIGNAL_ROWS = 50  # (tenant, index) rows of the signals: the labels' caps allow 51 x 51 of them
SCOPE_ROWS = 25  # instrumentation scopes (labels.max_scopes, 20 by default, the allowlist and `other`)
ALERT_ROWS = 20
CATALOG_ROWS = 50  # indexes listed, the stalest first
TRACE_FINDINGS = 100  # a trace's findings on its page (a trace has a handful); all through the API
CELL_CHARS = 200  # a longer cell (a reason naming hundreds of groups, a list of documents) is cut
COUNTED_AT_MOST = 10_000  # findings counted for "N of TOTAL shown"; beyond, "more than 10,000"
BLIND_BELOW = 0.5  # a zero whose check judged less than this share of the passages is shown as blind
# the signal columns whose count is only as good as the check behind it: (column, check)
JUDGED_BY = {"leaks (context)": "access", "stale served": "freshness"}
COVERAGE = "ragmon_passage_coverage_ratio"
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
# (metric, its `missing` label) -> the column of the scopes table counting it
_SCOPE_COLUMNS = {("ragmon_otlp_traces_read_total", ""): "read",
                  ("ragmon_otlp_traces_without_retrieval_total", ""): "no retrieval",
                  ("ragmon_otlp_traces_incomplete_total", "caller"): "no caller",
                  ("ragmon_otlp_traces_incomplete_total", "context"): "no context"}
_STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}
h2{font-size:1.05em;margin-top:1.6em}table{border-collapse:collapse}td,th{padding:.25em .7em;
border-bottom:1px solid #ddd;text-align:left;vertical-align:top}td.n{text-align:right}
.bad{color:#b00;font-weight:600}.muted{color:#777}"""


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cut(value: Any) -> str:
    """``value`` as text of at most :data:`CELL_CHARS` characters, an ellipsis ending a cut one."""
    text = str(value)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def _e(value: Any) -> str:
    return html.escape(_cut(value), quote=True)


def _trace_link(trace_id: str) -> str:
    return f'<a href="/traces/{quote(trace_id, safe="")}">{_e(trace_id)}</a>'


def _part(shown: int, total: int, where: str = "", capped: bool = False) -> str:
    """The line under a table listing ``shown`` of ``total`` rows (``capped``: ``total`` is where
    counting stopped, there are more): nothing when it lists them all."""
    if shown >= total and not capped:
        return ""
    counted = f"more than {total:,}" if capped else f"{total:,}"
    return f'<p class="muted">{shown} of {counted} shown{where}</p>'


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
        samples = [sample for family in self._runtime.registry.collect() for sample in family.samples]
        body = (f"<h1>ragmon</h1><p class=\"muted\">{_e(_when(now))}, refreshes every {REFRESH_SECONDS} s · "
                f'<a href="/metrics">metrics</a> · <a href="/api/v1/findings">findings (JSON)</a></p>'
                + self._ingest(now) + self._scopes() + self._signals(samples) + self._alerts() + self._findings()
                + self._samples() + self._catalog(now, samples) + self._reconciliation())
        return _page("ragmon status", body, REFRESH_SECONDS)

    def trace(self, stored_id: str) -> str | None:
        """The page of one trace, named by the id the stores hold (``ReadView.trace_page`` maps the
        id a reader gives): its findings and its sample's strata; None when ragmon holds neither."""
        rows = self._runtime.findings.find(FindingQuery(trace_id=stored_id, limit=TRACE_FINDINGS))
        sample = self._runtime.samples.find_one(stored_id)
        if not rows and sample is None:
            return None
        total, capped = self._total(rows, TRACE_FINDINGS, stored_id)
        api = f"/api/v1/traces/{quote(stored_id, safe='')}"
        body = (f'<p><a href="/">← status</a></p><h1>trace {_e(stored_id)}</h1><h2>findings</h2>'
                + _findings_table(rows, with_trace=False)
                + _part(len(rows), total, f', all of them: <a href="{api}">{_e(api)}</a>', capped)
                + "<h2>sample</h2>"
                + (f"<p>week {_e(sample.week)}, {_e(sample.status)}, strata {_e(', '.join(sample.strata))}</p>"
                   if sample is not None else '<p class="muted">not sampled</p>'))
        return _page(f"ragmon trace {_cut(stored_id)}", body, None)

    def _total(self, rows: Sequence[FindingRow], listed: int, trace_id: str | None = None) -> tuple[int, bool]:
        """How many findings there are (of one trace) beside the ``rows`` a table lists (at most
        ``listed``): counted only when the table is full, and then up to :data:`COUNTED_AT_MOST`."""
        if len(rows) < listed:
            return len(rows), False
        return self._runtime.findings.count(COUNTED_AT_MOST, trace_id)

    def _shown(self, value: str) -> str:
        """An id the catalog holds as its sender named it, shown as every surface shows it."""
        return self._runtime.redactor.shown_id(value)

    # -- sections ----------------------------------------------------------------------------------

    def _ingest(self, now: float) -> str:
        accepted, rejected, last, _, duplicates = self._runtime.pipeline.stats.full_snapshot()
        by_source: Counter[str] = Counter()
        for (source, _), n in accepted.items():
            by_source[source] += n
        with self._lock:
            previous, self._previous = self._previous, (now, dict(by_source))
        rows = []
        for source, n in sorted(by_source.items()):  # a closed set of sources
            rate = "–"
            if previous is not None and now > previous[0]:
                rate = f"{(n - previous[1].get(source, 0)) / (now - previous[0]):.1f}"
            newest = max((t for (s, _), t in last.items() if s == source), default=None)
            rows.append((_e(source), _e(n), rate, _e(duplicates.get(source, 0)),
                         _e(_when(newest)) if newest else "–"))
        reasons: Counter[str] = Counter()
        for (_, reason), n in rejected.items():  # a closed set of reasons
            reasons[reason] += n
        letters = _table(("reason", "records"), ((_e(r), _e(n)) for r, n in reasons.most_common()), numeric=(1,))
        return ("<h2>ingest</h2>" + _table(("source", "events", "per second", "duplicates", "last event"), rows,
                                            numeric=(1, 2, 3))
                + "<h2>dead letters by reason</h2>" + letters)

    def _scopes(self) -> str:
        """OTLP traces per instrumentation scope: how many were read, the share, and how many were
        not (no retrieval) or were read without a caller or a context (from the metrics)."""
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for family in self._runtime.registry.collect():
            for sample in family.samples:
                column = _SCOPE_COLUMNS.get((sample.name, sample.labels.get("missing", "")))
                if column is not None and "scope" in sample.labels:
                    counts[sample.labels["scope"]][column] += sample.value

        def share(row: Counter[str]) -> float:
            total = row["read"] + row["no retrieval"]
            return row["read"] / total if total else 1.0

        ordered = sorted(counts.items(), key=lambda item: (share(item[1]), -item[1]["read"], item[0]))
        rows = []
        for scope, row in ordered[:SCOPE_ROWS]:
            unread = int(row["no retrieval"])
            rows.append((_e(scope), _e(int(row["read"] + unread)), _e(int(row["read"])), f"{share(row):.0%}",
                         f'<span class="bad">{unread}</span>' if unread else "0", _e(int(row["no caller"])),
                         _e(int(row["no context"]))))
        unread_link = '<a href="/api/v1/unread">/api/v1/unread</a>'
        return ("<h2>OTLP traces read, per instrumentation scope</h2>"
                + _table(("scope", "traces", "read", "share read", "no retrieval", "read without caller",
                          "read without context"), rows, numeric=range(1, 7))
                + f'<p class="muted">what each lacked: {unread_link} or <code>ragmon otlp unread</code></p>'
                + _part(len(rows), len(counts), ', the least read first; all of them in <a href="/metrics">/metrics'
                        '</a>'))

    def _signals(self, samples: Sequence[Any]) -> str:
        wanted = {metric for _, metric, _ in SIGNAL_COLUMNS}
        counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for sample in samples:
            if "tenant" not in sample.labels:
                continue
            key = (sample.labels["tenant"], sample.labels.get("index", ""))
            if sample.name in JUDGED_COUNTERS and sample.labels.get("stage") == "context":
                counts[key][f"{JUDGED_COUNTERS[sample.name]} {sample.labels['check']}"] += sample.value
                continue
            if sample.name not in wanted:
                continue
            for column, metric, match in SIGNAL_COLUMNS:
                if metric == sample.name and all(sample.labels.get(k) == v for k, v in match.items()):
                    counts[key][column] += sample.value
        # the pairs with leaks first, then stale passages served, then the busiest
        ordered = sorted(counts.items(), key=lambda item: (-item[1]["leaks (context)"], -item[1]["stale served"],
                                                           -item[1]["answers"], item[0]))
        rows = []
        for (tenant, index), row in ordered[:SIGNAL_ROWS]:
            cells = []
            for column, _, _ in SIGNAL_COLUMNS:
                value = int(row[column])
                bad = value and column in ("leaks (context)", "stale served")
                cell = f'<span class="bad">{value}</span>' if bad else str(value)
                check = JUDGED_BY.get(column)
                cells.append(cell if check is None else cell + _judged(value, row[f"judged {check}"],
                                                                       row[f"unjudged {check}"]))
            rows.append((_e(tenant), _e(index), *cells))
        headers = ("tenant", "index", *(column for column, _, _ in SIGNAL_COLUMNS))
        return ("<h2>signals per tenant and index</h2>" + _table(headers, rows, numeric=range(2, len(headers)))
                + _part(len(rows), len(counts), ', those with the most leaks first; all of them in '
                        '<a href="/metrics">/metrics</a>'))

    def _alerts(self) -> str:
        dispatcher = self._runtime.alerts
        if dispatcher is None:
            return ('<h2>alerts</h2><p class="muted">no direct push configured (alerts.alertmanager_url, '
                    "alerts.webhook_url): Prometheus raises them from the rules</p>")
        firing = sorted((a for a in dispatcher.book.alerts() if not a.resolved), key=lambda a: -a.starts_at)
        rows = [(_e(a.name), _e(", ".join(f"{k}={v}" for k, v in a.labels)), _e(a.count),
                 " ".join(_trace_link(t) for t in a.trace_ids), _e(_when(a.starts_at))) for a in firing[:ALERT_ROWS]]
        return ("<h2>alerts firing (pushed)</h2>"
                + _table(("alert", "labels", "count", "traces", "since"), rows, numeric=(2,))
                + _part(len(rows), len(firing), ", the newest first"))

    def _findings(self) -> str:
        rows = self._runtime.findings.find(FindingQuery(limit=LATEST_FINDINGS))
        total, capped = self._total(rows, LATEST_FINDINGS)
        return (f"<h2>latest findings</h2>{_findings_table(rows, with_trace=True)}"
                + _part(len(rows), total, ', all of them: <a href="/api/v1/findings">/api/v1/findings</a>', capped))

    def _samples(self) -> str:
        store = self._runtime.samples
        statuses = store.counts_by_status()
        weeks = store.latest_weeks(1)
        strata: Counter[str] = Counter()
        if weeks:  # counted in the database: a sample's payload is never read here
            for tally in store.tallies(week=weeks[0], status="queued", per_tenant=False):
                for stratum in tally.strata:
                    strata[stratum] += tally.samples
        return ("<h2>labeling queue</h2><p>" + _e(", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
                                                  or "empty") + "</p>"
                + (f"<p>queued in {_e(weeks[0])}, by stratum:</p>" if weeks else "")
                + _table(("stratum", "samples"), ((_e(s), _e(n)) for s, n in strata.most_common()), numeric=(1,)))

    def _catalog(self, now: float, samples: Sequence[Any]) -> str:
        """Per index: staleness from the catalog, and the share of its served passages each check
        judged over the trailing window. An index with traffic and no index event is listed too:
        its staleness is unknown, not zero."""
        show = self._shown
        health = {show(index): h for index, h in self._runtime.catalog.health(now).items()}
        coverage: dict[str, dict[str, float]] = defaultdict(dict)
        for sample in samples:
            if sample.name == COVERAGE:
                coverage[sample.labels["index"]][sample.labels["check"]] = sample.value

        def order(index: str) -> tuple:  # the blind first, then the stalest
            blind = min(coverage.get(index, {}).values(), default=1.0) < BLIND_BELOW
            return (not blind, -(health[index].max_staleness_seconds if index in health else 0.0), index)

        indexes = sorted(health.keys() | coverage.keys(), key=order)
        rows = []
        for index in indexes[:CATALOG_ROWS]:
            h, judged = health.get(index), coverage.get(index, {})
            known = (_e(h.stale_documents), _e(f"{h.max_staleness_seconds / 3600:.1f}"), _e(h.embedding_models),
                     _e(", ".join(show(doc_id) for doc_id in h.stalest))) if h is not None else (
                '<span class="bad">unknown: no index event</span>', "–", "–", "")
            rows.append((_e(index), *known, *(_share(judged.get(check)) for check in ("access", "freshness"))))
        headers = ("index", "stale documents", "max staleness (h)", "embedding models", "stalest",
                   "access judged", "freshness judged")
        return ("<h2>catalog</h2>" + f"<p>{_e(len(self._runtime.catalog.documents))} documents</p>"
                + _table(headers, rows, numeric=(1, 2, 3, 5, 6))
                + _part(len(rows), len(indexes), ', the blind and the stalest first; all of them in '
                        '<a href="/metrics">/metrics</a>'))

    def _reconciliation(self) -> str:
        """Per tenant and index, what the index serves against its source (revocations pending
        first), the entries not judged beside each count, and the oldest documents named."""
        from ragmon.monitor.app.reconcile_view import drift_findings, drift_rows

        reconciler = self._runtime.reconciler
        if reconciler is None:
            return ""
        result = reconciler.current()
        redactor = self._runtime.redactor
        rows = drift_rows(result, self._shown)
        cells = []
        for row in rows[:CATALOG_ROWS]:
            counts = [_drift_cell(row.documents[kind], row.oldest_seconds[kind], kind in BAD_DRIFT)
                      for kind in DRIFT_KINDS]
            unjudged = ", ".join(f"{reason} {n}" for reason, n in row.not_judged.items() if n)
            cells.append((_e(row.tenant), _e(row.index), _e(row.entries), *counts,
                          f'<span class="bad">{_e(unjudged)}</span>' if unjudged else "0"))
        findings = sorted(drift_findings(result, self._shown, redactor.principal),
                          key=lambda f: (f.kind != "acl_narrower", -f.age_seconds))  # revocations pending first
        named = [(_e(f.tenant), _e(f.index), _e(f.kind), _e(f.doc_id), _e(f"{f.age_seconds / 3600:.1f}"), _e(f.rule))
                 for f in findings[:LATEST_FINDINGS]]
        headers = ("tenant", "index", "entries", "stale (oldest h)", "deleted (oldest h)",
                   "revocations pending (oldest h)", "ACL wider (oldest h)", "not judged")
        if not rows:  # nothing held is nothing judged: never an empty table that reads as level
            return ("<h2>reconciliation: what the indexes serve against their sources</h2>"
                    '<p class="bad">no index entries in the catalog: nothing is reconciled (configure a source '
                    "of index entries, docs/catalog.md, or send index events)</p>")
        return ("<h2>reconciliation: what the indexes serve against their sources</h2>"
                + _table(headers, cells, numeric=(2, 3, 4, 5, 6))
                + _part(len(cells), len(rows), "; all of them: ragmon catalog reconcile")
                + _table(("tenant", "index", "kind", "document", "age (h)", "rule"), named)
                + _part(len(named), len(findings), "; all of them: ragmon catalog reconcile"))


DRIFT_KINDS = ("stale", "deleted", "acl_narrower", "acl_wider")
BAD_DRIFT = ("deleted", "acl_narrower")  # a document served that should not be, to someone or to anyone


def _drift_cell(documents: int, oldest_seconds: float, bad: bool) -> str:
    if not documents:
        return "0"
    text = _e(f"{documents} ({oldest_seconds / 3600:.1f})")
    return f'<span class="bad">{text}</span>' if bad else text


JUDGED_COUNTERS = {"ragmon_passages_judged_total": "judged", "ragmon_passages_unjudged_total": "unjudged"}


def _judged(value: int, judged: float, unjudged: float) -> str:
    """What is shown beside a count: the share of the passages (in the context) its check judged;
    a zero judged from less than :data:`BLIND_BELOW` of them is marked blind."""
    total = judged + unjudged
    if not total:
        return ' <span class="muted">(no passage)</span>'
    share = judged / total
    if not value and share < BLIND_BELOW:
        return f' <span class="bad">(blind: {share:.0%} judged)</span>'
    return f' <span class="muted">({share:.0%} judged)</span>'


def _share(ratio: float | None) -> str:
    """A coverage gauge's value as a cell: blind below :data:`BLIND_BELOW`; – without traffic."""
    if ratio is None:
        return '<span class="muted">–</span>'
    return f'<span class="bad">{ratio:.0%}</span>' if ratio < BLIND_BELOW else f"{ratio:.0%}"


def _findings_table(rows: Sequence[FindingRow], with_trace: bool) -> str:
    cells = []
    for row in rows:
        documents = ", ".join(doc + (f"@{version}" if version else "") for doc, version in row.documents)
        trace = [_trace_link(row.trace_id)] if with_trace else []
        cells.append((_e(_when(row.time)), *trace, _e(row.tenant), _e(row.index_name), _e(row.signal),
                      _e(row.stage or ""), _e(documents), _e(row.reason)))
    headers = ("time", *(["trace"] if with_trace else []), "tenant", "index", "signal", "stage", "documents",
               "reason")
    return _table(headers, cells)
