"""In-memory sink and dead-letter sink: test doubles shipped next to the real ones.

Both can be told to refuse work (``fail_with``) to exercise the retry paths.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from monitor.errors import Reason
from monitor.pipeline import Observation
from monitor.records import RawRecord


@dataclass(frozen=True)
class DeadLetter:
    record: RawRecord
    reason: Reason
    detail: str


class MemorySink:
    """Keeps every observation it consumed, in order."""

    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self.observations: list[Observation] = []
        self.fail_with: BaseException | None = None
        self.flushes = 0
        self._lock = threading.Lock()

    def consume(self, observation: Observation) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        with self._lock:
            self.observations.append(observation)

    def flush(self, timeout: float) -> bool:
        self.flushes += 1
        return True

    def shutdown(self) -> None:
        pass


class MemoryDeadLetters:
    """Keeps every rejected record with its reason and detail."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []
        self.fail_with: BaseException | None = None
        self._lock = threading.Lock()

    def put(self, record: RawRecord, reason: Reason, detail: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        with self._lock:
            self.letters.append(DeadLetter(record, reason, detail))

    def flush(self, timeout: float) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def shutdown(self) -> None:
        pass
