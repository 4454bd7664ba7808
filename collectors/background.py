"""The thread a source runs on, and how it stops."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

log = logging.getLogger(__name__)


class BackgroundSource(ABC):
    """Runs :meth:`run` on a thread of its own. ``shutdown`` asks it to stop (``_stop`` is set; a
    source checks it between batches, so the batch in flight finishes and is acknowledged) and
    waits; ``error`` holds whatever stopped it on its own, for its owner to act on."""

    thread_name = "source"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @abstractmethod
    def run(self) -> None:
        """The source's loop: deliver batches until the input ends or ``_stop`` is set."""

    def ready(self) -> bool:
        """Caught up (see :class:`~ragmon.monitor.core.pipeline.Source`); a source that never waits
        for anything is always ready."""
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_guarded, name=self.thread_name, daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float) -> bool:
        self._stop.set()
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the thread ended (or ``timeout``); True when it did."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run_guarded(self) -> None:
        try:
            self.run()
        except BaseException as error:  # a thread cannot raise to its owner: keep it for them
            self.error = error
            log.error("%s stopped: %s", self.thread_name, error)
