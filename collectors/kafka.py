"""Kafka (scaled mode): the traces consumer group, the catalog reader, and the dead-letter topic.

Delivery is at least once. A batch's offsets are committed only after ``process`` returned for
it, which means its effects (catalog rows, samples, dead letters) are stored. When ``process``
refuses the batch (:class:`~monitor.errors.Retryable`: a store is down), the source pauses its
partitions and retries the same batch with back-off, polling meanwhile so that the group keeps it;
it never skips. A rebalance that takes partitions away while a batch waits drops that batch's
records of those partitions: their new owner starts from the last commit and sees them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

from collectors.background import BackgroundSource
from collectors.files import RetryPolicy
from monitor.errors import Retryable
from monitor.pipeline import BatchResult, Processor
from monitor.records import DeadLetter, RawRecord

log = logging.getLogger(__name__)
SOURCE = "kafka"

LagReporter = Callable[[str, int], None]  # (topic, messages not yet consumed)
BACKOFF = RetryPolicy(initial=0.5, maximum=30.0)  # retry a refused batch forever, at most 30 s apart


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
    """Consumes ``topics`` in consumer group ``group_id`` and feeds batches to ``process``."""

    def __init__(
        self,
        consumer_factory: Callable[..., KafkaConsumer],
        topics: list[str],
        process: Processor,
        *,
        max_batch: int = 500,
        retry: RetryPolicy = BACKOFF,
        guard: DeadLetterGuard | None = None,
        report_lag: LagReporter | None = None,
        lag_interval: float = 10.0,
    ) -> None:
        super().__init__()
        self._factory = consumer_factory
        self._topics = topics
        self._process = process
        self._max_batch = max_batch
        self._retry = retry
        self._guard = guard
        self._report_lag = report_lag
        self._lag_interval = lag_interval
        self._consumer: KafkaConsumer | None = None
        self._pending: list[RawRecord] = []
        self._paused = False
        self._next_lag = 0.0

    thread_name = "kafka-source"

    def run(self) -> None:
        """Consume until shut down. Raises :class:`DeadLetterRatioExceeded`."""
        consumer = self._consumer = self._factory()
        consumer.subscribe(self._topics, listener=_Revocations(self))
        try:
            while not self._stop.is_set():
                polled = consumer.poll(timeout_ms=500, max_records=self._max_batch)
                self._pending = [
                    RawRecord(SOURCE, message.value or b"",
                              {"topic": message.topic, "partition": message.partition, "offset": message.offset})
                    for messages in polled.values() for message in messages
                ]
                if self._pending:
                    self._deliver(consumer)
                self._maybe_report_lag(consumer)
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
            consumer.commit(offsets)
        except KafkaError as error:
            # e.g. the group rebalanced meanwhile: the new owner reads these records again
            log.warning("offset commit failed (%s); %d records will be delivered again",
                        type(error).__name__, len(self._pending))
        pending, self._pending = self._pending, []
        if self._guard is not None:
            self._guard.check(len(pending), result.rejected)

    def _process_until_accepted(self, consumer: KafkaConsumer) -> BatchResult | None:
        """Process the pending batch, pausing and retrying while it is refused."""
        delays = self._retry.delays()
        try:
            while self._pending:
                try:
                    return self._process(self._pending)
                except Retryable as error:
                    delay = next(delays, self._retry.maximum)
                    log.warning("batch of %d refused (%s); consumption paused, retry in %.1f s",
                                len(self._pending), error, delay)
                    self._paused = True
                    consumer.pause(*consumer.assignment())
                    if self._stop.wait(delay):
                        return None  # shutting down: left uncommitted, it will be read again
                    self._poll_while_paused(consumer)
            return None
        finally:
            if self._paused:
                self._paused = False
                consumer.resume(*consumer.paused())

    def _poll_while_paused(self, consumer: KafkaConsumer) -> None:
        """Poll to keep the group membership; anything fetched anyway is sought back, not lost."""
        for tp, messages in consumer.poll(timeout_ms=0).items():
            if messages:
                consumer.seek(tp, messages[0].offset)

    def _assigned(self, assigned: set[TopicPartition]) -> None:
        if self._paused and self._consumer is not None and assigned:
            self._consumer.pause(*assigned)

    def _revoked(self, revoked: set[TopicPartition]) -> None:
        if self._pending:
            self._pending = [r for r in self._pending
                             if TopicPartition(r.origin["topic"], r.origin["partition"]) not in revoked]

    def _maybe_report_lag(self, consumer: KafkaConsumer) -> None:
        if self._report_lag is None or time.monotonic() < self._next_lag:
            return
        self._next_lag = time.monotonic() + self._lag_interval
        try:
            assigned = consumer.assignment()
            ends = consumer.end_offsets(list(assigned)) if assigned else {}
            lag: dict[str, int] = dict.fromkeys(self._topics, 0)
            for tp, end in ends.items():
                lag[tp.topic] = lag.get(tp.topic, 0) + max(0, end - consumer.position(tp))
            for topic, value in lag.items():
                self._report_lag(topic, value)
        except KafkaError as error:
            log.warning("could not measure consumer lag: %s", error)


class KafkaCatalogReader(BackgroundSource):
    """Reads every partition of the compacted catalog topic from the beginning, in every replica
    (no consumer group, no commits), so each replica holds the whole catalog."""

    def __init__(self, consumer_factory: Callable[..., KafkaConsumer], topic: str, process: Processor,
                 *, max_batch: int = 500, retry: RetryPolicy = BACKOFF) -> None:
        super().__init__()
        self._factory = consumer_factory
        self._topic = topic
        self._process = process
        self._max_batch = max_batch
        self._retry = retry
        self.caught_up = threading.Event()  # set once the reader reached the end it saw at start

    thread_name = "kafka-catalog"

    def run(self) -> None:
        consumer = self._factory()
        try:
            partitions = self._wait_for_partitions(consumer)
            if partitions is None:
                return
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            targets = {tp: end for tp, end in consumer.end_offsets(partitions).items() if end > 0}
            while not self._stop.is_set():
                polled = consumer.poll(timeout_ms=500, max_records=self._max_batch)
                batch = [RawRecord(SOURCE, m.value, {"topic": m.topic, "partition": m.partition, "offset": m.offset})
                         for messages in polled.values() for m in messages
                         if m.value is not None]  # a tombstone only tells compaction to drop a key
                if batch:
                    self._deliver(batch)
                if not self.caught_up.is_set() and all(consumer.position(tp) >= end for tp, end in targets.items()):
                    self.caught_up.set()
        finally:
            consumer.close(autocommit=False)

    def _wait_for_partitions(self, consumer: KafkaConsumer) -> list[TopicPartition] | None:
        while not self._stop.is_set():
            found = consumer.partitions_for_topic(self._topic)
            if found:
                return [TopicPartition(self._topic, p) for p in sorted(found)]
            self.caught_up.set()  # no catalog topic yet: nothing to catch up with
            self._stop.wait(5)
        return None

    def _deliver(self, batch: list[RawRecord]) -> None:
        delays = self._retry.delays()
        while not self._stop.is_set():
            try:
                self._process(batch)
                return
            except Retryable as error:
                delay = next(delays, self._retry.maximum)
                log.warning("catalog batch refused (%s); retry in %.1f s", error, delay)
                self._stop.wait(delay)


class KafkaDeadLetterSink:
    """Produces each rejected record to the dead-letter topic: the raw bytes (bounded) as the
    value, and source, reason, detail and origin as headers. ``write`` returns once the broker
    acknowledged the batch; a producer error raises :class:`Retryable` (the batch is then retried,
    so a letter that did get through before the error may appear twice: at least once)."""

    def __init__(self, producer: KafkaProducer, topic: str, max_raw_bytes: int, timeout: float = 30.0) -> None:
        self._producer = producer
        self._topic = topic
        self._max_raw_bytes = max_raw_bytes
        self._timeout = timeout

    def write(self, letters: Sequence[DeadLetter]) -> None:
        try:
            futures = [self._send(letter) for letter in letters]
            self._producer.flush(self._timeout)
            for future in futures:
                future.get(timeout=0)
        except KafkaError as error:
            raise Retryable(f"dead-letter topic: {type(error).__name__}") from error

    def _send(self, letter: DeadLetter):
        record = letter.record
        size = len(record.data) if record.size is None else record.size
        headers = [("ragmon.source", record.source.encode()), ("ragmon.reason", letter.reason.value.encode()),
                   ("ragmon.detail", letter.detail.encode()), ("ragmon.size", str(size).encode())]
        headers += [(f"ragmon.origin.{k}", str(v).encode()) for k, v in record.origin.items() if v is not None]
        return self._producer.send(self._topic, value=record.data[: self._max_raw_bytes], headers=headers)

    def shutdown(self) -> None:
        self._producer.close(timeout=10)
