"""The sampler: which traces go into the labeling queue, as a stage of the pipeline, and the durable
sink that stores them.

:meth:`Sampler.decide` runs after the signals, on each event: for a trace its strata (from the
signals), the deterministic decision per stratum, the weekly quota (caps, near duplicates), then
redaction. The :class:`SamplingDecision` travels on the observation; :class:`SampleWriter` stores its
samples when the batch is flushed, and the metrics sink counts what was sampled and dropped once the
batch is durable. Late strata
(``rephrased``, ``negative_feedback``) reach a trace after it passed: the records of the last
``recent_traces`` traces are kept as received, LZ4-compressed, in memory for that (never stored
unredacted), and decoded again only if a late stratum selects one; a late stratum for a trace
already gone is dropped as ``trace_evicted`` and counted.

"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lz4.block
import msgspec

from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.model import Event, TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.signals import Signals, TraceSignals
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import NewSample, SampleStore
from ragmon.monitor.labeling.sampling import (
    DropReason,
    SamplingConfig,
    WeeklyQuota,
    decide,
    late_strata_from,
    question_fingerprint,
    split_of,
    strata_of,
)
from ragmon.monitor.labeling.weeks import iso_week

Publish = Callable[[list[dict[str, Any]]], None]


@dataclass(slots=True)
class SamplingDecision:
    """What the sampler decided for one event: (tenant, stratum) newly admitted, the reasons of what
    was dropped, and the redacted samples to store."""

    sampled: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    samples: list[NewSample] = field(default_factory=list)


class _Held(msgspec.Struct, gc=False):  # tens of thousands held: kept out of the garbage collector's scans
    tenant: str
    time: float
    question: str
    raw: bytes  # the record as received, LZ4-compressed, unredacted: memory only


class Sampler:
    """The sampling stage. Thread-safe; the pipeline calls it for one batch at a time."""

    def __init__(self, config: SamplingConfig, redactor: Redactor, quota: WeeklyQuota, *, decoder: Decoder,
                 recent_traces: int = 20_000) -> None:
        """``decoder``: the pipeline's, to read a held record again when a late stratum selects it."""
        self._config = config
        self._redactor = redactor
        self._quota = quota
        self._capacity = recent_traces
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._lock = threading.Lock()
        self._decoder = decoder
        self._encode = msgspec.json.Encoder().encode

    def decide(self, event: Event, signals: Signals | None, data: bytes) -> SamplingDecision | None:
        """The decision for one event and its signals (``data``: the record as received), or None
        when nothing was sampled or dropped."""
        decision = SamplingDecision()
        if isinstance(event, TraceEvent) and isinstance(signals, TraceSignals):
            # The received bytes, not a new encoding of the event: LZ4 of 3 KB takes about 4 µs,
            # where encoding plus zlib took about 45 (docs/performance.md).
            raw = data or self._encode(event)
            held = _Held(event.tenant, event.time, event.query, lz4.block.compress(raw))
            self._hold(event.trace_id, held)
            chosen = decide(self._config, event.trace_id, strata_of(event, signals))
            if chosen:
                self._admit(event.trace_id, held, chosen, decision, event)
        for ref, stratum in late_strata_from(signals) if signals is not None else []:
            if not decide(self._config, ref.trace_id, [stratum]):
                continue
            held = self._held.get(ref.trace_id)
            if held is None:
                decision.dropped.append(DropReason.TRACE_EVICTED.value)
                continue
            self._admit(ref.trace_id, held, {stratum}, decision)
        return decision if decision.sampled or decision.dropped or decision.samples else None

    def _hold(self, trace_id: str, held: _Held) -> None:
        with self._lock:
            self._held[trace_id] = held
            self._held.move_to_end(trace_id)
            while len(self._held) > self._capacity:
                self._held.popitem(last=False)

    def _admit(self, trace_id: str, held: _Held, strata: set[str], decision: SamplingDecision,
               event: TraceEvent | None = None) -> None:
        """Admit the trace for ``strata`` within the weekly quota; ``event``: the decoded trace when
        at hand (else the held record is decoded again)."""
        week = iso_week(held.time, self._config.time_zone)
        fingerprint = question_fingerprint(held.question)
        admitted = set()
        for stratum in sorted(strata):
            repeat = self._quota.holds(held.tenant, stratum, week, trace_id)
            reason = self._quota.admit(held.tenant, stratum, week, fingerprint, trace_id)
            if reason is None:
                admitted.add(stratum)
                if not repeat:  # a replayed sample is stored idempotently and not counted again
                    decision.sampled.append((held.tenant, stratum))
            else:
                decision.dropped.append(reason.value)
        if not admitted:
            return
        if event is None:
            event = self._decoder.decode(lz4.block.decompress(held.raw))
        payload = self._redactor.redact_event(event)
        # the row's trace id and tenant as the payload has them: a name a detector fires on is not
        # stored beside its redacted copy
        redact = self._redactor.redact
        decision.samples.append(NewSample(redact(trace_id), redact(held.tenant), week, admitted,
                                          split_of(self._config.salt, fingerprint, self._config.heldout_share),
                                          fingerprint, held.time, payload))


class SampleWriter:
    """The durable sink of the sampling decisions: stores their samples when the batch is flushed
    (and publishes the new ones to the samples topic when Kafka is configured)."""

    name = "samples"
    durable = True

    def __init__(self, store: SampleStore, publish: Publish | None = None) -> None:
        self._store = store
        self._publish = publish
        self._pending: list[NewSample] = []
        self._lock = threading.Lock()

    def consume(self, observation: Observation) -> None:
        decision = observation.sampling
        if decision is not None and decision.samples:
            with self._lock:
                self._pending.extend(decision.samples)

    def flush(self, timeout: float) -> bool:
        with self._lock:
            pending, self._pending = self._pending, []
        # On failure the batch is retried with the same decisions (the pipeline keeps them), so
        # nothing pending needs keeping here; storing is idempotent by trace id.
        created = set(self._store.upsert(pending))
        if self._publish is not None and created:
            self._publish([_published(s) for s in pending if s.trace_id in created])
        return True

    def shutdown(self) -> None:
        pass


def _published(sample: NewSample) -> dict[str, Any]:
    return {"trace_id": sample.trace_id, "tenant": sample.tenant, "week": sample.week,
            "strata": sorted(sample.strata), "split": sample.split, "trace": sample.payload}

