"""The state of the alerts ragmon pushes itself (leaks at context, index staleness): which fire,
since when, with what evidence, and which resolved but are not yet delivered as resolved.

Pure and clock-driven: the pipeline records leaks (``leak``), a periodic check records staleness
(``staleness``), and the dispatcher asks what exists (``alerts``) and forgets what every notifier
has seen resolved (``forget``). An alert is identified by its fingerprint: its name and labels,
so the same leak in the same tenant and index is one alert however often it recurs.

Every id a sender chose (tenant, index, trace and document ids, the probe's tenant) is recorded by
its shown id (the callable ``shown``, ``Redactor.shown_id`` where ragmon is wired): labels,
evidence, summary and links name it as the findings, the status page and the metric labels do,
and never hold an e-mail address or a key the raw id held.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ragmon.alerts.rules import CRITICAL, INDEX_STALE, LEAK_CONTEXT, PROBE_LEAK, WARNING, alert_rules
from ragmon.monitor.config.alerting import AlertsConfig

MAX_IDS = 10  # trace ids and document ids carried by an alert

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushedAlert:
    """One alert as notifiers send it. ``labels`` identify it; ``evidence`` is what may be shown
    about it: counts, up to 10 trace and document ids. Never query text, passage text or a caller id;
    every id a sender chose, by its shown id."""

    name: str
    labels: tuple[tuple[str, str], ...]  # sorted (key, value), severity included
    summary: str
    description: str
    runbook_url: str
    dashboard_url: str | None
    starts_at: float
    ends_at: float | None = None  # set when resolved
    updated_at: float = 0.0
    count: int = 0
    trace_ids: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    figures: tuple[tuple[str, str], ...] = ()  # further numbers, e.g. staleness in seconds
    links: tuple[tuple[str, str], ...] = ()  # where its findings are: the read API query, the command

    @property
    def fingerprint(self) -> str:
        text = "\0".join([self.name, *(f"{k}={v}" for k, v in self.labels)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def resolved(self) -> bool:
        return self.ends_at is not None

    @property
    def label_map(self) -> dict[str, str]:
        return {"alertname": self.name, **dict(self.labels)}


@dataclass
class AlertBook:
    """Thread-safe. Holds at most ``config.max_active`` alerts; what does not fit is counted in
    ``dropped`` (the Prometheus rules still see it). ``shown`` maps each id a sender chose to what
    alerts show of it (``Redactor.shown_id``); the book applies it once, to what it is given raw."""

    config: AlertsConfig
    shown: Callable[[str], str]
    dropped: int = 0
    _alerts: dict[str, PushedAlert] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._text = {(r.name, r.severity): r for r in alert_rules(self.config)}
        self._deployment = tuple(self.config.push_labels.items())

    def _labels(self, *own: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        """An alert's own labels with ``alerts.push_labels`` (namespace, job, ...), sorted: the
        rules' alerts carry the deployment's labels, and Alertmanager merges only equal label sets."""
        return tuple(sorted((*own, *self._deployment)))

    def leak(self, tenant: str, index: str, passages: int, trace_id: str, doc_ids: list[str], now: float) -> bool:
        """Record ``passages`` leaked into the context of trace ``trace_id``; True when this starts
        a new alert (or restarts a resolved one), which a dispatcher sends at once."""
        tenant, index, trace_id = self.shown(tenant), self.shown(index), self.shown(trace_id)
        labels = self._labels(("index", index), ("severity", CRITICAL), ("tenant", tenant))
        with self._lock:
            current = self._get(LEAK_CONTEXT, labels)
            fresh = current is None or current.resolved
            if fresh:
                current = self._new(LEAK_CONTEXT, CRITICAL, labels, now, {"tenant": tenant, "index": index})
                if current is None:
                    return False
            self._put(replace(current, updated_at=now, count=current.count + passages,
                              trace_ids=_bounded(current.trace_ids, [trace_id]),
                              # lazily: once 10 ids are held, no more is looked at
                              doc_ids=_bounded(current.doc_ids, map(self.shown, doc_ids))))
            return fresh

    def staleness(self, indexes: Mapping[str, tuple[float, int, list[str]]], now: float) -> bool:
        """Record each index's (max staleness seconds, stale documents, some stale document ids):
        a crossing of the warning or critical threshold starts an alert, falling back under it
        resolves the alert. True when something started or resolved."""
        changed = False
        thresholds = ((WARNING, self.config.stale_warning_hours * 3600),
                      (CRITICAL, self.config.stale_critical_hours * 3600))
        scanned = {self.shown(index): (seconds, stale, [self.shown(d) for d in doc_ids[:MAX_IDS]])
                   for index, (seconds, stale, doc_ids) in indexes.items()}
        with self._lock:
            for index, (seconds, stale, doc_ids) in scanned.items():
                for severity, limit in thresholds:
                    labels = self._labels(("index", index), ("severity", severity))
                    current = self._get(INDEX_STALE, labels)
                    firing = current is not None and not current.resolved
                    if seconds > limit:
                        if not firing:
                            current = self._new(INDEX_STALE, severity, labels, now, {"index": index})
                            if current is None:
                                continue
                            changed = True
                        self._put(replace(current, updated_at=now, count=stale, doc_ids=tuple(doc_ids),
                                          figures=(("max_staleness_seconds", f"{seconds:.0f}"),)))
                    elif firing:
                        self._put(replace(current, ends_at=now, updated_at=now))
                        changed = True
            for current in list(self._alerts.values()):  # an index gone from the catalog is no longer stale
                gone = dict(current.labels).get("index") not in scanned
                if current.name == INDEX_STALE and not current.resolved and gone:
                    self._put(replace(current, ends_at=now, updated_at=now))
                    changed = True
        return changed

    def probe(self, name: str, tenant: str, leaked: list[str], now: float) -> bool:
        """Record a probe run: documents it may not read (``leaked``) fire the probe's leak
        alert; a clean run resolves it. True when something started or resolved. The labels are
        the rule's (probe, severity, and the deployment's ``push_labels``), so Alertmanager merges
        the two; the tenant is evidence. The probe's name is the operator's, shown as it is."""
        labels = self._labels(("probe", name), ("severity", CRITICAL))
        tenant, shown_leaked = self.shown(tenant), tuple(self.shown(doc_id) for doc_id in leaked[:MAX_IDS])
        with self._lock:
            current = self._get(PROBE_LEAK, labels)
            firing = current is not None and not current.resolved
            if leaked:
                if not firing:
                    current = self._new(PROBE_LEAK, CRITICAL, labels, now, {"probe": name})
                    if current is None:
                        return False
                self._put(replace(current, updated_at=now, count=len(leaked), doc_ids=shown_leaked,
                                  figures=(("tenant", tenant),)))
                return not firing
            if firing:
                self._put(replace(current, ends_at=now, updated_at=now))
                return True
            return False

    def expire(self, now: float) -> None:
        """Resolve leak alerts quiet for ``leak_resolve_minutes``. The dispatcher calls it at the
        start of each delivery pass, which delivers what it resolves, so it reports nothing."""
        quiet = self.config.leak_resolve_minutes * 60
        with self._lock:
            for current in list(self._alerts.values()):
                if current.name == LEAK_CONTEXT and not current.resolved and now - current.updated_at >= quiet:
                    self._put(replace(current, ends_at=now))

    def resolve_scanned(self, now: float) -> bool:
        """Resolve the alerts only the scheduler's scans keep up to date (staleness, probe leaks):
        a process that stops running the scheduler can no longer resolve them, and must not keep
        re-sending them. The new scheduler raises them again if they still hold."""
        changed = False
        with self._lock:
            for current in list(self._alerts.values()):
                if current.name in (INDEX_STALE, PROBE_LEAK) and not current.resolved:
                    self._put(replace(current, ends_at=now, updated_at=now))
                    changed = True
        return changed

    def alerts(self) -> list[PushedAlert]:
        """Every alert held: firing ones and resolved ones not forgotten yet."""
        with self._lock:
            return list(self._alerts.values())

    def forget(self, fingerprint: str, version: float) -> None:
        """Drop a resolved alert whose resolution every notifier delivered (if it did not change since)."""
        with self._lock:
            current = self._alerts.get(fingerprint)
            if current is not None and current.resolved and current.updated_at <= version:
                del self._alerts[fingerprint]

    def _get(self, name: str, labels) -> PushedAlert | None:
        probe = PushedAlert(name, labels, "", "", "", None, 0.0)
        return self._alerts.get(probe.fingerprint)

    def _put(self, alert: PushedAlert) -> None:
        self._alerts[alert.fingerprint] = alert

    def _new(self, name: str, severity: str, labels, now: float, values: dict[str, str]) -> PushedAlert | None:
        firing = sum(1 for a in self._alerts.values() if not a.resolved)
        if firing >= self.config.max_active:
            self.dropped += 1
            log.warning("alert %s not pushed: %d alerts already firing (alerts.max_active); %d dropped so far",
                        name, firing, self.dropped)
            return None
        rule = self._text[(name, severity)]
        return PushedAlert(name, labels, _fill(rule.summary, values), rule.description, rule.runbook(self.config),
                           self.config.dashboard_url, starts_at=now, updated_at=now,
                           links=tuple(rule.finding_links_for(values).items()))


def _fill(template: str, values: dict[str, str]) -> str:
    """A summary's ``{{ $labels.x }}`` placeholders filled as Prometheus fills them: plain text."""
    for key, value in values.items():
        template = template.replace("{{ $labels." + key + " }}", value)
    return template


def _bounded(known: tuple[str, ...], new: Iterable[str]) -> tuple[str, ...]:
    """The first ``MAX_IDS`` distinct ids: the earliest evidence is kept."""
    out = list(known)
    for item in new:
        if len(out) >= MAX_IDS:
            break
        if item not in out:
            out.append(item)
    return tuple(out)
