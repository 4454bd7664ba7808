"""Delivery of pushed alerts, on a thread of its own so that a slow or dead notifier never holds up
ingestion: the pipeline only records into the :class:`~ragmon.alerts.state.AlertBook` and wakes the
dispatcher.

Per notifier and alert, the dispatcher remembers what was delivered. An alert is sent when it is
new, when it fired again, when it resolved, and again after the notifier's repeat interval while
it fires. A failed send keeps everything as it was and backs off (1 s doubling to 30 s); the alert
state is never lost, only delayed. A resolved alert is forgotten once every notifier has it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragmon.alerts.notifiers import Notifier, NotifyError
from ragmon.alerts.state import AlertBook, PushedAlert
from ragmon.monitor.core.retry import RetryPolicy

log = logging.getLogger(__name__)

Record = Callable[[str, str, int], None]  # (notifier, outcome "sent" | "failed", alerts)

# after a failed delivery, a notifier is tried again 1, 2, 4 ... at most 30 s later
BACKOFF = RetryPolicy(initial=1.0, maximum=30.0)


@dataclass
class _Delivered:
    starts_at: float
    resolved: bool
    sent_at: float


def staleness_of(catalog, now: float) -> dict[str, tuple[float, int, list[str]]]:
    """What :meth:`AlertDispatcher.scan_staleness` takes, from a catalog's health."""
    return {index: (h.max_staleness_seconds, h.stale_documents, h.stalest) for index, h in catalog.health(now).items()}


class AlertDispatcher:
    def __init__(self, book: AlertBook, notifiers: Sequence[Notifier], clock: Callable[[], float] = time.time,
                 record: Record | None = None, tick: float = 1.0) -> None:
        self.book = book
        self.notifiers = list(notifiers)
        self._clock = clock
        self._record = record or (lambda notifier, outcome, n: None)
        self._tick = tick
        self._delivered: dict[str, dict[str, _Delivered]] = {n.name: {} for n in self.notifiers}
        self._retry_at = {n.name: 0.0 for n in self.notifiers}
        self._backoff = {n.name: BACKOFF.delays() for n in self.notifiers}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ragmon-alerts", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Something changed: deliver now rather than at the next tick."""
        self._wake.set()

    def shutdown(self, timeout: float = 5.0) -> None:
        """One last delivery attempt, then stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("alert delivery still busy after %.0f s at shutdown; undelivered alerts are dropped",
                            timeout)
                return  # its clients stay open: closing them under a running send would only raise
        for notifier in self.notifiers:
            notifier.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._tick)
            self._wake.clear()
            try:
                self.run_once()
            except Exception:  # a bug here must not end alerting for good
                log.exception("alert dispatch failed")
        try:
            self.run_once()  # the last chance for what changed just before the stop
        except Exception:
            log.exception("alert dispatch failed at shutdown")

    # -- what the rest of ragmon reports; each records into the book and wakes delivery itself -----

    def leak(self, tenant: str, index: str, passages: int, trace_id: str, doc_ids: list[str], now: float) -> None:
        """Passages leaked into a trace's context (see :meth:`AlertBook.leak`); delivered right away."""
        self.book.leak(tenant, index, passages, trace_id, doc_ids, now)
        self.wake()

    def scan_staleness(self, indexes: Mapping[str, tuple[float, int, list[str]]], now: float) -> None:
        """The staleness scan's findings (see :meth:`AlertBook.staleness`); delivered right away."""
        if self.book.staleness(indexes, now):
            self.wake()

    def probe(self, name: str, tenant: str, leaked: list[str], now: float) -> None:
        """A probe run's verdict (see :meth:`AlertBook.probe`); delivered right away."""
        if self.book.probe(name, tenant, leaked, now):
            self.wake()

    def resolve_scanned(self, now: float) -> None:
        """This process stopped running the scheduler (see :meth:`AlertBook.resolve_scanned`)."""
        if self.book.resolve_scanned(now):
            self.wake()

    def run_once(self) -> None:
        """One pass: leak expiry, then each notifier's due alerts."""
        now = self._clock()
        self.book.expire(now)
        alerts = self.book.alerts()
        for notifier in self.notifiers:
            if now < self._retry_at[notifier.name]:
                continue
            due = [a for a in alerts if self._due(notifier, a, now)]
            if due:
                self._deliver(notifier, due, now)
        for alert in alerts:
            if alert.resolved and all(self._has_resolution(n.name, alert) for n in self.notifiers):
                self.book.forget(alert.fingerprint, alert.updated_at)
                for records in self._delivered.values():
                    records.pop(alert.fingerprint, None)

    def _due(self, notifier: Notifier, alert: PushedAlert, now: float) -> bool:
        known = self._delivered[notifier.name].get(alert.fingerprint)
        if known is None:
            return True  # resolved before it could be sent (a notifier down, say) is still news
        if known.starts_at != alert.starts_at:
            return True  # fired again
        if alert.resolved:
            return not known.resolved
        return now - known.sent_at >= notifier.repeat_seconds

    def _has_resolution(self, notifier: str, alert: PushedAlert) -> bool:
        known = self._delivered[notifier].get(alert.fingerprint)
        return known is None or (known.resolved and known.starts_at == alert.starts_at)

    def _deliver(self, notifier: Notifier, alerts: list[PushedAlert], now: float) -> None:
        try:
            notifier.send(alerts, now)
        except NotifyError as error:
            backoff = next(self._backoff[notifier.name])
            self._retry_at[notifier.name] = now + backoff
            self._record(notifier.name, "failed", len(alerts))
            log.warning("alert delivery failed (%s); %d alerts kept, retrying in %.0f s", error, len(alerts), backoff)
            return
        self._backoff[notifier.name] = BACKOFF.delays()
        self._retry_at[notifier.name] = 0.0
        self._record(notifier.name, "sent", len(alerts))
        records = self._delivered[notifier.name]
        for alert in alerts:
            records[alert.fingerprint] = _Delivered(alert.starts_at, alert.resolved, now)
        log.debug("%d alerts delivered to %s", len(alerts), notifier.name)
