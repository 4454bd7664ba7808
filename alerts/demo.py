"""The direct push as ``ragmon demo`` shows it: leak and staleness alerts printed as they fire
and resolve, on the simulator's clock, with no notifier outside the process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ragmon.alerts.dispatch import AlertDispatcher, staleness_of
from ragmon.alerts.sink import AlertSink
from ragmon.alerts.state import AlertBook, PushedAlert
from ragmon.monitor.config.alerting import AlertsConfig
from ragmon.monitor.core.catalog import Catalog


class _Collect:
    """A notifier that keeps what it is sent, for the demo's live view."""

    name = "demo"
    repeat_seconds = float("inf")

    def __init__(self) -> None:
        self.sent: list[PushedAlert] = []

    def send(self, alerts: Sequence[PushedAlert], now: float) -> None:
        self.sent.extend(alerts)

    def close(self) -> None:
        pass


class DemoAlerts:
    """Runs the dispatcher synchronously after each batch (``lines``) instead of on a thread, so
    the simulated clock drives staleness and leak resolution."""

    def __init__(self, config: AlertsConfig, clock: Callable[[], float]) -> None:
        self._notifier = _Collect()
        self._clock = clock
        # the simulator's tenants, indexes and ids are invented and hold nothing private: shown as they are
        self._dispatcher = AlertDispatcher(AlertBook(config, shown=lambda value: value), [self._notifier], clock)
        self.sink = AlertSink(self._dispatcher)
        self._catalog: Catalog | None = None

    def watch(self, catalog: Catalog) -> None:
        """Scan the catalog's index staleness too, after each batch (the scheduler's job elsewhere)."""
        self._catalog = catalog

    def lines(self, seen: int) -> list[str]:
        if self._catalog is not None:
            now = self._clock()
            self._dispatcher.scan_staleness(staleness_of(self._catalog, now), now)
        self._dispatcher.run_once()
        sent, self._notifier.sent = self._notifier.sent, []
        out = []
        for alert in sent:
            labels = dict(alert.labels)
            where = "/".join(labels[k] for k in ("tenant", "index") if k in labels)
            state = "[green]resolved[/]" if alert.resolved else f"[bold red]{labels['severity']}[/]"
            what = "leaked passage" if "tenant" in labels else "stale document"
            evidence = f"{alert.count} {what}{'' if alert.count == 1 else 's'}"
            at = time.strftime("%a %H:%M", time.gmtime(self._clock()))
            out.append(f"trace {seen} ({at}): alert {alert.name} {state} {where} ({evidence})")
        return out
