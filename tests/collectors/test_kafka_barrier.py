"""Catalog first and warm-up, unit level: the traces consumer against a fake catalog barrier and a
fake group, the catalog reader's barrier against a fake consumer. (The real broker and `ragmon
serve`: test_kafka_catalog_first.py, test_kafka_scaled.py.)"""

from __future__ import annotations

import threading
import time
from collections import namedtuple

from kafka import errors
from kafka.structs import TopicPartition

from ragmon.collectors.kafka import KafkaSource
from ragmon.collectors.kafka_catalog import KafkaCatalogReader
from ragmon.monitor.core.pipeline import BatchResult
from ragmon.monitor.core.retry import RetryPolicy
from tests.collectors.kafka_support import wait_for

Message = namedtuple("Message", "topic partition offset value")
TOPIC = "traces"


class FakeBarrier:
    """A catalog barrier the test opens by hand; ``request_sync`` closes it."""

    def __init__(self) -> None:
        self.synced = threading.Event()
        self.requests = 0

    def request_sync(self) -> None:
        self.requests += 1
        self.synced.clear()

    def wait_synced(self, timeout: float) -> bool:
        return self.synced.wait(timeout)


class FakeGroupConsumer:
    """A group consumer of one topic that is assigned all its partitions at the first poll after
    ``subscribe`` (and again after :meth:`rebalance`). Like an older client, the poll that assigns
    also returns records of the new partitions, fetched before the listener could pause them."""

    def __init__(self, logs: dict[int, list[bytes]]) -> None:
        self.logs = logs
        self.positions: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.assigned: set[TopicPartition] = set()
        self.paused_set: set[TopicPartition] = set()
        self.listener = None
        self.subscribed = False
        self.polls = 0
        self.polls_while_paused = 0
        self.seeks = 0
        self._assign_next = False
        self.lock = threading.Lock()

    def subscribe(self, topics, listener) -> None:
        self.subscribed, self.listener, self._assign_next = True, listener, True

    def rebalance(self) -> None:
        self._assign_next = True

    def poll(self, timeout_ms=0, max_records=500):
        with self.lock:
            self.polls += 1
            fetchable = self.assigned - self.paused_set
            if self._assign_next:
                self._assign_next = False
                self.listener.on_partitions_revoked(set(self.assigned))
                self.assigned = {TopicPartition(TOPIC, p) for p in self.logs}
                self.paused_set &= self.assigned
                self.positions = {tp: self.committed.get(tp, 0) for tp in self.assigned}
                fetchable = set(self.assigned)  # fetched before the listener ran
                self.listener.on_partitions_assigned(set(self.assigned))
            elif self.assigned and not fetchable:
                self.polls_while_paused += 1
            polled = {}
            for tp in sorted(fetchable):
                start = self.positions[tp]
                values = self.logs[tp.partition][start:start + max_records]
                if values:
                    polled[tp] = [Message(tp.topic, tp.partition, start + n, v) for n, v in enumerate(values)]
                    self.positions[tp] = start + len(values)
        if not polled:
            time.sleep(min(timeout_ms, 20) / 1000)
        return polled

    def assignment(self):
        return set(self.assigned)

    def pause(self, *partitions) -> None:
        self.paused_set |= set(partitions)

    def resume(self, *partitions) -> None:
        self.paused_set -= set(partitions)

    def paused(self):
        return set(self.paused_set)

    def seek(self, tp, offset) -> None:
        self.seeks += 1
        self.positions[tp] = offset

    def commit(self, offsets, timeout_ms=None) -> None:
        self.committed.update({tp: meta.offset for tp, meta in offsets.items()})

    def end_offsets(self, partitions, timeout_ms=None):
        return {tp: len(self.logs[tp.partition]) for tp in partitions}

    def beginning_offsets(self, partitions, timeout_ms=None):
        return dict.fromkeys(partitions, 0)

    def position(self, tp, timeout_ms=None):
        return self.positions[tp]

    def close(self, autocommit=False) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    def __call__(self, batch):
        self.values.extend(record.data for record in batch)
        return BatchResult(len(batch), 0)


