"""The sampler: which traces go into the labeling queue, as a stage of the pipeline, and the durable
sink that stores them.

:meth:`Sampler.decide` runs after the signals, on each event: for a trace its strata (from the
signals), the deterministic decision per stratum, then redaction. The :class:`SamplingDecision`
travels on the observation; :class:`SampleWriter` offers its samples to the store when the batch is
flushed, where the weekly quota (caps, near duplicates) is decided against every replica's samples
(``SampleStore.admit``), and reports what was admitted and refused once that is durable. Late strata
(``rephrased``, ``negative_feedback``) reach a trace after it passed: the records of the last
``recent_traces`` traces are kept as received, LZ4-compressed, in memory for that (never stored
unredacted), and decoded again only if a late stratum selects one; a late stratum for a trace
already gone is dropped as ``trace_evicted`` and counted.

Chat turns (traces with a ``conversation_id``): each one's redacted summary travels on the decision
(``SamplingDecision.turns``) and is kept in the turn table when the batch is flushed, before the
batch's samples are admitted, so a sample carries the turns before it whichever replica read
them (``monitor/labeling/conversation.py`` says why a table). A leak, a rephrase or negative
feedback makes the turn's conversation a candidate for the ``conversation`` stratum too.

"""

from __future__ import annotations

import functools
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
from ragmon.monitor.labeling.conversation import turn_of
from ragmon.monitor.labeling.quota import rank_of
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import Admission, NewSample, SampleStore
from ragmon.monitor.labeling.sampling import (
    DropReason,
    SamplingConfig,
    Stratum,
    conversation_claim,
    conversation_selected,
    decide,
    late_strata_from,
    question_fingerprint,
    split_of,
    strata_of,
)
from ragmon.monitor.labeling.weeks import iso_week, previous_week, week_monday

Publish = Callable[[list[dict[str, Any]]], None]


@dataclass(slots=True)
class SamplingDecision:
    """What the sampler decided for one event: the reasons of what was dropped before the quota
    (``trace_evicted``, ``old_week``), the redacted samples to offer to the quota, and the redacted
    summary of a chat turn to keep for later samples (``conversation.turn_of``)."""

    dropped: list[str] = field(default_factory=list)
    samples: list[NewSample] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)


class _Held(msgspec.Struct, gc=False):  # tens of thousands held: kept out of the garbage collector's scans
    tenant: str
    time: float
    question: str
    conversation: str | None  # as sent: what decides the conversation stratum
    raw: bytes  # the record as received, LZ4-compressed, unredacted: memory only


