"""The sampler: a durable sink that puts traces into the labeling queue (SPEC §5).

For each trace: its strata (from the signals), the deterministic decision per stratum, the weekly
quota (caps, near duplicates), then redaction, and the sample is stored on flush. Late strata
(``rephrased``, ``negative_feedback``) reach a trace after it passed: the records of the last
``recent_traces`` traces are kept as received, LZ4-compressed, in memory for that (never stored
unredacted), and decoded again only if a late stratum selects one; a late stratum for a trace
already gone is dropped as ``trace_evicted`` and counted.

What was sampled or dropped travels on the observation (``Observation.sampling``), so the metrics
sink counts it only once the batch is durable.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lz4.block
import msgspec

from monitor.decode import Decoder
from monitor.model import TraceEvent
from monitor.pipeline import Observation
from monitor.redact import Redactor
from monitor.sample_store import NewSample, SampleStore
from monitor.sampling import (
    DropReason,
    SamplingConfig,
    WeeklyQuota,
    decide,
    iso_week,
    late_strata_from,
    question_fingerprint,
    split_of,
    strata_of,
)
from monitor.signals import TraceSignals

Publish = Callable[[list[dict[str, Any]]], None]


@dataclass(slots=True)
class SamplingOutcome:
    """What the sampler did with one observation: (tenant, stratum) admitted, reasons dropped."""

    sampled: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class _Held(msgspec.Struct, gc=False):  # tens of thousands held: kept out of the garbage collector's scans
    tenant: str
    time: float
    question: str
    raw: bytes  # the record as received, LZ4-compressed, unredacted: memory only


class SamplerSink:
    name = "sampler"
    durable = True

    def __init__(self, store: SampleStore, config: SamplingConfig, redactor: Redactor, quota: WeeklyQuota,
                 *, decoder: Decoder, recent_traces: int = 20_000, publish: Publish | None = None) -> None:
        """``decoder``: the pipeline's, to read a held record again when a late stratum selects it."""
        self._store = store
        self._config = config
        self._redactor = redactor
        self._quota = quota
        self._capacity = recent_traces
        self._publish = publish
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._pending: list[NewSample] = []
        self._lock = threading.Lock()
        self._decoder = decoder
        self._encode = msgspec.json.Encoder().encode

    def consume(self, observation: Observation) -> None:
        signals = observation.signals
        outcome = SamplingOutcome()
        event = observation.event
        if isinstance(event, TraceEvent) and isinstance(signals, TraceSignals):
            # The received bytes, not a new encoding of the event: LZ4 of 3 KB takes about 4 µs,
            # where encoding plus zlib took about 45 (docs/performance.md).
            raw = observation.data or self._encode(event)
            held = _Held(event.tenant, event.time, event.query, lz4.block.compress(raw))
            self._hold(event.trace_id, held)
            chosen = decide(self._config, event.trace_id, strata_of(event, signals))
            if chosen:
                self._admit(event.trace_id, held, chosen, outcome, event)
        for ref, stratum in late_strata_from(signals) if signals is not None else []:
            if not decide(self._config, ref.trace_id, [stratum]):
                continue
            held = self._held.get(ref.trace_id)
            if held is None:
                outcome.dropped.append(DropReason.TRACE_EVICTED.value)
                continue
            self._admit(ref.trace_id, held, {stratum}, outcome)
        if outcome.sampled or outcome.dropped:
            observation.sampling = outcome

    def _hold(self, trace_id: str, held: _Held) -> None:
        with self._lock:
            self._held[trace_id] = held
            self._held.move_to_end(trace_id)
            while len(self._held) > self._capacity:
                self._held.popitem(last=False)

    def _admit(self, trace_id: str, held: _Held, strata: set[str], outcome: SamplingOutcome,
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
                    outcome.sampled.append((held.tenant, stratum))
            else:
                outcome.dropped.append(reason.value)
        if not admitted:
            return
        if event is None:
            event = self._decoder.decode(lz4.block.decompress(held.raw))
        payload = self._redactor.redact_trace(msgspec.json.decode(self._encode(event)))
        sample = NewSample(trace_id, held.tenant, week, admitted, split_of(self._config.salt, fingerprint,
                                                                              self._config.heldout_share),
                           fingerprint, held.time, payload)
        with self._lock:
            self._pending.append(sample)

    def flush(self, timeout: float) -> bool:
        with self._lock:
            pending, self._pending = self._pending, []
        # On failure the batch is retried; its observations are sampled again (the quota admits
        # a repeat), so nothing pending needs keeping here.
        created = set(self._store.upsert(pending))
        if self._publish is not None and created:
            self._publish([_published(s) for s in pending if s.trace_id in created])
        return True

    def shutdown(self) -> None:
        pass


def _published(sample: NewSample) -> dict[str, Any]:
    return {"trace_id": sample.trace_id, "tenant": sample.tenant, "week": sample.week,
            "strata": sorted(sample.strata), "split": sample.split, "trace": sample.payload}

