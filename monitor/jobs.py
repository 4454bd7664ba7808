"""The periodic jobs of SPEC §6 as plain methods with the clock passed in, so tests drive them
without waiting: weekly pull, staleness scan, canary probes, retention. ``monitor.scheduler``
runs them on APScheduler; ``ragmon probe run`` runs the probes once.

Every run is logged with its outcome and counted (``ragmon_job_runs_total``); a successful one
sets ``ragmon_job_last_success_timestamp_seconds``. A failing job is logged and counted and does
not stop the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.probes import ProbeResult, Retrieve, run_probes

log = logging.getLogger(__name__)

WEEKLY_PULL, STALENESS_SCAN, CANARY_PROBES, RETENTION = "weekly-pull", "staleness-scan", "canary-probes", "retention"
JOB_IDS = (WEEKLY_PULL, STALENESS_SCAN, CANARY_PROBES, RETENTION)

Push = Callable[[str, list], int]  # (week, batch) -> cases sent to Label Studio


@dataclass
class Jobs:
    """What the jobs work on; ``runtime`` is a :class:`monitor.wiring.Runtime`."""

    runtime: object
    clock: Callable[[], float] = time.time
    retrieve: Retrieve | None = None
    push: Push | None = None
    reload_catalog: Callable[[], None] | None = None  # a scheduler process of its own reads the catalog table

    def run(self, job_id: str) -> bool:
        """Run one job by id, logging and counting the outcome; True when it succeeded."""
        job = {WEEKLY_PULL: self.weekly_pull, STALENESS_SCAN: self.staleness_scan,
               CANARY_PROBES: self.canary_probes, RETENTION: self.retention}[job_id]
        metrics = self.runtime.metrics
        started = time.monotonic()
        try:
            outcome = job()
        except Exception as error:
            metrics.job_runs.labels(job_id, "failed").inc()
            log.error("job %s failed after %.1f s: %s: %s", job_id, time.monotonic() - started,
                      type(error).__name__, error)
            return False
        metrics.job_runs.labels(job_id, "ok").inc()
        metrics.job_last_success.labels(job_id).set(self.clock())
        log.info("job %s done in %.1f s: %s", job_id, time.monotonic() - started, outcome)
        return True

    # -- the jobs (each returns a short summary for the log) -------------------------------------

    def weekly_pull(self) -> str:
        """The batch of the week before, written under ``scheduler.batch_dir/WEEK/`` (and pushed to
        Label Studio when configured); pulled samples become exported."""
        from exporters.labeling import write_batch

        settings = self.runtime.settings
        week = previous_week_of(self.clock(), settings.sampling.time_zone)
        store = self.runtime.samples
        batch = store.batch(week)
        write_batch(batch, Path(settings.scheduler.batch_dir) / week)
        pushed = self.push(week, batch) if self.push is not None and batch else 0
        exported = store.mark_exported([s.trace_id for s in batch])
        return f"{week}: {len(batch)} cases, {exported} newly exported, {pushed} pushed to Label Studio"

    def staleness_scan(self) -> str:
        """Index staleness into the pushed alerts (raised and resolved); the gauges are computed
        from the same catalog at scrape time."""
        if self.reload_catalog is not None:
            self.reload_catalog()
        now = self.clock()
        from alerts.dispatch import staleness_of

        health = staleness_of(self.runtime.catalog, now)
        if self.runtime.alerts is not None:
            self.runtime.alerts.scan_staleness(health, now)
        stale = {index: figures for index, figures in health.items() if figures[1]}
        return f"{len(health)} indexes, {len(stale)} with stale documents"

    def canary_probes(self) -> str:
        results = self.probe_once()
        failed = [r for r in results if not r.ok]
        return f"{len(results)} probes, {len(failed)} failed" + (
            f" ({', '.join(f'{r.name}: {r.verdict}' for r in failed)})" if failed else "")

    def probe_once(self) -> list[ProbeResult]:
        """Run every configured probe once: metrics, alerts, and the results."""
        probes = self.runtime.settings.probes.probes
        if not probes or self.retrieve is None:
            return []
        results = run_probes(probes, self.retrieve)
        record_probes(self.runtime, results, self.clock())
        return results

    def retention(self) -> str:
        """Delete unlabeled samples and dead letters older than their retention."""
        config = self.runtime.settings.scheduler
        now = self.clock()
        samples = self.runtime.samples.delete_unlabeled_before(now - config.sample_retention_days * 86400)
        prune = getattr(self.runtime.dead_letters, "prune", None)
        letters = prune(now - config.dead_letter_retention_days * 86400) if prune is not None else 0
        deleted = self.runtime.metrics.retention_deleted
        deleted.labels("samples").inc(samples)
        deleted.labels("dead_letters").inc(letters)
        return f"{samples} unlabeled samples and {letters} dead letters deleted"


def record_probes(runtime, results: Sequence[ProbeResult], now: float) -> None:
    """Probe results into the metrics and the pushed alerts; one log line per failure, naming the
    probe and what went wrong (document ids at most, never the query)."""
    metrics = runtime.metrics
    for result in results:
        if not result.ok:
            metrics.probe_failures.labels(result.name).inc()
            log.warning("probe %s: %s%s", result.name, result.verdict,
                        f" ({result.error})" if result.error else
                        f" ({len(result.leaked)} documents it must not see)" if result.leaked else
                        f" (nothing matched {', '.join(result.missing)})")
        if result.verdict == "leak":
            metrics.probe_leaks.labels(result.name).inc()
        # an error proves nothing either way: the probe's alert stays as it was
        changed = runtime.alerts is not None and result.verdict != "error" and runtime.alerts.book.probe(
            result.name, result.tenant, result.leaked, now)
        if changed:
            runtime.alerts.wake()


def previous_week_of(now: float, zone: str) -> str:
    """The ISO week before the one holding ``now`` in ``zone``: the weekly pull's week. ``zone``
    is ``sampling.time_zone``, the zone samples are filed under weeks of, so the pull never takes
    a week the sampler is still filling."""
    year, week, _ = (datetime.fromtimestamp(now, ZoneInfo(zone)).date() - timedelta(days=7)).isocalendar()
    return f"{year:04d}-W{week:02d}"
