"""A token bucket: at most ``rate`` takes a second on average, after a burst of ``burst``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Thread-safe. ``clock`` should be monotonic; one set back refills nothing (it does not empty
    the bucket for as long as it went back)."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate, self._burst, self._clock = rate, burst, clock
        self._tokens, self._last = burst, clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one token; False when none is left."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + max(0.0, now - self._last) * self._rate)
            self._last = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True
