"""The catalog reader of a replica (scaled mode): reads every partition of the compacted catalog
topic from the beginning, with no consumer group and no commits, so that each replica holds the
whole catalog; and the barrier the traces consumer (``ragmon.collectors.kafka``) waits on, so that no
trace is judged before the catalog of its moment was read (docs/events.md, catalog first).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from kafka import KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from ragmon.collectors.background import BackgroundSource
from ragmon.collectors.kafka import BACKOFF, SOURCE
from ragmon.collectors.kafka_calls import CALL_DEADLINE, CALL_TIMEOUT_MS, kafka_call
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.core.retry import GaveUp, RetryPolicy, until_accepted

log = logging.getLogger(__name__)
TOPIC_LOOK_INTERVAL = 5.0  # seconds between looks for a catalog topic that does not exist (yet)


class KafkaCatalogReader(BackgroundSource):
    """Reads every partition of the compacted catalog topic from the beginning, in every replica
    (no consumer group, no commits), so each replica holds the whole catalog.

    It is its replica's :class:`CatalogBarrier`. ``caught_up`` is set once the reader has
    delivered everything up to the end offsets the topic had when it started, and cleared by each
    :meth:`request_sync` until it has delivered up to the end offsets of that moment too. A
    catalog topic that does not exist counts as read (it is looked for again every few seconds
    and read from its beginning once it appears); tombstones are skipped, and count as read.
    """

    def __init__(self, consumer_factory: Callable[..., KafkaConsumer], topic: str, process: Processor,
                 *, max_batch: int = 500, retry: RetryPolicy = BACKOFF) -> None:
        super().__init__()
        self._factory = consumer_factory
        self._topic = topic
        self._process = process
        self._max_batch = max_batch
        self._retry = retry
        self.caught_up = threading.Event()
        self._lock = threading.Lock()  # orders request_sync against setting caught_up
        self._requested = 1  # requests so far, the reader's start being the first
        self._taken = 0  # the request whose end offsets are the targets (reader thread only)
        self._targets: dict[TopicPartition, int] = {}  # reader thread only
        self._assigned: list[TopicPartition] = []  # reader thread only

    thread_name = "kafka-catalog"

    def request_sync(self) -> None:
        with self._lock:
            self._requested += 1
            self.caught_up.clear()

    def wait_synced(self, timeout: float) -> bool:
        return self.caught_up.wait(timeout)

    def ready(self) -> bool:
        return self.caught_up.is_set()

    def run(self) -> None:
        consumer = self._factory()
        next_look = 0.0
        try:
            while not self._stop.is_set():
                with self._lock:
                    requested = self._requested
                if requested != self._taken or (not self._assigned and time.monotonic() >= next_look):
                    self._take_targets(consumer, requested)
                    next_look = time.monotonic() + TOPIC_LOOK_INTERVAL
                if not self._assigned:
                    self._stop.wait(0.2)
                    continue
                polled = consumer.poll(timeout_ms=200 if self.caught_up.is_set() else 500, max_records=self._max_batch)
                batch = [RawRecord(SOURCE, m.value, {"topic": m.topic, "partition": m.partition, "offset": m.offset},
                                   privilege=Privilege.TRUSTED)
                         for messages in polled.values() for m in messages
                         if m.value is not None]  # a tombstone only tells compaction to drop a key
                if batch:
                    self._deliver(batch)
                if not self._stop.is_set() and not self.caught_up.is_set():
                    self._mark_if_reached(consumer)
        finally:
            consumer.close(autocommit=False)

    def _take_targets(self, consumer: KafkaConsumer, request: int) -> None:
        """Make the topic's end offsets of now the targets of ``request``, first assigning any
        partition not assigned yet (read from its beginning). A failure is logged and leaves the
        request pending: the next round tries again, polling in between."""
        try:
            found = kafka_call(lambda: consumer.partitions_for_topic(self._topic),
                               f"listing the partitions of {self._topic}", deadline=CALL_DEADLINE, stop=self._stop)
            new = [TopicPartition(self._topic, p) for p in sorted(found or ())
                   if TopicPartition(self._topic, p) not in self._assigned]
            if new:
                self._assigned = [*self._assigned, *new]
                consumer.assign(self._assigned)
                consumer.seek_to_beginning(*new)
            partitions = self._assigned
            ends = kafka_call(lambda: consumer.end_offsets(partitions, timeout_ms=CALL_TIMEOUT_MS),
                              f"reading the end offsets of {self._topic}", deadline=CALL_DEADLINE,
                              stop=self._stop) if partitions else {}
        except KafkaError as error:
            if not self._stop.is_set():
                log.warning("catalog reader: %s; trying again", error)
            return
        self._targets = {tp: end for tp, end in ends.items() if end > 0}
        self._taken = request
        self._mark_if_reached(consumer)

    def _mark_if_reached(self, consumer: KafkaConsumer) -> None:
        """Set ``caught_up`` when every position reached its target and no request came since."""
        try:
            for tp, end in self._targets.items():
                position = kafka_call(lambda tp=tp: consumer.position(tp, timeout_ms=CALL_TIMEOUT_MS),
                                      f"reading the position in {self._topic}", deadline=CALL_DEADLINE,
                                      stop=self._stop)
                if position is None or position < end:
                    return
        except KafkaError as error:
            if not self._stop.is_set():
                log.warning("catalog reader: %s; trying again", error)
            return
        with self._lock:
            if self._taken == self._requested:
                self.caught_up.set()

    def _deliver(self, batch: list[RawRecord]) -> None:
        """Process a batch, retrying while it is refused, until it is accepted or the reader stops."""
        if self._stop.is_set():
            return
        # GaveUp means stopping: the batch was not acknowledged, and is read again at the next start
        with contextlib.suppress(GaveUp):
            until_accepted(lambda: self._process(batch), self._retry, lambda delay: not self._stop.wait(delay),
                           lambda error, delay: log.warning("catalog batch refused (%s); retry in %.1f s",
                                                            error, delay))
