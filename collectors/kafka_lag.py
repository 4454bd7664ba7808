"""Consumer lag (scaled mode), measured on a thread of its own.

Reading end offsets and a group's committed offsets waits on partition leaders and the group
coordinator: seconds while a broker restarts or a group rebalances. The traces consumer must not
wait on them: a member that does not poll within ``max_poll_interval_ms`` is put out of its
group, and a rebalance waits for every member to poll. So the lag is read here, by a consumer
that carries the group's id but never joins it (reading a group's offsets needs no membership).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from ragmon.collectors.background import BackgroundSource
from ragmon.collectors.kafka_calls import CALL_TIMEOUT_MS, kafka_call

log = logging.getLogger(__name__)

LagReporter = Callable[[str, int], None]  # (topic, messages)
MEASURE_DEADLINE = 10.0  # retries of one offset call before this round is given up (tried again next round)


class KafkaLagProbe(BackgroundSource):
    """Every ``interval`` seconds (the first time at once), for each of ``topics``:

    - ``report_group_lag(topic, n)``: the whole group's lag, end offset minus the group's committed
      offset over every partition, held by a live member or not (a dead replica's partitions
      count too);
    - ``report_lag(topic, n)``: the same over the partitions this replica holds, ``held()``.

    A partition the group never committed counts from its first offset. A round that fails (a
    broker away) is logged at WARNING and leaves the gauges as they were until the next round.
    """

    thread_name = "kafka-lag"

    def __init__(self, consumer_factory: Callable[[], KafkaConsumer], topics: list[str],
                 held: Callable[[], frozenset[TopicPartition]], *, report_lag: LagReporter,
                 report_group_lag: LagReporter, interval: float) -> None:
        super().__init__()
        self._factory = consumer_factory
        self._topics = topics
        self._held = held
        self._report_lag = report_lag
        self._report_group_lag = report_group_lag
        self._interval = interval

    def run(self) -> None:
        consumer = self._factory()
        try:
            while not self._stop.is_set():
                try:
                    self.measure(consumer)
                except KafkaError as error:
                    log.warning("could not measure consumer lag: %s", error)
                if self._stop.wait(self._interval):
                    break
        finally:
            consumer.close(autocommit=False)

    def measure(self, consumer: KafkaConsumer) -> None:
        """One round: read the offsets and report both lags of every topic whose partitions are known."""
        held = self._held()
        for topic in self._topics:
            lags = self._partition_lags(consumer, topic)
            if lags is None:
                continue
            self._report_group_lag(topic, sum(lags.values()))
            self._report_lag(topic, sum(lag for tp, lag in lags.items() if tp in held))

    def _partition_lags(self, consumer: KafkaConsumer, topic: str) -> dict[TopicPartition, int] | None:
        partitions = self._call(lambda: consumer.partitions_for_topic(topic), f"reading the partitions of {topic}")
        if not partitions:
            return None  # no such topic yet
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends = self._call(lambda: consumer.end_offsets(tps, timeout_ms=CALL_TIMEOUT_MS),
                          f"reading the end offsets of {topic}")
        starts = self._call(lambda: consumer.beginning_offsets(tps, timeout_ms=CALL_TIMEOUT_MS),
                            f"reading the first offsets of {topic}")
        lags = {}
        for tp in tps:
            committed = self._call(lambda tp=tp: consumer.committed(tp, timeout_ms=CALL_TIMEOUT_MS),
                                   f"reading the group's offset in {topic}")
            lags[tp] = max(0, ends[tp] - (committed if committed is not None else starts[tp]))
        return lags

    def _call(self, call: Callable[[], Any], what: str) -> Any:
        return kafka_call(call, what, deadline=MEASURE_DEADLINE, stop=self._stop)