def test_the_consumer_joins_only_with_a_current_catalog_and_waits_again_after_an_assignment():
    logs = {0: [b"a0", b"a1", b"a2"], 1: [b"b0", b"b1"]}
    consumer, barrier, processed = FakeGroupConsumer(logs), FakeBarrier(), Recorder()
    source = KafkaSource(lambda: consumer, [TOPIC], processed, catalog=barrier)
    source.start()
    try:
        time.sleep(0.4)
        assert not consumer.subscribed and consumer.polls == 0  # not in the group before the catalog is read
        assert not source.caught_up.is_set()  # /readyz: not ready
        barrier.synced.set()
        # the first poll assigns the partitions: the source asks for the catalog of now and waits
        wait_for(lambda: barrier.requests == 1, 5, "a sync requested at the assignment")
        wait_for(lambda: consumer.polls_while_paused >= 3, 5, "polls that keep the membership while waiting")
        assert processed.values == [] and not source.caught_up.is_set()
        assert consumer.paused() == consumer.assignment()
        assert consumer.seeks == 2  # what the assigning poll returned is sought back, not lost
        barrier.synced.set()
        wait_for(lambda: len(processed.values) == 5, 5, "every record processed")
        assert source.caught_up.is_set() and consumer.paused() == set()

        # a rebalance: the same again, and nothing is judged before the barrier opens
        logs[0].append(b"a3")
        consumer.rebalance()
        wait_for(lambda: barrier.requests == 2, 5, "a sync requested at the new assignment")
        time.sleep(0.3)
        assert processed.values == [b"a0", b"a1", b"a2", b"b0", b"b1"] and not source.caught_up.is_set()
        barrier.synced.set()
        wait_for(lambda: len(processed.values) == 6, 5, "the new record processed")
    finally:
        assert source.shutdown(timeout=5)
    assert sorted(processed.values) == sorted(v for log in logs.values() for v in log)  # each once
    assert consumer.committed == {TopicPartition(TOPIC, 0): 4, TopicPartition(TOPIC, 1): 2}
    assert source.error is None


class Warmed(Recorder):
    def __call__(self, batch):
        self.values.extend(record.data for record in batch)
        return len(batch)


def test_records_another_replica_processed_are_replayed_into_state_before_the_rest():
    logs = {0: [f"a{i}".encode() for i in range(10)], 1: [b"b0", b"b1"]}
    consumer, processed, warmed = FakeGroupConsumer(logs), Recorder(), Warmed()
    consumer.committed = {TopicPartition(TOPIC, 0): 8}  # another replica processed a0 to a7
    source = KafkaSource(lambda: consumer, [TOPIC], processed, warm=warmed, warmup_records=5)
    source.start()
    try:
        wait_for(lambda: len(processed.values) == 4, 5, "the records after the committed offset processed")
        assert sorted(processed.values) == [b"a8", b"a9", b"b0", b"b1"]
        assert warmed.values == [b"a3", b"a4", b"a5", b"a6", b"a7"]  # at most warmup_records before it
        # partitions handed back to the replica that processed them: nothing to replay
        logs[0].append(b"a10")
        consumer.rebalance()
        wait_for(lambda: len(processed.values) == 5, 5, "the new record processed")
        assert len(warmed.values) == 5
        # another replica held partition 1 meanwhile and processed b2 and b3: only those are replayed
        logs[1] += [b"b2", b"b3", b"b4"]
        consumer.committed[TopicPartition(TOPIC, 1)] = 4
        consumer.rebalance()
        wait_for(lambda: len(processed.values) == 6, 5, "the record after the new committed offset processed")
        assert processed.values[-1] == b"b4" and warmed.values[5:] == [b"b2", b"b3"]
    finally:
        assert source.shutdown(timeout=5)
    assert source.error is None


def test_a_shutdown_while_waiting_for_the_catalog_is_prompt():
    consumer, barrier = FakeGroupConsumer({0: [b"x"]}), FakeBarrier()
    source = KafkaSource(lambda: consumer, [TOPIC], Recorder(), catalog=barrier)
    source.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert source.shutdown(timeout=5)
    assert time.monotonic() - started < 1.5 and not consumer.subscribed


def test_without_a_barrier_the_consumer_starts_at_once():
    consumer, processed = FakeGroupConsumer({0: [b"x", b"y"]}), Recorder()
    source = KafkaSource(lambda: consumer, [TOPIC], processed, retry=RetryPolicy(initial=0.01))
    assert source.caught_up.is_set()
    source.start()
    try:
        wait_for(lambda: processed.values == [b"x", b"y"], 5, "both records")
    finally:
        assert source.shutdown(timeout=5)


class FakeCatalogConsumer:
    """A consumer without a group reading the catalog topic; ``logs`` None: no such topic."""

    def __init__(self, logs: dict[int, list[bytes | None]] | None, end_offset_errors: int = 0) -> None:
        self.logs = logs
        self.positions: dict[TopicPartition, int] = {}
        self.end_offset_errors = end_offset_errors
        self.lock = threading.Lock()

    def partitions_for_topic(self, topic):
        return set(self.logs) if self.logs is not None else set()

    def assign(self, partitions) -> None:
        self.positions = {tp: self.positions.get(tp, 0) for tp in partitions}

    def seek_to_beginning(self, *partitions) -> None:
        for tp in partitions:
            self.positions[tp] = 0

    def end_offsets(self, partitions, timeout_ms=None):
        if self.end_offset_errors:
            self.end_offset_errors -= 1
            raise errors.NotLeaderForPartitionError()
        with self.lock:
            return {tp: len(self.logs[tp.partition]) for tp in partitions}

    def position(self, tp, timeout_ms=None):
        return self.positions[tp]

    def poll(self, timeout_ms=0, max_records=500):
        polled = {}
        with self.lock:
            for tp, start in self.positions.items():
                values = self.logs[tp.partition][start:start + min(max_records, 7)]
                if values:
                    polled[tp] = [Message(tp.topic, tp.partition, start + n, v) for n, v in enumerate(values)]
                    self.positions[tp] = start + len(values)
        if not polled:
            time.sleep(0.01)
        return polled

    def close(self, autocommit=False) -> None:
        pass


