"""Trace ids already processed, so that an event delivered again is not counted again.

Delivery is at least once: a client retries a request whose answer it did not get, a Kafka
consumer reads again what it processed but had not committed. Without this, each redelivered
trace would count its answer, its violations and its sample again. The window is the last
``capacity`` trace ids processed (``dedupe.window``), in memory: a process that restarts starts
with an empty window.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class SeenTraces:
    """The last ``capacity`` trace ids of batches that went through (0: remember none)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self._capacity > 0

    def __contains__(self, trace_id: str) -> bool:
        return trace_id in self._ids

    def remember(self, trace_ids: Iterable[str]) -> None:
        """Called once a batch is durable: its trace ids count as seen from then on."""
        if not self._capacity:
            return
        for trace_id in trace_ids:
            self._ids[trace_id] = None
            self._ids.move_to_end(trace_id)
        while len(self._ids) > self._capacity:
            self._ids.popitem(last=False)
