"""Kafka (scaled mode): the traces consumer group. The catalog reader it waits for is in
``ragmon.collectors.kafka_catalog``, the dead-letter topic in ``ragmon.collectors.kafka_dead_letters``.

Delivery is at least once. A batch's offsets are committed only after ``process`` returned for
it, which means its effects (catalog rows, samples, dead letters) are stored. When ``process``
refuses the batch (:class:`~ragmon.monitor.core.errors.Retryable`: a store is down), the source pauses its
partitions and retries the same batch with back-off, polling meanwhile so that the group keeps it;
it never skips. A rebalance that takes partitions away while a batch waits drops that batch's
records of those partitions: their new owner starts from the last commit and sees them again.

Warm state (docs/reliability.md): the signals and the sampler keep memories of recent records
(traces for the feedback join, score baselines, questions per caller, traces held for late
strata). When a replica is assigned a partition whose latest records another replica processed,
it first replays up to ``warmup_records`` of them before the group's committed offset through
``warm`` (``Pipeline.warm``: state only; nothing stored or counted), so that its memories are
those the previous owner had. The traces topic is the changelog of that state.

Catalog first (docs/events.md): a replica judges no trace before its catalog reader has reached the
catalog topic's end offsets as of its start, and again as of each rebalance that assigned it
partitions. Otherwise traces already waiting on the traces topic would be judged against a
catalog that does not yet know of the new versions and ACL revocations produced before them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

from ragmon.collectors.background import BackgroundSource
from ragmon.collectors.kafka_calls import POLL_THREAD_CALL_MS, is_retriable
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import BatchResult, Processor
from ragmon.monitor.core.rate_limit import TokenBucket
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.core.retry import GaveUp, RetryPolicy, until_accepted

log = logging.getLogger(__name__)
SOURCE = "kafka"

AssignmentReporter = Callable[[dict[str, int]], None]  # partitions held, per topic, after each assignment
Warmer = Callable[[Sequence[RawRecord]], int]  # replays records into state only; returns how many it took
WarmupReporter = Callable[[str, int], None]  # (topic, records replayed)
BACKOFF = RetryPolicy(initial=0.5, maximum=30.0)  # retry a refused batch forever, at most 30 s apart


class CatalogBarrier(Protocol):
    """What the traces consumer waits on before it judges traces: the catalog reader of its
    replica. Thread-safe: the reader's own thread makes the Kafka calls (a kafka-python consumer
    may only be used from one thread)."""

    def request_sync(self) -> None:
        """Ask the reader to reach the catalog topic's end offsets as of now; returns at once.
        From this call until the reader has reached them, :meth:`wait_synced` answers False."""

    def wait_synced(self, timeout: float) -> bool:
        """Block for at most ``timeout`` seconds until the reader has reached the end offsets of
        its start and of every :meth:`request_sync` so far; True when it has."""


class DeadLetterRatioExceeded(RuntimeError):
    """Too large a share of recent records was rejected: the producer is probably broken."""


class DeadLetterGuard:
    """Tracks the rejected share of the last ``window`` records."""

    def __init__(self, max_ratio: float, window: int) -> None:
        self._max_ratio = max_ratio
        self._recent: deque[tuple[int, int]] = deque()  # (records, rejected) per batch
        self._records = self._rejected = 0
        self._window = window

    def check(self, records: int, rejected: int) -> None:
        """Add a processed batch; raise when the window is full and the ratio is over the limit."""
        self._recent.append((records, rejected))
        self._records += records
        self._rejected += rejected
        while self._recent and self._records - self._recent[0][0] >= self._window:
            old_records, old_rejected = self._recent.popleft()
            self._records -= old_records
            self._rejected -= old_rejected
        if self._max_ratio < 1 and self._records >= self._window and self._rejected > self._max_ratio * self._records:
            raise DeadLetterRatioExceeded(
                f"{self._rejected} of the last {self._records} records were rejected "
                f"(limit {self._max_ratio:.0%}); fix the producer or raise kafka.max_dead_letter_ratio")


class _Revocations(ConsumerRebalanceListener):
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self._source._revoked(set(revoked))

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._source._assigned(set(assigned))


class KafkaSource(BackgroundSource):
    """Consumes ``topics`` in consumer group ``group_id`` and feeds batches to ``process``.

    With a ``catalog`` barrier it joins the group only once the catalog is current, and after
    each assignment it holds the assigned partitions (paused, still polled so that the group
    keeps them; records fetched anyway are sought back) until the catalog is current again.
    kafka-python's default (eager) protocol hands over every partition at each rebalance, so
    every assignment counts as new. ``caught_up`` is clear while such a wait is due or under way.
    """

    def __init__(
        self,
        consumer_factory: Callable[..., KafkaConsumer],
        topics: list[str],
        process: Processor,
        *,
        max_batch: int = 500,
        retry: RetryPolicy = BACKOFF,
        guard: DeadLetterGuard | None = None,
        report_assignment: AssignmentReporter | None = None,
        catalog: CatalogBarrier | None = None,
        warm: Warmer | None = None,
        warmup_records: int = 0,
        report_warmup: WarmupReporter | None = None,
    ) -> None:
        super().__init__()
        self._factory = consumer_factory
        self._topics = topics
        self._process = process
        self._max_batch = max_batch
        self._retry = retry
        self._guard = guard
        self._report_assignment = report_assignment
        self._consumer: KafkaConsumer | None = None
        self._pending: list[RawRecord] = []
        self._paused = False
        self._held: frozenset[TopicPartition] = frozenset()  # read by other threads: replaced, never mutated
        self._catalog = catalog
        self._catalog_due = False  # partitions were assigned: their records wait for the catalog
        self._warm = warm if warmup_records > 0 else None
        self._warmup_records = warmup_records
        self._report_warmup = report_warmup
        self._warm_due: set[TopicPartition] = set()  # assigned, warm-up not yet set up
        self._warm_until: dict[TopicPartition, int] = {}  # offsets below this are replayed, not processed
        self._consumed: dict[TopicPartition, int] = {}  # next offset after the last record run through the stages
        self.caught_up = threading.Event()  # clear while judging traces waits for the catalog
        self._away_warnings = TokenBucket(1 / 30, 1)  # polls failing with the brokers away: one in 30 s
        if catalog is None:
            self.caught_up.set()

    thread_name = "kafka-source"

    def ready(self) -> bool:
        return self.caught_up.is_set()

    def held(self) -> frozenset[TopicPartition]:
        """The partitions this member holds now (any thread may ask)."""
        return self._held

    def run(self) -> None:
        """Consume until shut down. Raises :class:`DeadLetterRatioExceeded`."""
        consumer = self._consumer = self._factory()
        try:
            # Joining only with a current catalog: while this replica reads it, the others keep
            # consuming the partitions it would otherwise hold paused.
            if self._catalog is not None and not self._await_catalog(consumer, member=False):
                return
            consumer.subscribe(self._topics, listener=_Revocations(self))
            while not self._stop.is_set():
                if self._catalog_due and not self._await_catalog(consumer, member=True):
                    break
                if self._warm_due:
                    self._begin_warmup(consumer)
                polled = self._poll(consumer, timeout_ms=500, max_records=self._max_batch)
                if self._catalog_due or self._warm_due:  # this poll brought an assignment: what it
                    self._seek_back(consumer, polled)       # fetched waits for the catalog and warm-up
                    continue
                self._pending = self._replay_warm(polled) if self._warm_until else [
                    _record(message) for messages in polled.values() for message in messages]
                if self._pending:
                    self._deliver(consumer)
        finally:
            consumer.close(autocommit=False)

    def _deliver(self, consumer: KafkaConsumer) -> None:
        result = self._process_until_accepted(consumer)
        if result is None:
            return  # shutting down, or every pending record was revoked: nothing to commit
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for record in self._pending:
            tp = TopicPartition(record.origin["topic"], record.origin["partition"])
            offsets[tp] = OffsetAndMetadata(record.origin["offset"] + 1, "", -1)
        try:
            # kafka-python retries retriable errors itself, here for at most POLL_THREAD_CALL_MS
            consumer.commit(offsets, timeout_ms=POLL_THREAD_CALL_MS)
        except KafkaError as error:
            # e.g. the group rebalanced meanwhile: the new owner reads these records again
            log.warning("offset commit failed (%s); %d records will be delivered again",
                        type(error).__name__, len(self._pending))
        pending, self._pending = self._pending, []
        self._note_consumed(pending)
        if self._guard is not None:
            self._guard.check(len(pending), result.rejected)

    def _process_until_accepted(self, consumer: KafkaConsumer) -> BatchResult | None:
        """Process the pending batch, pausing and retrying while it is refused; None when shutting
        down first (the batch is left uncommitted and will be read again)."""
        def refused(error: Retryable, delay: float) -> None:
            log.warning("batch of %d refused (%s); consumption paused, retry in %.1f s",
                        len(self._pending), error, delay)

        def wait(delay: float) -> bool:
            self._paused = True
            consumer.pause(*consumer.assignment())
            if self._stop.wait(delay):
                return False
            self._poll_while_paused(consumer)
            return bool(self._pending)  # a revocation may have taken the whole batch away

        try:
            if not self._pending:
                return None
            return until_accepted(lambda: self._process(self._pending), self._retry, wait, refused)
        except GaveUp:
            return None
        finally:
            if self._paused:
                self._paused = False
                consumer.resume(*consumer.paused())

    def _poll_while_paused(self, consumer: KafkaConsumer, timeout_ms: int = 0) -> None:
        """Poll to keep the group membership; anything fetched anyway is sought back, not lost."""
        self._seek_back(consumer, self._poll(consumer, timeout_ms=timeout_ms))

    def _poll(self, consumer: KafkaConsumer, **options: Any) -> dict:
        """``consumer.poll``. A retriable error (the brokers away: a restart, a rejoin that cannot
        reach the coordinator) is waited out as a poll that brought nothing: said at most every
        30 s, then a second's pause. Nothing is pending at a poll, so nothing is lost."""
        try:
            return consumer.poll(**options)
        except KafkaError as error:
            if not is_retriable(error):
                raise
            if self._away_warnings.take():
                log.warning("Kafka unavailable while polling (%s: %s); trying again", type(error).__name__, error)
            self._stop.wait(1.0)
            return {}

    @staticmethod
    def _seek_back(consumer: KafkaConsumer, polled: dict) -> None:
        for tp, messages in polled.items():
            if messages:
                consumer.seek(tp, messages[0].offset)

    def _begin_warmup(self, consumer: KafkaConsumer) -> None:
        """Seek each newly assigned partition back to replay what another replica processed since
        this one last did (at most ``warmup_records`` before the group's committed offset)."""
        due, self._warm_due = self._warm_due, set()
        for tp in sorted(due & consumer.assignment()):
            try:
                resume_at = consumer.position(tp, timeout_ms=POLL_THREAD_CALL_MS)
                first = consumer.beginning_offsets([tp], timeout_ms=POLL_THREAD_CALL_MS)[tp]
            except KafkaError as error:
                log.warning("no warm-up of %s[%d]: %s", tp.topic, tp.partition, error)
                continue
            if resume_at is None:
                continue
            start = max(first, resume_at - self._warmup_records, self._consumed.get(tp, 0))
            if start < resume_at:
                log.info("warm-up: replaying %s[%d] offsets %d to %d (processed by another replica) into state",
                         tp.topic, tp.partition, start, resume_at - 1)
                consumer.seek(tp, start)
                self._warm_until[tp] = resume_at

    def _replay_warm(self, polled: dict) -> list[RawRecord]:
        """Replay the polled records of partitions still warming up; return the others."""
        warm: list[RawRecord] = []
        fresh: list[RawRecord] = []
        for tp, messages in polled.items():
            until = self._warm_until.get(tp)
            for message in messages:
                (warm if until is not None and message.offset < until else fresh).append(_record(message))
            if until is not None and messages and messages[-1].offset + 1 >= until:
                del self._warm_until[tp]
        if warm and self._warm is not None:
            self._warm(warm)
            self._note_consumed(warm)
            if self._report_warmup is not None:
                for topic in self._topics:
                    replayed = sum(1 for r in warm if r.origin["topic"] == topic)
                    if replayed:
                        self._report_warmup(topic, replayed)
        return fresh

    def _note_consumed(self, records: list[RawRecord]) -> None:
        for record in records:
            tp = TopicPartition(record.origin["topic"], record.origin["partition"])
            self._consumed[tp] = max(self._consumed.get(tp, 0), record.origin["offset"] + 1)

    def _await_catalog(self, consumer: KafkaConsumer, member: bool) -> bool:
        """Wait until the catalog barrier is passed; False when shut down first. As a ``member``
        of the group, pause the assignment and poll meanwhile (a short timeout, so that a
        rebalance can complete) to keep it."""
        assert self._catalog is not None
        self.caught_up.clear()
        started = time.monotonic()
        told = False
        try:
            while not self._catalog.wait_synced(0.25):
                if self._stop.is_set():
                    return False
                if not told and time.monotonic() - started > 5:
                    log.info("waiting for the catalog reader to reach the catalog topic's end before consuming")
                    told = True
                if member:
                    consumer.pause(*consumer.assignment())
                    self._poll_while_paused(consumer, timeout_ms=250)
        finally:
            if member:
                consumer.resume(*consumer.paused())
        # A rebalance during the wait asked for a newer sync (in _assigned) before the wait ended:
        # passing the barrier covers it.
        self._catalog_due = False
        self.caught_up.set()
        if told:
            log.info("catalog current after %.1f s: consuming", time.monotonic() - started)
        return True

    def _assigned(self, assigned: set[TopicPartition]) -> None:
        held = {topic: sorted(tp.partition for tp in assigned if tp.topic == topic) for topic in self._topics}
        log.info("consumer group: assigned %s", _partitions(held) or "no partitions")
        self._held = frozenset(assigned)
        if self._warm is not None:
            self._warm_due = set(assigned)
        if self._report_assignment is not None:
            self._report_assignment({topic: len(partitions) for topic, partitions in held.items()})
        if self._consumer is None or not assigned:
            return
        if self._catalog is not None:
            # Records of these partitions may refer to catalog events produced just before them:
            # nothing of them is judged before the catalog has reached the topic's end of now.
            self.caught_up.clear()
            self._catalog_due = True
            self._catalog.request_sync()
        if self._paused or self._catalog_due:
            self._consumer.pause(*assigned)

    def _revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            held = {topic: sorted(tp.partition for tp in revoked if tp.topic == topic) for topic in self._topics}
            log.info("consumer group: revoked %s (a rebalance)", _partitions(held))
            self._held = self._held - revoked
            self._warm_due -= revoked
            for tp in revoked:
                self._warm_until.pop(tp, None)
        if self._pending:
            self._pending = [r for r in self._pending
                             if TopicPartition(r.origin["topic"], r.origin["partition"]) not in revoked]


def _record(message: Any) -> RawRecord:
    return RawRecord(SOURCE, message.value or b"",
                     {"topic": message.topic, "partition": message.partition, "offset": message.offset},
                     privilege=Privilege.TRUSTED)  # the topic's own ACLs guard who produces to it


def _partitions(held: dict[str, list[int]]) -> str:
    return ", ".join(f"{topic}{partitions}" for topic, partitions in held.items() if partitions)
