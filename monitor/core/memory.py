"""In-memory sink and dead-letter sink: test doubles shipped next to the real ones.

Both can be told to refuse work (``fail_with``) to exercise the retry paths.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.records import DeadLetter


class MemorySink:
    """Keeps every observation it consumed, in order. ``durable`` says which phase it joins."""

    def __init__(self, name: str = "memory", durable: bool = False) -> None:
        self.name = name
        self.durable = durable
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

    def write(self, letters: Sequence[DeadLetter]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        with self._lock:
            self.letters.extend(letters)

    def shutdown(self) -> None:
        pass
