"""The pipeline core: the contracts between sources, the core and sinks, and the loop that joins them.

::

    Source --RawRecord batch--> Pipeline.process: decode, then the stages on each event:
                                  catalog update -> signals -> sampling decision
                                      --Observation--> durable sinks  (then flushed)
                                      \\--InvalidInput--> DeadLetterSink (then written)
                                      --Observation--> other sinks (metrics, alerts)

Each stage's output is a field of the :class:`Observation` (``signals``, ``sampling``); sinks read
observations and never change them, so no sink depends on another's order.

Acknowledgement rule (every source obeys it; ``tests/collectors/contract.py`` checks each one):
a source acknowledges (commits an offset, advances a file position, answers 2xx) only after
``process`` has returned for the batch holding the record. If ``process`` raises
:class:`~ragmon.monitor.core.errors.Retryable`, nothing of that batch is acknowledged and the source retries
it after a back-off; records are therefore delivered at least once, never lost.

A batch becomes durable before anything is counted: durable sinks (catalog, samples) take and
flush it first, then its dead letters are written in one go. Only then do the other sinks
(metrics) see it, so a batch that is refused and retried is not counted twice. Its retry reuses the
signals and sampling decisions of its traces and feedback from the first attempt, so the stateful
stages see each of them once.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.dedupe import SeenTraces
from ragmon.monitor.core.errors import InvalidInput, Reason, Retryable
from ragmon.monitor.core.model import DocumentEvent, Event, FeedbackEvent, IndexEvent, TraceEvent
from ragmon.monitor.core.records import DeadLetter, RawRecord
from ragmon.monitor.core.signals.results import Signals

CatalogUpdate = Callable[[Event], None]
Analyzer = Callable[[Event], Signals | None]
Decider = Callable[[Event, Signals | None, bytes], Any]  # (event, its signals, the record) -> decision
Learner = Callable[[Event], None]  # takes in an event another replica judged: state only
Rememberer = Callable[[Event, bytes], None]  # keeps a trace (and its record) for late strata
Keeper = Callable[[Event, Signals | None, bytes], None]  # keeps a judged trace to judge it again later
LateJudge = Callable[[bool], list[tuple[Event, Signals]]]  # (force) -> earlier traces judged again
LATE_SOURCE = "catalog_change"  # the source of the observations a catalog change made about earlier traces

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Observation:
    """A decoded, validated event and what the stages made of it, on its way to the sinks."""

    event: Event
    source: str
    received_at: float  # Unix seconds when the pipeline accepted it
    signals: Signals | None = None
    sampling: Any = None  # the sampling decision (labeling.sampler.SamplingDecision), when there is one
    data: bytes = b""  # the record as received (bytes-like)


@dataclass(frozen=True, slots=True)
class Stages:
    """What happens to each decoded event before the sinks see it, in this order (``prepare``
    runs once before each batch and each warm-up: it brings in the state other replicas share, the
    low-score baselines of ``monitor/storage/score_share.py``):

    1. ``update_catalog``: document and index events change the catalog (``Catalog.apply``);
    2. ``analyze``: the signals, which read the catalog and never change it (``SignalEngine.observe``);
    3. ``decide``: the sampling decision, from the event and its signals (``Sampler.decide``);
    4. ``keep``: the judged trace is kept, to be judged again if the catalog changes (``LateJudge.keep``).

    The stages run on one event after another, so a trace is judged against every catalog event
    before it in the batch. After the batch's events, ``late`` gives the earlier traces a catalog
    change showed leaks or stale passages in (``LateJudge.judge_again``): they join the batch as
    observations of their own (source ``catalog_change``), and :meth:`Pipeline.tick` asks for them
    between batches too. In a warm-up (:meth:`Pipeline.warm`), ``learn`` and ``remember`` take
    the places of ``analyze`` and ``decide``: the signals' memories take the event in
    (``SignalEngine.learn``) and the sampler keeps the trace for late strata (``Sampler.remember``).
    """

    prepare: Callable[[], None] | None = None
    update_catalog: CatalogUpdate | None = None
    analyze: Analyzer | None = None
    decide: Decider | None = None
    learn: Learner | None = None
    remember: Rememberer | None = None
    keep: Keeper | None = None
    late: LateJudge | None = None


class Sink(Protocol):
    """Consumes observations. Must be safe to call from several threads.

    ``durable`` sinks store something that must survive (catalog rows, samples): they see a
    batch first, and ``flush`` must make it durable (return False, or raise :class:`Retryable`,
    when it cannot; the batch is then retried, so consuming must be idempotent). Other sinks
    (metrics) see a batch only once it is durable. ``consume`` raises :class:`Retryable` to
    refuse an observation; any other exception is a bug: counted, logged, and the other sinks
    still get the observation. ``shutdown`` releases resources.
    """

    name: str
    durable: bool

    def consume(self, observation: Observation) -> None: ...

    def flush(self, timeout: float) -> bool: ...

    def shutdown(self) -> None: ...


class DeadLetterSink(Protocol):
    """Stores rejected records with their reason, detail, origin, the sender's privilege (so that a
    replay grants no more) and (bounded) raw bytes.

    ``write`` stores a batch's dead letters and returns once they are durable; when it cannot, it
    raises :class:`Retryable` (the source then pauses instead of dropping anything).
    """

    def write(self, letters: Sequence[DeadLetter]) -> None: ...

    def shutdown(self) -> None: ...


class Source(Protocol):
    """Turns a transport into batches of :class:`RawRecord` for a processor given at construction.

    ``start`` returns at once and delivers in the background; ``shutdown`` stops taking new
    input, lets the batch in flight finish and be acknowledged, and returns whether that happened
    within ``timeout``. ``error`` is None while the source runs, else what stopped it on its own
    (its owner then stops the process, loudly). ``ready`` is False while what the source delivers
    would not yet be judged against the whole catalog (a Kafka consumer waiting for the catalog
    reader): the process then reports itself not ready.
    """

    error: BaseException | None

    def start(self) -> None: ...

    def shutdown(self, timeout: float) -> bool: ...

    def ready(self) -> bool: ...


@dataclass(slots=True)
class Rejection:
    position: int  # index of the record in its batch
    reason: str
    detail: str


@dataclass(slots=True)
class BatchResult:
    accepted: int = 0  # valid events taken, duplicates included
    rejected: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    duplicates: int = 0  # of the accepted, traces already processed: acknowledged, not counted again


Processor = Callable[[Sequence[RawRecord]], BatchResult]


class BatchObserver(Protocol):
    """Watches the batches :meth:`Pipeline.process` handles (ragmon's own tracing,
    ``monitor/app/telemetry.py``): ``begin`` once the batch holds the pipeline, with the source of
    its records (a batch comes from one source) and their number; ``end`` when it is done, with its
    result, or with the error that refused it (the result is then None). Both run on the
    processing thread, inside the pipeline's lock: they must be quick and must not raise."""

    def begin(self, source: str, records: int) -> Any: ...

    def end(self, handle: Any, result: BatchResult | None, error: BaseException | None) -> None: ...


