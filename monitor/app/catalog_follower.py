"""The thread of ``ragmon serve`` that keeps the catalog following the store between batches.

Before each batch the pipeline takes in the catalog changes other processes wrote and judges
again the recent traces that served changed documents (``Pipeline.tick`` does the same without a
batch). With no traffic arriving, nothing would call it: this ticks it every
``catalog.refresh_seconds``, so a revocation written by ``ragmon replay`` shows in the catalog,
the status page and the findings of earlier traces within seconds even on an idle process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ragmon.collectors.background import BackgroundSource
from ragmon.monitor.core.errors import Retryable

log = logging.getLogger(__name__)


class CatalogFollower(BackgroundSource):
    """Calls ``tick`` every ``interval`` seconds until shut down; a tick that fails is logged and
    tried again at the next interval (what it owed stays with the pipeline)."""

    thread_name = "catalog-follower"

    def __init__(self, tick: Callable[[], int], interval: float) -> None:
        super().__init__()
        self._tick = tick
        self._interval = interval

    def run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tick()
            except Retryable as error:
                log.warning("catalog follower: %s; tried again in %.0f s", error, self._interval)
            except Exception:  # a bug in a sink or the refresh: keep following, loudly
                log.exception("catalog follower: a tick failed")