class Sampler:
    """The sampling stage. Thread-safe; the pipeline calls it for one batch at a time."""

    def __init__(self, config: SamplingConfig, redactor: Redactor, *, decoder: Decoder, recent_traces: int) -> None:
        """``decoder``: the pipeline's, to read a held record again when a late stratum selects it;
        ``recent_traces``: how many traces are held for late strata (``late_window_traces``)."""
        self._config = config
        self._redactor = redactor
        self._newest_week: str | None = None
        self._capacity = recent_traces
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._lock = threading.Lock()
        self._decoder = decoder
        # every chat turn's summary names its conversation and caller by pseudonym, an HMAC each:
        # a conversation's turns and a caller's questions repeat them, so recent ones are remembered
        self._conversation_pseudonym = functools.lru_cache(maxsize=4096)(redactor.pseudonymize_conversation)
        self._caller_pseudonym = functools.lru_cache(maxsize=4096)(redactor.pseudonymize_caller)

    def decide(self, event: Event, signals: Signals | None, data: bytes) -> SamplingDecision | None:
        """The decision for one event and its signals (``data``: the record as received), or None
        when nothing was sampled or dropped."""
        decision = SamplingDecision()
        if isinstance(event, TraceEvent) and isinstance(signals, TraceSignals):
            held = self._hold(event, data)
            strata = strata_of(event, signals)
            chosen = decide(self._config, event.trace_id, strata) | self._conversation(held, strata)
            if chosen:
                self._admit(event.trace_id, held, chosen, decision, event)
            if event.conversation_id is not None and self._config.history_turns:
                turn = turn_of(self._redactor, event, self._conversation_pseudonym, self._caller_pseudonym)
                if turn is not None:
                    decision.turns.append(turn)
        for ref, stratum in late_strata_from(signals) if signals is not None else []:
            chosen = decide(self._config, ref.trace_id, [stratum])
            held = self._held.get(ref.trace_id)
            if held is not None:
                chosen |= self._conversation(held, {stratum})
            if not chosen:
                continue
            if held is None:
                decision.dropped.append(DropReason.TRACE_EVICTED.value)
                continue
            self._admit(ref.trace_id, held, chosen, decision)
        return decision if decision.dropped or decision.samples or decision.turns else None

    def _conversation(self, held: _Held, strata: set[str]) -> set[str]:
        """``{conversation}`` when the turn's strata make its conversation a sample of its own."""
        if held.conversation is None or not conversation_selected(self._config, held.tenant, held.conversation,
                                                                   strata):
            return set()
        return {Stratum.CONVERSATION.value}

    def remember(self, event: Event, data: bytes) -> None:
        """Keep a trace for late strata without deciding anything: for a trace another replica
        already decided (``Pipeline.warm``)."""
        if isinstance(event, TraceEvent):
            self._hold(event, data)

    def _hold(self, event: TraceEvent, data: bytes) -> _Held:
        # The received bytes (those the event was decoded from, never empty), not a new encoding
        # of the event: LZ4 of 3 KB takes about 4 µs, where encoding plus zlib took about 45
        # (docs/performance.md).
        held = _Held(event.tenant, event.time, event.query, event.conversation_id, lz4.block.compress(data))
        with self._lock:
            self._held[event.trace_id] = held
            self._held.move_to_end(event.trace_id)
            while len(self._held) > self._capacity:
                self._held.popitem(last=False)
        return held

    def _admit(self, trace_id: str, held: _Held, strata: set[str], decision: SamplingDecision,
               event: TraceEvent | None = None) -> None:
        """Offer the trace for ``strata``, redacted; ``event``: the decoded trace when at hand (else
        the held record is decoded again)."""
        week = iso_week(held.time, self._config.time_zone)
        if not self._recent_week(week):
            decision.dropped += [DropReason.OLD_WEEK.value] * len(strata)
            return
        if event is None:
            event = self._decoder.decode(lz4.block.decompress(held.raw))
        # redacted only if the store keeps it (NewSample.redacted), once for every copy of it
        payload = functools.cache(functools.partial(self._redactor.redact_event, event))
        fingerprint = question_fingerprint(held.question)
        # the row's trace id and tenant as the payload has them, by their shown ids: two trace ids
        # that redact alike stay two samples, and a sample is keyed as its findings name the trace
        shown = self._redactor.shown_id
        conversation = (None if event.conversation_id is None
                        else self._redactor.pseudonymize_conversation(event.conversation_id))
        claim_keys = {Stratum.CONVERSATION.value: conversation_claim(conversation)} if (
            conversation is not None and Stratum.CONVERSATION in strata) else {}
        decision.samples.append(NewSample(shown(trace_id), shown(held.tenant), week, set(strata),
                                          split_of(self._config.salt, fingerprint, self._config.heldout_share),
                                          fingerprint, held.time, payload, rank_of(self._config.salt, trace_id),
                                          conversation, event.turn, claim_keys))

    def _recent_week(self, week: str) -> bool:
        """Whether ``week`` is the newest week seen or the one before it (late feedback and
        rephrases reach last week's traces; events near Monday 00:00 arrive out of order). Weeks
        are judged from event times, which the decoder bounds, not from a clock."""
        with self._lock:
            if self._newest_week is None or week_monday(week) > week_monday(self._newest_week):
                self._newest_week = week
            return week_monday(week) >= week_monday(previous_week(self._newest_week))


class SampleWriter:
    """The durable sink of the sampling decisions: offers their samples to the store when the batch
    is flushed, which decides the weekly quota and stores what it admits; then reports the
    :class:`Admission` (metrics) and publishes the new samples to the samples topic when Kafka is
    configured."""

    name = "samples"
    durable = True

    def __init__(self, store: SampleStore, config: SamplingConfig, publish: Publish | None = None,
                 report: Callable[[Admission], None] | None = None) -> None:
        self._store = store
        self._config = config
        self._publish = publish
        self._report = report
        self._pending: list[NewSample] = []
        self._turns: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def consume(self, observation: Observation) -> None:
        decision = observation.sampling
        if decision is not None and (decision.samples or decision.turns):
            with self._lock:
                self._pending.extend(decision.samples)
                self._turns.extend(decision.turns)

    def flush(self, timeout: float) -> bool:
        with self._lock:
            pending, self._pending = self._pending, []
            turns, self._turns = self._turns, []
        # On failure the batch is retried with the same decisions (the pipeline keeps them), so
        # nothing pending needs keeping here; a sample already stored is not admitted twice.
        # the batch's turns are stored first: a sample of a later turn in the same batch carries them
        admission = self._store.admit(pending, self._config.cap, self._config.weekly_total_cap, turns)
        created = set(admission.created)
        if self._publish is not None and created:
            self._publish([_published(s) for s in pending if s.trace_id in created])
        if self._report is not None:
            self._report(admission)
        return True

    def shutdown(self) -> None:
        pass


def _published(sample: NewSample) -> dict[str, Any]:
    return {"trace_id": sample.trace_id, "tenant": sample.tenant, "week": sample.week,
            "strata": sorted(sample.strata), "split": sample.split, "trace": sample.redacted()}

