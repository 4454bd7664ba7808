"""The periodic jobs of docs/scheduler.md as plain methods with the clock passed in, so tests drive them
without waiting: weekly pull, staleness scan, canary probes, retention, and a sync per catalog source
(``catalog-sync:NAME``, docs/catalog.md). ``ragmon.monitor.app.scheduler``
runs them on APScheduler; ``ragmon probe run`` runs the probes once.

Every run is logged with its outcome and counted (``ragmon_job_runs_total``); a successful one
sets ``ragmon_job_last_success_timestamp_seconds``. A failing job is logged and counted and does
not stop the scheduler. With ragmon's own tracing on, every run is also a span (``ragmon.job``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragmon.alerts.dispatch import AlertDispatcher, staleness_of
from ragmon.exporters.instruments import Metrics
from ragmon.monitor.app.catalog_sync import CatalogSync
from ragmon.monitor.app.probes import ProbeResult, Retrieve, run_probes
from ragmon.monitor.config.scheduling import ProbeConfig, SchedulerConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.labeling.weekly import pull_week
from ragmon.monitor.labeling.weeks import previous_week_of

if TYPE_CHECKING:  # the OpenTelemetry SDK is imported only when tracing is on
    from ragmon.monitor.app.telemetry import JobTracer

log = logging.getLogger(__name__)

WEEKLY_PULL, STALENESS_SCAN, CANARY_PROBES, RETENTION = "weekly-pull", "staleness-scan", "canary-probes", "retention"
JOB_IDS = (WEEKLY_PULL, STALENESS_SCAN, CANARY_PROBES, RETENTION)
CATALOG_SYNC = "catalog-sync:"  # + a source's name: one job per scheduled catalog source


def catalog_sync_job(source: str) -> str:
    """The id (and ``scheduled_job`` label) of the job that syncs the catalog source ``source``."""
    return CATALOG_SYNC + source

Push = Callable[[Sequence], int]  # the batch -> cases sent to Label Studio


@dataclass
class Jobs:
    """The jobs and exactly what they work on; :func:`ragmon.monitor.app.wiring.build_jobs` builds it."""

    config: SchedulerConfig
    time_zone: str  # sampling.time_zone: the zone samples are filed under weeks of
    probes: list[ProbeConfig]
    samples: SampleStore
    catalog: Catalog
    metrics: Metrics
    alerts: AlertDispatcher | None = None  # the direct push, when a target is configured
    prune_dead_letters: Callable[[float], int] | None = None  # (before) -> deleted, where letters are a file
    clock: Callable[[], float] = time.time
    retrieve: Retrieve | None = None
    push: Push | None = None  # the weekly batch into Label Studio, when configured
    reload_catalog: Callable[[], None] | None = None  # a scheduler process of its own reads the catalog table
    tracer: JobTracer | None = None  # a span per run, when ragmon traces itself
    prune_findings: Callable[[float], int] | None = None  # (before) -> deleted findings
    findings_retention_days: float = 14.0
    catalog_sync: CatalogSync | None = None  # the catalog sources, when some are configured
    prune_unread: Callable[[float], int] | None = None  # (before) -> deleted digests of unread OTLP traces
    unread_retention_days: float = 7.0
    history_retention_days: float = 8.0  # sampling.history_retention_days: the conversation turns kept

    def run(self, job_id: str) -> bool:
        """Run one job by id, logging and counting the outcome; True when it succeeded."""
        if job_id.startswith(CATALOG_SYNC):
            source = job_id[len(CATALOG_SYNC):]
            job = functools.partial(self.sync_catalog_source, source)
        else:
            job = {WEEKLY_PULL: self.weekly_pull, STALENESS_SCAN: self.staleness_scan,
                   CANARY_PROBES: self.canary_probes, RETENTION: self.retention}[job_id]
        started = time.monotonic()
        span = self.tracer.begin(job_id) if self.tracer is not None else None
        try:
            outcome = job()
        except Exception as error:
            self.metrics.job_runs.labels(job_id, "failed").inc()
            log.error("job %s failed after %.1f s: %s: %s", job_id, time.monotonic() - started,
                      type(error).__name__, error)
            if span is not None:
                self.tracer.end(span, error)
            return False
        if span is not None:
            self.tracer.end(span)
        self.metrics.job_runs.labels(job_id, "ok").inc()
        self.metrics.job_last_success.labels(job_id).set(self.clock())
        log.info("job %s done in %.1f s: %s", job_id, time.monotonic() - started, outcome)
        return True

    # -- the jobs (each returns a short summary for the log) -------------------------------------

    def weekly_pull(self) -> str:
        """The batch of the week before, written under ``scheduler.batch_dir/WEEK/`` (and pushed to
        Label Studio when configured); pulled samples become exported."""
        week = previous_week_of(self.clock(), self.time_zone)
        pulled = pull_week(self.samples, week, directory=Path(self.config.batch_dir) / week, push=self.push)
        return (f"{week}: {pulled.cases} cases, {pulled.exported} newly exported, "
                f"{pulled.pushed} pushed to Label Studio")

    def staleness_scan(self) -> str:
        """Index staleness into the pushed alerts (raised and resolved); the gauges are computed
        from the same catalog at scrape time."""
        if self.reload_catalog is not None:
            self.reload_catalog()
        now = self.clock()
        health = staleness_of(self.catalog, now)
        if self.alerts is not None:
            self.alerts.scan_staleness(health, now)
        stale = {index: figures for index, figures in health.items() if figures[1]}
        return f"{len(health)} indexes, {len(stale)} with stale documents"

    def sync_catalog_source(self, source: str) -> str:
        """One sync of a catalog source (counted by the sync itself); a sync that fails or is held
        fails the job. A scheduler process of its own first reads the catalog table, so that the
        sync brings up to date what the table holds."""
        assert self.catalog_sync is not None
        if self.reload_catalog is not None:
            self.reload_catalog()
        report = self.catalog_sync.sync(source)
        if report.outcome != "ok":
            raise RuntimeError(f"{report.outcome}: {report.error}")
        changes = sum(report.changes.values())
        return f"{report.items} items, {changes} changes, {sum(report.refused.values())} refused"

    def canary_probes(self) -> str:
        results = self.probe_once()
        failed = [r for r in results if not r.ok]
        return f"{len(results)} probes, {len(failed)} failed" + (
            f" ({', '.join(f'{r.name}: {r.verdict}' for r in failed)})" if failed else "")

    def probe_once(self) -> list[ProbeResult]:
        """Run every configured probe once: metrics, alerts, and the results."""
        if not self.probes or self.retrieve is None:
            return []
        results = run_probes(self.probes, self.retrieve)
        self._record_probes(results, self.clock())
        return results

    def retention(self) -> str:
        """Delete unlabeled samples, the conversation turns kept for their histories, dead letters,
        findings and digests of unread OTLP traces older than their retention."""
        now = self.clock()
        samples = self.samples.delete_unlabeled_before(now - self.config.sample_retention_days * 86400)
        turns = self.samples.delete_turns_before(now - self.history_retention_days * 86400)
        letters = (self.prune_dead_letters(now - self.config.dead_letter_retention_days * 86400)
                   if self.prune_dead_letters is not None else 0)
        findings = (self.prune_findings(now - self.findings_retention_days * 86400)
                    if self.prune_findings is not None else 0)
        unread = (self.prune_unread(now - self.unread_retention_days * 86400)
                  if self.prune_unread is not None else 0)
        self.metrics.retention_deleted.labels("samples").inc(samples)
        self.metrics.retention_deleted.labels("dead_letters").inc(letters)
        self.metrics.retention_deleted.labels("findings").inc(findings)
        self.metrics.retention_deleted.labels("unread_traces").inc(unread)
        self.metrics.retention_deleted.labels("conversation_turns").inc(turns)
        return (f"{samples} unlabeled samples, {turns} conversation turns, {letters} dead letters, {findings} "
                f"findings and {unread} digests of unread traces deleted")

    def _record_probes(self, results: Sequence[ProbeResult], now: float) -> None:
        """Probe results into the metrics and the pushed alerts; one log line per failure, naming
        the probe and what went wrong (document ids at most, never the query)."""
        for result in results:
            if not result.ok:
                self.metrics.probe_failures.labels(result.name).inc()
                log.warning("probe %s: %s%s", result.name, result.verdict,
                            f" ({result.error})" if result.error else
                            f" ({len(result.leaked)} documents it must not see)" if result.leaked else
                            f" (nothing matched {', '.join(result.missing)})")
            if result.verdict == "leak":
                self.metrics.probe_leaks.labels(result.name).inc()
            # an error proves nothing either way: the probe's alert stays as it was
            if self.alerts is not None and result.verdict != "error":
                self.alerts.probe(result.name, result.tenant, result.leaked, now)
