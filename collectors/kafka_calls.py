"""Kafka admin, offset and coordinator calls that ride out a broker's passing states.

A broker that has just started, a group coordinator still loading its offsets topic, a leader
election, a connection being set up: kafka-python reports these as errors flagged ``retriable``
(plus a few it does not flag, listed in :data:`UNFLAGGED_RETRIABLE`) and leaves trying again to
the caller. :func:`kafka_call` does that, with back-off, until a deadline. Polling and committing
need no wrapping: kafka-python retries those itself (a commit until its ``timeout_ms``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kafka import errors

from ragmon.monitor.core.retry import RetryPolicy

T = TypeVar("T")

CALL_DEADLINE = 30.0  # seconds of retries of one offset or metadata call before it is logged and tried later
CALL_TIMEOUT_MS = 10_000  # one try of such a call
#: The longest one Kafka call on the traces consumer's thread may wait (a commit, a producer's
#: send or flush inside a batch): a member that does not poll within ``max_poll_interval_ms`` is
#: put out of its group, and a rebalance waits for every member's next poll. A call that runs out
#: fails the batch, which is retried while the consumer keeps polling.
POLL_THREAD_CALL_MS = 10_000

#: Errors that pass when tried again but that kafka-python does not flag ``retriable`` (in every
#: version we support, 2.2 to 3): no broker answering yet (``NoBrokersAvailable``, kafka-python 2),
#: a broker still registering, a group between generations, a node still connecting, a request
#: that timed out (unflagged in kafka-python 2).
UNFLAGGED_RETRIABLE: tuple[type[BaseException], ...] = tuple(
    error for error in (getattr(errors, "NoBrokersAvailable", None), errors.BrokerNotAvailableError,
                        errors.RebalanceInProgressError, errors.NodeNotReadyError, errors.KafkaTimeoutError)
    if error is not None)


class KafkaCallFailed(errors.KafkaError):
    """A Kafka call still failing with a retriable error at its deadline (or when asked to stop).
    The message names what was being done and the last error, which is also the ``__cause__``."""

    retriable = False  # its deadline is spent: an outer kafka_call must not start it over

    def __init__(self, message: str, last: BaseException) -> None:
        super().__init__(message)
        self.last = last


def is_retriable(error: BaseException) -> bool:
    """Whether trying the same call again may succeed."""
    return isinstance(error, UNFLAGGED_RETRIABLE) or (
        isinstance(error, errors.KafkaError) and getattr(error, "retriable", False))


def kafka_call(
    call: Callable[[], T],
    what: str,
    *,
    deadline: float = 60.0,
    initial: float = 0.1,
    maximum: float = 2.0,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
) -> T:
    """Return ``call()``, calling it again after a retriable error with back-off (``initial``
    doubling up to ``maximum`` seconds) until ``deadline`` seconds have passed; then raise
    :class:`KafkaCallFailed` saying ``what`` was being done (e.g. "listing the offsets of group
    g"). Any other error is raised at once, unchanged. ``stop``, once set, ends the waiting
    early, with :class:`KafkaCallFailed` too. A try that starts before the deadline runs to its
    own end: give the call a timeout of its own (``timeout_ms``, ``request_timeout_ms``) to bound it.
    """
    started = clock()
    delays = RetryPolicy(initial=initial, maximum=maximum).delays()
    tries = 0
    while True:
        tries += 1
        try:
            return call()
        except Exception as error:
            if not is_retriable(error):
                raise
            elapsed = clock() - started
            remaining = deadline - elapsed
            if remaining <= 0:
                raise KafkaCallFailed(f"{what}: still failing after {elapsed:.1f} s and {tries} tries: "
                                      f"{type(error).__name__}: {error}", error) from error
            pause = min(next(delays), remaining)
            if stop is not None:
                if stop.wait(pause):
                    raise KafkaCallFailed(f"{what}: stopped while retrying: {type(error).__name__}: {error}",
                                          error) from error
            else:
                (sleep or time.sleep)(pause)
