"""The contract every Source must pass, written once and run against each implementation.

An implementation joins by providing a :class:`SourceHarness` fixture in its test module and
importing the ``test_*`` functions below (see ``test_files.py``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence

from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import Reason, Retryable
from ragmon.monitor.core.memory import MemoryDeadLetters, MemorySink
from ragmon.monitor.core.pipeline import BatchResult, Pipeline, Processor
from ragmon.monitor.core.records import RawRecord

NOW = 1_796_000_000.0


class SourceHarness(ABC):
    """Drives one Source implementation over a fixed list of payloads."""

    #: records per batch the harness configures, so tests can see several batches
    batch_size = 4

    @abstractmethod
    def run(self, payloads: Sequence[bytes], process: Processor) -> None:
        """Build the source over ``payloads``, let it deliver until it has acknowledged all of
        them or has given up retrying (a bounded number of tries), then shut it down."""

    @abstractmethod
    def acknowledged(self) -> int:
        """How many payloads, counted from the first, the source has acknowledged."""


def payloads(n: int, bad: Sequence[int] = ()) -> list[bytes]:
    out = []
    for i in range(n):
        if i in bad:
            out.append(b'{"type":"trace","trace_id":')
        else:
            out.append(json.dumps({"type": "trace", "trace_id": f"t{i}", "time": NOW - 60, "query": "q",
                                   "index": {"name": "policies"}}).encode())
    return out


def test_records_are_acknowledged_only_after_process_returned(source_harness: SourceHarness):
    data = payloads(10)
    delivered = 0
    seen_at_entry = []

    def process(batch: Sequence[RawRecord]) -> BatchResult:
        nonlocal delivered
        seen_at_entry.append((source_harness.acknowledged(), delivered))
        delivered += len(batch)
        return BatchResult(accepted=len(batch))

    source_harness.run(data, process)
    assert delivered == 10
    assert len(seen_at_entry) >= 2, "the harness should deliver several batches"
    for acknowledged, delivered_before in seen_at_entry:
        assert acknowledged <= delivered_before
    assert source_harness.acknowledged() == 10


def test_invalid_input_is_dead_lettered_then_acknowledged(source_harness: SourceHarness):
    dead_letters, sink = MemoryDeadLetters(), MemorySink()
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [sink], dead_letters, clock=lambda: NOW)
    source_harness.run(payloads(9, bad={2, 7}), pipeline.process)
    assert [d.reason for d in dead_letters.letters] == [Reason.MALFORMED_JSON] * 2
    assert len(sink.observations) == 7
    assert source_harness.acknowledged() == 9


def test_nothing_is_acknowledged_while_processing_is_refused(source_harness: SourceHarness):
    calls = 0

    def refuse(batch: Sequence[RawRecord]) -> BatchResult:
        nonlocal calls
        calls += 1
        raise Retryable("database down")

    source_harness.run(payloads(6), refuse)
    assert calls >= 2, "a refused batch must be retried"
    assert source_harness.acknowledged() == 0


def test_a_refused_batch_is_retried_and_nothing_is_lost(source_harness: SourceHarness):
    seen: list[bytes] = []
    refusals = 0

    def flaky(batch: Sequence[RawRecord]) -> BatchResult:
        nonlocal refusals
        if refusals < 2:
            refusals += 1
            raise Retryable("dead-letter store unavailable")
        seen.extend(r.data for r in batch)
        return BatchResult(accepted=len(batch))

    data = payloads(10)
    source_harness.run(data, flaky)
    assert seen == data
    assert source_harness.acknowledged() == 10
