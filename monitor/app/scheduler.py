"""The periodic jobs on APScheduler 3, run by exactly one process.

:func:`build_scheduler` names every job with an explicit id (added with ``replace_existing``),
coalesces missed runs into one, runs a run missed by less than ``misfire_grace_seconds`` late, and
never overlaps a job with itself. Cron times are in ``scheduler.time_zone``; the weekly day is a
day name because APScheduler 3 numbers weekdays from Monday = 0, unlike cron.

:class:`SchedulerRunner` waits for the scheduler lock (``ragmon.monitor.app.leader``), runs the scheduler
while it holds it, and stops the jobs the moment the lock is lost; a standby takes over within
``lock_poll_seconds`` of the holder's death.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragmon.monitor.app.jobs import (
    CANARY_PROBES,
    CATALOG_SYNC,
    RETENTION,
    STALENESS_SCAN,
    WEEKLY_PULL,
    Jobs,
    catalog_sync_job,
)
from ragmon.monitor.app.leader import LeaderLock
from ragmon.monitor.config.scheduling import SchedulerConfig

log = logging.getLogger(__name__)


def triggers(config: SchedulerConfig, probes: bool,
             catalog_sources: dict[str, float] | None = None) -> dict[str, object]:
    """Each job's trigger; the probes only when some are configured; a sync per catalog source
    (``catalog_sources``: name -> interval in seconds), every interval from the start."""
    pull_hour, pull_minute = (int(part) for part in config.weekly_pull_time.split(":"))
    keep_hour, keep_minute = (int(part) for part in config.retention_time.split(":"))
    out: dict[str, object] = {
        WEEKLY_PULL: CronTrigger(day_of_week=config.weekly_pull_day, hour=pull_hour, minute=pull_minute,
                                 timezone=config.time_zone),
        STALENESS_SCAN: IntervalTrigger(seconds=config.staleness_interval_seconds, timezone=config.time_zone),
        RETENTION: CronTrigger(hour=keep_hour, minute=keep_minute, timezone=config.time_zone),
    }
    if probes:
        out[CANARY_PROBES] = IntervalTrigger(seconds=config.probe_interval_seconds, timezone=config.time_zone)
    for source, seconds in (catalog_sources or {}).items():
        out[catalog_sync_job(source)] = IntervalTrigger(seconds=seconds, timezone=config.time_zone)
    return out


def build_scheduler(config: SchedulerConfig, jobs: Jobs, probes: bool) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(
        timezone=config.time_zone,
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": config.misfire_grace_seconds})
    sources = jobs.catalog_sync.intervals() if jobs.catalog_sync is not None else {}
    for job_id, trigger in triggers(config, probes, sources).items():
        # a catalog source is synced at once: what serve judges against should not wait an interval
        first = {"next_run_time": datetime.now(UTC)} if job_id.startswith(CATALOG_SYNC) else {}
        scheduler.add_job(jobs.run, trigger, args=[job_id], id=job_id, name=job_id, replace_existing=True, **first)
    return scheduler


class SchedulerRunner:
    """Holds the lock and the scheduler together. ``start`` returns at once; the runner thread
    waits for the lock, runs the jobs while it holds it, and waits again if it loses it."""

    def __init__(self, config: SchedulerConfig, jobs: Jobs, lock: LeaderLock, probes: bool,
                 on_leader: Callable[[bool], None] = lambda leading: None) -> None:
        self._config = config
        self._jobs = jobs
        self._lock = lock
        self._probes = probes
        self._on_leader = on_leader
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leading = threading.Event()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ragmon-scheduler", daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        waiting_logged = False
        next_reload = 0.0
        while not self._stop.is_set():
            try:
                if not self._lock.try_acquire():
                    if not waiting_logged:
                        log.info("scheduler standing by: another process holds the scheduler lock")
                        waiting_logged = True
                    # a standby's catalog gauges must not age: re-read the catalog as the leader does
                    if self._jobs.reload_catalog is not None and time.monotonic() >= next_reload:
                        next_reload = time.monotonic() + self._config.staleness_interval_seconds
                        self._jobs.reload_catalog()
                    self._stop.wait(self._config.lock_poll_seconds)
                    continue
                waiting_logged = False
                self._lead()
            except Exception:  # never let the scheduler thread die quietly: log, back off, try again
                log.exception("scheduler error; retrying in %.0f s", self._config.lock_poll_seconds)
                self._stop.wait(self._config.lock_poll_seconds)

    def _lead(self) -> None:
        scheduler = build_scheduler(self._config, self._jobs, self._probes)
        scheduler.start()
        self.leading.set()
        self._on_leader(True)
        log.info("scheduler running: jobs %s", ", ".join(job.id for job in scheduler.get_jobs()))
        try:
            while not self._stop.wait(self._config.lock_poll_seconds):
                if not self._lock.still_held():
                    log.error("scheduler lock lost (database connection gone): jobs stopped until it is retaken")
                    break
        finally:
            scheduler.shutdown(wait=True)
            self.leading.clear()
            self._on_leader(False)
            if self._stop.is_set():
                self._lock.release()