@dataclass
class PipelineStats:
    """Counters of what went through, keyed by closed sets only (source, event type, reason, sink).

    Updated once per batch under a lock; read by the metrics exporter and the CLI summary.
    """

    accepted: Counter[tuple[str, str]] = field(default_factory=Counter)
    rejected: Counter[tuple[str, str]] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)  # by source
    sink_errors: Counter[str] = field(default_factory=Counter)
    last_event_time: dict[tuple[str, str], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def merge(self, accepted: Counter[tuple[str, str]], rejected: Counter[tuple[str, str]], now: float,
              duplicates: Counter[str] | None = None) -> None:
        with self._lock:
            self.accepted.update(accepted)
            self.rejected.update(rejected)
            if duplicates:
                self.duplicates.update(duplicates)
            for key in accepted:
                self.last_event_time[key] = now

    def count_sink_error(self, sink: str) -> None:
        with self._lock:
            self.sink_errors[sink] += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """(accepted, rejected) as plain dicts."""
        with self._lock:
            return dict(self.accepted), dict(self.rejected)

    def full_snapshot(self) -> tuple[dict, dict, dict, dict, dict]:
        """(accepted, rejected, last event time, sink errors, duplicates), taken together."""
        with self._lock:
            return (dict(self.accepted), dict(self.rejected), dict(self.last_event_time), dict(self.sink_errors),
                    dict(self.duplicates))


class FanOut:
    """Hands observations to a group of sinks; one failing sink does not stop the others."""

    def __init__(self, sinks: Sequence[Sink], stats: PipelineStats) -> None:
        self.sinks = tuple(sinks)
        self._stats = stats

    def consume(self, observations: Sequence[Observation]) -> None:
        """Every observation to every sink; raises the first :class:`Retryable` at the end."""
        retry: Retryable | None = None
        for sink in self.sinks:
            for observation in observations:
                try:
                    sink.consume(observation)
                except Retryable as error:
                    retry = retry or error  # the others still consume; the batch is retried as a whole
                    break
                except Exception:
                    self._stats.count_sink_error(sink.name)
                    log.exception("sink %s failed on an observation; it was skipped", sink.name)
        if retry is not None:
            raise retry

    def flush(self, timeout: float) -> list[str]:
        """Flush every sink; return the names (and reasons) of those that could not."""
        failed = []
        for sink in self.sinks:
            try:
                if not sink.flush(timeout):
                    failed.append(f"{sink.name} (timed out)")
            except Retryable as error:
                failed.append(f"{sink.name} ({error})")
            except Exception:
                self._stats.count_sink_error(sink.name)
                log.exception("sink %s failed to flush", sink.name)
                failed.append(sink.name)
        return failed

    def shutdown(self) -> None:
        for sink in self.sinks:
            try:
                sink.shutdown()
            except Exception:
                log.exception("sink %s failed to shut down", sink.name)


class Pipeline:
    """Decodes a batch, computes signals, makes the batch durable (durable sinks, dead letters),
    then hands it to the other sinks.

    ``process`` is the processor every source calls. It may be called from several threads;
    batches are processed one at a time, because the signals keep state (catalog, baselines,
    recent callers) that must see events in order.
    """

    def __init__(
        self,
        decoder: Decoder,
        sinks: Sequence[Sink],
        dead_letters: DeadLetterSink,
        clock: Callable[[], float],
        stages: Stages = Stages(),
        stats: PipelineStats | None = None,
        flush_timeout: float = 10.0,
        seen: SeenTraces | None = None,
        observer: BatchObserver | None = None,
    ) -> None:
        """``seen``: the trace ids already processed (``dedupe.window``); a trace among them is
        acknowledged and counted as a duplicate, and goes through no stage and no sink.
        ``observer``: told about every batch processed (see :class:`BatchObserver`)."""
        self._observer = observer
        self.stats = stats or PipelineStats()
        self._decoder = decoder
        self._stages = stages
        self._lock = threading.Lock()
        self._durable = FanOut([s for s in sinks if s.durable], self.stats)
        self._volatile = FanOut([s for s in sinks if not s.durable], self.stats)
        self._dead_letters = dead_letters
        self._clock = clock
        self._flush_timeout = flush_timeout
        self._seen = seen if seen is not None else SeenTraces(0)
        # Signals and sampling decisions of the traces and feedback of the last refused batch: its
        # retry reuses them, so the stateful stages (score baselines, rephrase memory, held traces)
        # neither see those events twice nor judge them differently the second time, and what was
        # sampled is counted once. Cleared by the next batch that goes through.
        self._refused: dict[tuple, tuple[Signals | None, Any]] = {}
        # what the catalog's changes showed of earlier traces, not yet made durable (a refused
        # batch or tick carried them): the next batch or tick delivers them
        self._late: list[Observation] = []

    def process(self, records: Sequence[RawRecord]) -> BatchResult:
        """Handle one batch. Returns only when its effects are durable.

        Raises :class:`Retryable` if a durable sink or the dead-letter sink cannot take or persist
        the batch; the caller must then not acknowledge any record of it.
        """
        with self._lock:
            if self._observer is None:
                return self._process(records)
            handle = self._observer.begin(records[0].source if records else "none", len(records))
            try:
                result = self._process(records)
            except BaseException as error:
                self._observer.end(handle, None, error)
                raise
            self._observer.end(handle, result, None)
            return result

    def _process(self, records: Sequence[RawRecord]) -> BatchResult:
        now = self._clock()
        if self._stages.prepare is not None:
            self._stages.prepare()
        update_catalog, analyze, decide = self._stages.update_catalog, self._stages.analyze, self._stages.decide
        keep = self._stages.keep
        observations: list[Observation] = []
        letters: list[DeadLetter] = []
        rejections: list[Rejection] = []
        accepted: Counter[tuple[str, str]] = Counter()
        rejected: Counter[tuple[str, str]] = Counter()
        duplicates: Counter[str] = Counter()
        batch_traces: set[str] = set()
        dedupe = self._seen.enabled
        for position, record in enumerate(records):
            try:
                event = self._decoder.decode(record.data, record.size)
                if isinstance(event, DocumentEvent | IndexEvent):
                    if not record.may_write_catalog:
                        raise InvalidInput(Reason.NOT_PERMITTED, f"{type(event).__struct_config__.tag} events "
                                           "change the catalog: this sender lacks the catalog privilege")
                    if update_catalog is not None:
                        update_catalog(event)  # idempotent: a retried batch applies the same changes again
            except InvalidInput as error:
                letters.append(DeadLetter(record, error.reason, error.detail))
                rejections.append(Rejection(position, error.reason.value, error.detail))
                rejected[(record.source, error.reason.value)] += 1
                continue
            if dedupe and isinstance(event, TraceEvent):
                if event.trace_id in self._seen or event.trace_id in batch_traces:
                    duplicates[record.source] += 1
                    continue
                batch_traces.add(event.trace_id)
            earlier = self._refused.get(_retry_key(event)) if self._refused else None
            if earlier is not None:
                signals, sampling = earlier
            else:
                signals = analyze(event) if analyze is not None else None
                sampling = decide(event, signals, record.data) if decide is not None else None
                if keep is not None:
                    keep(event, signals, record.data)
            observations.append(Observation(event, record.source, now, signals, sampling, record.data))
            accepted[(record.source, type(event).__struct_config__.tag)] += 1
        late = self._judged_again(now, force=False)
        try:
            self._durable.consume(observations + late)
            failed = self._durable.flush(self._flush_timeout)
            if failed:
                raise Retryable(f"sinks could not persist the batch: {', '.join(failed)}")
            if letters:
                self._dead_letters.write(letters)
        except Retryable:
            self._refused = {key: (o.signals, o.sampling) for o in observations
                             if (key := _retry_key(o.event)) is not None}
            self._late = late
            raise
        self._refused, self._late = {}, []
        self._seen.remember(batch_traces)
        # Durable now: from here on nothing refuses the batch, so nothing is counted twice.
        self._volatile.consume(observations + late)
        self._volatile.flush(self._flush_timeout)
        self.stats.merge(accepted, rejected, now, duplicates)
        n_duplicates = sum(duplicates.values())
        return BatchResult(len(observations) + n_duplicates, len(rejections), rejections, n_duplicates)

    def tick(self, force: bool = False) -> int:
        """Between batches (a process's idle ticker, the end of a replay): run ``prepare`` (which
        takes in the catalog changes other processes wrote) and deliver what the catalog's changes
        showed of earlier traces (``force``: without waiting for the judge's interval). Returns
        how many observations it delivered. Raises :class:`Retryable` when the durable sinks
        refuse them; they are kept for the next batch or tick."""
        with self._lock:
            if self._stages.prepare is not None:
                self._stages.prepare()
            late = self._judged_again(self._clock(), force)
            if not late:
                return 0
            try:
                self._durable.consume(late)
                failed = self._durable.flush(self._flush_timeout)
                if failed:
                    raise Retryable(f"sinks could not persist what the catalog's changes showed: {', '.join(failed)}")
            except Retryable:
                self._late = late
                raise
            self._late = []
            self._volatile.consume(late)
            self._volatile.flush(self._flush_timeout)
            return len(late)

    def _judged_again(self, now: float, force: bool) -> list[Observation]:
        """What is still owed from a refused attempt, and what the catalog's changes show now."""
        late = list(self._late)
        if self._stages.late is not None:
            late += [Observation(event, LATE_SOURCE, now, signals) for event, signals in self._stages.late(force)]
        return late

    def warm(self, records: Sequence[RawRecord]) -> int:
        """Replay records that another replica already processed (a Kafka partition this one was
        just assigned), so that the stateful stages know them as that replica did: the signals'
        memories (recent traces for the feedback join, score baselines, questions per caller) and
        the traces the sampler keeps for late strata. Nothing is stored, counted, sampled,
        dead-lettered or alerted, and catalog events are not applied (the catalog has moved on).
        Returns how many events were replayed."""
        with self._lock:
            if self._stages.prepare is not None:
                self._stages.prepare()
            learn, remember = self._stages.learn, self._stages.remember
            replayed = 0
            for record in records:
                try:
                    event = self._decoder.decode(record.data, record.size)
                except InvalidInput:
                    continue  # its owner dead-lettered it
                if isinstance(event, DocumentEvent | IndexEvent):
                    continue
                if self._seen.enabled and isinstance(event, TraceEvent):
                    if event.trace_id in self._seen:
                        continue
                    self._seen.remember({event.trace_id})
                if learn is not None:
                    learn(event)
                if remember is not None:
                    remember(event, record.data)
                replayed += 1
            return replayed

    def shutdown(self) -> None:
        self._durable.shutdown()
        self._volatile.shutdown()
        self._dead_letters.shutdown()


def _retry_key(event: Event) -> tuple | None:
    """What identifies an event whose stages keep state, across the retries of its batch."""
    if isinstance(event, TraceEvent):
        return ("trace", event.trace_id)
    if isinstance(event, FeedbackEvent):
        return ("feedback", event.trace_id, event.kind, event.value, event.time)
    if isinstance(event, IndexEvent):  # its lag is observed when the catalog first takes the version in
        return ("index", event.index, event.doc_id, event.version, event.indexed_at)
    return None