def reading(consumer: FakeCatalogConsumer, process) -> KafkaCatalogReader:
    reader = KafkaCatalogReader(lambda: consumer, "cat", process)
    reader.start()
    return reader


def test_the_reader_is_caught_up_once_it_delivered_up_to_the_end_offsets_of_its_start():
    logs = {0: [b"%d" % n for n in range(100)], 1: [b"x", None, b"y", None]}  # None: tombstones
    processed: list = []

    def process(batch):
        time.sleep(0.002)
        processed.extend(batch)
        return BatchResult(len(batch), 0)

    # retriable errors from the broker at first: tried again
    reader = reading(FakeCatalogConsumer(logs, end_offset_errors=2), process)
    try:
        assert reader.wait_synced(5)
        assert len(processed) == 102  # tombstones skipped, and counted as read
    finally:
        assert reader.shutdown(timeout=5)
    assert reader.error is None


def test_a_sync_request_waits_for_what_was_produced_before_it():
    consumer = FakeCatalogConsumer({0: [b"a"] * 10})
    processed: list = []

    def process(batch):
        processed.extend(batch)
        return BatchResult(len(batch), 0)

    reader = reading(consumer, process)
    try:
        assert reader.wait_synced(5)
        with consumer.lock:
            consumer.logs[0].extend([b"b"] * 500)
        reader.request_sync()
        assert not reader.caught_up.is_set()  # /readyz: not ready from the request on
        assert reader.wait_synced(5)
        assert len(processed) >= 510
    finally:
        assert reader.shutdown(timeout=5)


def test_an_absent_or_empty_catalog_topic_counts_as_read():
    for logs in (None, {0: []}, {0: [None, None]}):
        reader = reading(FakeCatalogConsumer(logs), lambda batch: BatchResult(len(batch), 0))
        try:
            assert reader.wait_synced(5), logs
            reader.request_sync()
            assert reader.wait_synced(5), logs
        finally:
            assert reader.shutdown(timeout=5)


class FlakyGroupConsumer(FakeGroupConsumer):
    """Polls fail as kafka-python's do while the brokers are away (a rejoin after a revocation
    that cannot reach the coordinator), for the first ``failures`` polls after ``after``."""

    def __init__(self, logs: dict[int, list[bytes]], after: int, failures: int) -> None:
        super().__init__(logs)
        self.after, self.failures, self.failed = after, failures, 0

    def poll(self, timeout_ms=0, max_records=500):
        if self.polls >= self.after and self.failed < self.failures:
            self.failed += 1
            self.polls += 1
            raise errors.KafkaConnectionError("111 ECONNREFUSED")
        return super().poll(timeout_ms, max_records)


def test_polls_failing_while_the_brokers_are_away_are_waited_out_and_nothing_is_lost(caplog):
    consumer, processed = FlakyGroupConsumer({0: [b"a", b"b", b"c"]}, after=1, failures=3), Recorder()
    consumer.logs[0] = [b"a"]  # one record before the outage, two after
    source = KafkaSource(lambda: consumer, [TOPIC], processed, max_batch=1, retry=RetryPolicy(initial=0.01))
    source.start()
    try:
        wait_for(lambda: consumer.failed == 3, 10, "the failing polls")
        consumer.logs[0] = [b"a", b"b", b"c"]
        wait_for(lambda: processed.values == [b"a", b"b", b"c"], 10, "every record")
        assert source.error is None
    finally:
        assert source.shutdown(timeout=5)
    assert "Kafka unavailable while polling (KafkaConnectionError" in caplog.text


def test_a_poll_failing_for_good_still_stops_the_source_loudly():
    class Broken(FakeGroupConsumer):
        def poll(self, timeout_ms=0, max_records=500):
            raise errors.TopicAuthorizationFailedError("not allowed")

    source = KafkaSource(lambda: Broken({0: [b"a"]}), [TOPIC], Recorder())
    source.start()
    wait_for(lambda: source.error is not None, 5, "the source to stop")
    assert isinstance(source.error, errors.TopicAuthorizationFailedError)
    source.shutdown(timeout=5)
