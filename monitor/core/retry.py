"""The one retry core: how long to wait after a refusal, and the loop every background source runs
when the pipeline refuses a batch with :class:`~ragmon.monitor.core.errors.Retryable`.

Waiting is the caller's (``wait``): a source sleeps on its stop event, a Kafka consumer pauses its
partitions and keeps polling to stay in its group. That is why this is a small loop of our own and
not a general retry library: the part that differs from caller to caller is the wait, and the stop
decision that comes with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from ragmon.monitor.core.errors import Retryable

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Back-off after a refusal: ``initial`` doubling up to ``maximum`` seconds.

    ``attempts`` bounds the tries (None: retry until the caller stops).
    """

    initial: float = 0.5
    maximum: float = 30.0
    attempts: int | None = None

    def delays(self) -> Iterator[float]:
        """The waits between tries, in order; ends when the attempts are used up."""
        delay, tries = self.initial, 1
        while self.attempts is None or tries < self.attempts:
            yield delay
            delay, tries = min(delay * 2, self.maximum), tries + 1


class GaveUp(Exception):
    """The retries ended without success: ``stopping`` when the caller is shutting down, else the
    policy's attempts ran out. The last refusal is the cause."""

    def __init__(self, last: Retryable, stopping: bool) -> None:
        super().__init__(str(last))
        self.last = last
        self.stopping = stopping


def until_accepted(attempt: Callable[[], T], policy: RetryPolicy, wait: Callable[[float], bool],
                   on_refused: Callable[[Retryable, float], None] | None = None) -> T:
    """Call ``attempt`` until it returns, while it raises :class:`Retryable`.

    After each refusal ``on_refused(error, delay)`` is told (to log it), then ``wait(delay)`` waits;
    it returns False when the caller is stopping. Raises :class:`GaveUp` when the caller stops or
    the attempts run out; any other exception of ``attempt`` goes through at once.
    """
    delays = policy.delays()
    while True:
        try:
            return attempt()
        except Retryable as error:
            delay = next(delays, None)
            if delay is None:
                raise GaveUp(error, stopping=False) from error
            if on_refused is not None:
                on_refused(error, delay)
            if not wait(delay):
                raise GaveUp(error, stopping=True) from error
