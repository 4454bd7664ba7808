"""Kafka against the real broker: the Source contract, volume with dead letters, a killed consumer,
a consumer group splitting partitions, and a broker restart."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import signal
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Sequence

import msgspec
import pytest
from kafka import KafkaConsumer
from prometheus_client import CollectorRegistry

from ragmon.collectors.kafka import DeadLetterGuard, DeadLetterRatioExceeded, KafkaSource
from ragmon.monitor.app.simulate import CORRUPTIONS, Incident, Simulator, corrupt
from ragmon.monitor.app.wiring import build_runtime, build_sources, caller_key
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.retry import RetryPolicy
from tests.clean_run import clean_run_samples, leaks_of
from tests.collectors.contract import (  # noqa: F401  (the contract tests run here)
    SourceHarness,
    test_a_refused_batch_is_retried_and_nothing_is_lost,
    test_invalid_input_is_dead_lettered_then_acknowledged,
    test_nothing_is_acknowledged_while_processing_is_refused,
    test_records_are_acknowledged_only_after_process_returned,
)
from tests.collectors.kafka_support import (
    committed,
    encode,
    end_offsets,
    key_of,
    new_topic,
    produce,
    read_all,
    wait_for,
)
from tests.ragmon_process import RagmonServer, collected_as_served, scraped
from tests.services.harness import Kafka

pytestmark = pytest.mark.integration


def group_consumer(kafka, group: str, max_batch: int = 500):
    return lambda: KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=max_batch)


class KafkaHarness(SourceHarness):
    def __init__(self, kafka) -> None:
        self.kafka = kafka
        self.topic = ""
        self.group = ""

    def run(self, payloads: Sequence[bytes], process: Processor) -> None:
        self.topic = new_topic(self.kafka)
        self.group = f"contract-{uuid.uuid4().hex[:8]}"
        produce(self.kafka, self.topic, payloads)
        source = KafkaSource(group_consumer(self.kafka, self.group, self.batch_size), [self.topic], process,
                             max_batch=self.batch_size, retry=RetryPolicy(initial=0.05, maximum=0.2))
        source.start()
        try:
            # A source whose batches are refused never acknowledges them all; the test judges what it did.
            with contextlib.suppress(AssertionError):
                wait_for(lambda: self.acknowledged() == len(payloads), 12, "every record acknowledged")
        finally:
            assert source.shutdown(timeout=15)
        assert source.error is None

    def acknowledged(self) -> int:
        return committed(self.kafka, self.group, self.topic).get(0, 0)


@pytest.fixture
def source_harness(kafka) -> SourceHarness:
    return KafkaHarness(kafka)


def settings_for(kafka, tmp_path, **kafka_keys):
    environ = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / f'{uuid.uuid4().hex[:6]}.db'}",
               "RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]',
               "RAGMON_KAFKA__LAG_INTERVAL_SECONDS": "0.5"}
    environ.update({f"RAGMON_KAFKA__{k.upper()}": str(v) for k, v in kafka_keys.items()})
    return load_settings(environ=environ)


def simulated(traces: int, bad_every: int = 0, seed: int = 5) -> tuple[list, list, Counter, Simulator]:
    """Simulator traffic as Kafka values and keys; every ``bad_every``-th trace broken."""
    simulator = Simulator(seed=seed, start=time.time() - 5 * 86400, rate=5.0)
    values, keys, broken, trace_keys = [], [], Counter(), {}
    kinds = sorted(CORRUPTIONS)
    for n, event in enumerate(simulator.traffic(traces)):
        key = key_of(event, trace_keys)
        if bad_every and event["type"] == "trace" and n % bad_every == 0:
            how = kinds[sum(broken.values()) % len(kinds)]
            values.append(corrupt(event, how, msgspec.json.encode))
            broken[CORRUPTIONS[how]] += 1
        else:
            values.append(encode(event))
        keys.append(key)
    return values, keys, broken, simulator


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-pipeline")
def test_fifty_thousand_events_with_malformed_ones_over_six_partitions(kafka, tmp_path):
    topic, dlq, catalog = new_topic(kafka, 6, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    values, keys, broken, _ = simulated(46_300, bad_every=100)
    total = produce(kafka, topic, values, keys)
    assert total >= 50_000 and 0.009 < sum(broken.values()) / total < 0.011
    group = f"g-{uuid.uuid4().hex[:6]}"
    settings = settings_for(kafka, tmp_path, traces_topic=topic, dead_letter_topic=dlq, catalog_topic=catalog,
                            group_id=group)
    runtime = build_runtime(settings, registry=CollectorRegistry())
    sources = build_sources(runtime)
    with collected_as_served():  # the consumer runs in this process: its collector as in `ragmon serve`
        for source in sources:
            source.start()
        try:
            ends = end_offsets(kafka, topic)
            wait_for(lambda: committed(kafka, group, topic) == ends, 180, "the group to commit the log end")
            accepted, rejected = runtime.pipeline.stats.snapshot()
            assert sum(accepted.values()) == total - sum(broken.values())
            assert {reason: n for (_, reason), n in rejected.items()} == dict(broken)
            lag = wait_for(lambda: [s for s in runtime.registry.collect() if s.name == "ragmon_consumer_lag_messages"
                                    and s.samples and s.samples[0].value == 0], 10, "the lag gauge to reach 0")
            assert lag[0].samples[0].labels == {"topic": topic}
        finally:
            for source in sources:
                assert source.shutdown(timeout=30)
            runtime.close()
    letters = read_all(kafka, dlq)
    assert Counter(dict(m.headers)["ragmon.reason"].decode() for m in letters) == broken
    for message in letters:
        headers = dict(message.headers)
        assert headers["ragmon.origin.topic"].decode() == topic and 0 <= int(headers["ragmon.origin.partition"]) < 6
        assert int(headers["ragmon.origin.offset"]) >= 0
    # each letter names its record by the keyed hash of its exact bytes, and keeps no raw bytes
    key = caller_key(settings).encode()
    assert Counter(json.loads(m.value)["raw_hmac"] for m in letters) == Counter(
        hmac.new(key, v, hashlib.sha256).hexdigest() for v in values if not is_valid(v))
    assert all("raw_encrypted" not in json.loads(m.value) for m in letters)


def is_valid(value: bytes) -> bool:
    from ragmon.monitor.config.pipeline import Limits
    from ragmon.monitor.core.decode import Decoder
    from ragmon.monitor.core.errors import InvalidInput

    try:
        Decoder(Limits(), time.time).decode(value)
        return True
    except InvalidInput:
        return False


def test_a_killed_consumer_loses_nothing(kafka, tmp_path):
    """SIGKILL mid-stream, restart: every document event (each persisted in the catalog table)
    is there, every leak is sampled exactly once as in a clean run, every malformed record is in
    the dead-letter topic, the group ends at the log end."""
    topic, dlq, catalog = new_topic(kafka, 6, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    documents = [{"type": "document", "doc_id": f"doc-{i:05d}", "tenant": "acme", "version": "1",
                  "modified_at": time.time() - 3600} for i in range(10_000)]
    values = [encode(d) for d in documents]
    bad_offsets_expected = 0
    for i in range(0, len(values), 100):
        values[i] = b'{"type": "document", "doc_id": '
        bad_offsets_expected += 1
    keys = [f"k{i % 97}".encode() for i in range(len(values))]
    leaking = Simulator(seed=17, start=time.time() - 2 * 86400, rate=5.0,
                        incidents=[Incident("leak", "globex", "handbook", start=0, rate=0.3)])
    traces = [e for e in leaking.traffic(3000) if e["type"] == "trace"]
    expected_leaks = leaks_of(clean_run_samples([encode(t) for t in traces], tmp_path / "clean"))
    assert len(expected_leaks) > 50
    trace_keys: dict = {}
    values += [encode(t) for t in traces]
    keys += [key_of(t, trace_keys) for t in traces]
    produce(kafka, topic, values, keys)
    group = f"g-{uuid.uuid4().hex[:6]}"
    env = {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
           "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq, "RAGMON_KAFKA__CATALOG_TOPIC": catalog,
           "RAGMON_KAFKA__GROUP_ID": group, "RAGMON_KAFKA__MAX_BATCH": "200"}
    first = RagmonServer(tmp_path, **env).start()
    wait_for(lambda: sum(committed(kafka, group, topic).values()) > 2000, 60, "some progress")
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    done_before = sum(committed(kafka, group, topic).values())
    assert done_before < len(values), "the consumer finished before it could be killed"
    with RagmonServer(tmp_path, **env):
        ends = end_offsets(kafka, topic)
        wait_for(lambda: committed(kafka, group, topic) == ends, 120, "the restarted consumer to finish")
    with sqlite3.connect(tmp_path / "ragmon.db") as db:
        stored = {row[0] for row in db.execute("select doc_id from catalog_document")}
    expected = {d["doc_id"] for i, d in enumerate(documents) if i % 100 != 0}
    assert stored == expected
    with sqlite3.connect(tmp_path / "ragmon.db") as db:
        rows = db.execute("select trace_id, strata from sample").fetchall()
    leaks = [trace_id for trace_id, strata in rows if "permission_violation" in strata]
    assert sorted(leaks) == sorted(expected_leaks)  # none lost, none twice
    letters = read_all(kafka, dlq)
    origins = {(int(dict(m.headers)["ragmon.origin.partition"]), int(dict(m.headers)["ragmon.origin.offset"]))
               for m in letters}
    assert len(origins) == bad_offsets_expected  # each malformed record dead-lettered (at least once)
    # the value keeps a keyed hash and the redacted text, not the record's bytes (keep_raw is off)
    assert all(set(json.loads(m.value)) in ({"raw_hmac", "text"}, {"raw_hmac", "text_omitted"}) for m in letters)


def test_two_consumers_split_the_partitions_and_keying_keeps_rephrases_together(kafka, tmp_path):
    topic, dlq, catalog = new_topic(kafka, 6, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    values, keys, _, simulator = simulated(8000, seed=9)
    injected = sum(n for key, n in simulator.injected.items() if key[0] == "rephrase")
    # the topic's partitions have leaders before anyone subscribes: an assignment made from
    # metadata without them gives nobody anything until the next metadata refresh (minutes)
    end_offsets(kafka, topic)
    group = f"g-{uuid.uuid4().hex[:6]}"
    runtimes, sources = [], []
    for _ in range(2):
        settings = settings_for(kafka, tmp_path, traces_topic=topic, dead_letter_topic=dlq, catalog_topic=catalog,
                                group_id=group, max_batch=100)
        runtime = build_runtime(settings, registry=CollectorRegistry())
        runtimes.append(runtime)
        sources.extend(build_sources(runtime))
    for source in sources:
        source.start()
    try:
        # both members first (a member that joins after the other consumed everything gets nothing)
        held = [lambda r=r: metric_total(r.registry, "ragmon_kafka_assigned_partitions") for r in runtimes]
        wait_for(lambda: [h() for h in held] == [3, 3], 60, "three partitions each")
        produce(kafka, topic, values, keys)
        ends = end_offsets(kafka, topic)
        wait_for(lambda: committed(kafka, group, topic) == ends, 120, "the group to finish")
    finally:
        for source in sources:
            source.shutdown(timeout=30)
    traces = [sum(n for (_, kind), n in r.pipeline.stats.snapshot()[0].items() if kind == "trace") for r in runtimes]
    assert all(n > 0 for n in traces), f"both consumers should own partitions: {traces}"
    assert sum(traces) == sum(1 for v in values if b'"type":"trace"' in v)
    found = sum(metric_total(r.registry, "ragmon_rephrases_total") for r in runtimes)
    assert injected <= found <= injected * 1.3  # chance repeats by the same caller count too
    for runtime in runtimes:
        runtime.close()


def metric_total(registry, name: str) -> float:
    from ragmon.exporters.prometheus import metric_sum

    return metric_sum(registry, name)


def test_a_broker_restart_mid_stream_loses_nothing(tmp_path):
    with Kafka() as kafka:
        topic, dlq, catalog = new_topic(kafka, 3, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
        values, keys, _, _ = simulated(6000, seed=13)
        half = len(values) // 2
        produce(kafka, topic, values[:half], keys[:half])
        group = f"g-{uuid.uuid4().hex[:6]}"
        settings = settings_for(kafka, tmp_path, traces_topic=topic, dead_letter_topic=dlq, catalog_topic=catalog,
                                group_id=group, max_batch=100)
        runtime = build_runtime(settings, registry=CollectorRegistry())
        sources = build_sources(runtime)
        for source in sources:
            source.start()
        try:
            wait_for(lambda: sum(committed(kafka, group, topic).values()) > 500, 60, "some progress")
            kafka.halt()
            time.sleep(20)
            kafka.resume()
            produce(kafka, topic, values[half:], keys[half:])
            ends = end_offsets(kafka, topic)
            wait_for(lambda: committed(kafka, group, topic) == ends, 180, "the consumer to recover and finish")
            assert all(source.error is None for source in sources)
        finally:
            for source in sources:
                source.shutdown(timeout=30)
        accepted, _ = runtime.pipeline.stats.snapshot()
        assert sum(accepted.values()) >= len(values)  # at least once: a batch in flight may come twice
        runtime.close()


def test_a_broken_producer_stops_the_consumer_loudly(kafka):
    topic = new_topic(kafka)
    produce(kafka, topic, [b"garbage"] * 300 + [b"{}"] * 10)
    group = f"g-{uuid.uuid4().hex[:6]}"

    def process(batch):
        from ragmon.monitor.core.pipeline import BatchResult

        return BatchResult(0, len(batch))

    source = KafkaSource(group_consumer(kafka, group, 50), [topic], process, max_batch=50,
                         guard=DeadLetterGuard(0.5, 200))
    source.start()
    wait_for(lambda: source.error is not None, 30, "the source to stop")
    assert isinstance(source.error, DeadLetterRatioExceeded)
    assert "rejected" in str(source.error)
    assert sum(committed(kafka, group, topic).values()) < 310


def test_otlp_traces_can_be_forwarded_to_the_traces_topic_keyed_by_caller(kafka, tmp_path):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from ragmon.monitor.app.wiring import build_otlp
    from tests.collectors.test_otlp import full_trace, in_memory_provider

    topic = new_topic(kafka, 3, "traces")
    settings = settings_for(kafka, tmp_path, traces_topic=topic, dead_letter_topic=new_topic(kafka, 1, "dlq"))
    settings = settings.model_copy(update={"otlp": settings.otlp.model_copy(update={"forward_to_kafka": True})})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    receiver = build_otlp(runtime)
    provider, exporter = in_memory_provider()
    from ragmon.collectors.emitter import Emitter, OpenInferenceTransport

    trace_id = full_trace(Emitter(OpenInferenceTransport(provider)))
    answer = receiver.receive(encode_spans(exporter.get_finished_spans()).SerializeToString(),
                              "application/x-protobuf")
    assert answer.status == 200
    receiver.shutdown(10)  # delivers the trace still being assembled
    [message] = read_all(kafka, topic)
    assert message.key == b"u-123"
    event = msgspec.json.decode(message.value)
    assert event["trace_id"] == trace_id and event["caller"]["id"] == "u-123"
    assert runtime.pipeline.stats.snapshot() == ({}, {})  # forwarded, not processed here
    runtime.close()


def test_record_checksums_are_computed_natively():
    """kafka-python checks every record batch's CRC-32C; without the `crc32c` package it does so
    in pure Python, which caps a consumer at a few thousand 3 KB messages per second."""
    from kafka.record import util

    assert util.crc32c_c is not None and util._crc32c is util.crc32c_c
    assert util.calc_crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_traces_produced_twice_are_counted_once(kafka, tmp_path):
    """An at-least-once producer (retries without idempotence) writes some traces twice: the
    second copies are acknowledged and counted as duplicates, not as answers, leaks or samples."""
    topic, dlq, catalog = new_topic(kafka, 3, "twice"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    now = time.time()
    traces = [{"type": "trace", "trace_id": f"twice-{n}", "time": now - 60, "query": f"q{n}", "tenant": "acme",
               "index": {"name": "policies"}, "caller": {"id": f"u-{n}", "groups": ["staff"]},
               "answer": {"text": "yes", "citations": []},
               "context": [{"id": f"payroll#{n}", "doc_id": "payroll", "acl": ["group:hr"]}]} for n in range(150)]
    values = [encode(t) for t in traces]
    keys = [f"u-{n}".encode() for n in range(150)]
    produce(kafka, topic, values + values, keys + keys)
    group = f"g-{uuid.uuid4().hex[:6]}"
    env = {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
           "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq, "RAGMON_KAFKA__CATALOG_TOPIC": catalog,
           "RAGMON_KAFKA__GROUP_ID": group}
    with RagmonServer(tmp_path, **env) as server:
        ends = end_offsets(kafka, topic)
        wait_for(lambda: committed(kafka, group, topic) == ends, 60, "the consumer to reach the end")
        assert scraped(server.url, "ragmon_answers_total") == 150
        assert scraped(server.url, "ragmon_permission_violations_total", stage="context") == 150
        assert scraped(server.url, "ragmon_duplicate_events_total", source="kafka") == 150
        assert scraped(server.url, "ragmon_samples_total", stratum="permission_violation") == 150


def test_a_killed_replicas_partitions_move_within_the_session_timeout_and_its_backlog_shows_meanwhile(
        kafka, tmp_path):
    """Two replicas share four partitions; one is SIGKILLed. Until the group notices (the session
    timeout), the survivor's group-lag gauge counts the backlog piling up in the dead replica's
    partitions; then the survivor is assigned all four, says so in its log, and consumes them."""
    topic, dlq, catalog = new_topic(kafka, 4, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    session_ms = 10_000
    env = {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
           "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq, "RAGMON_KAFKA__CATALOG_TOPIC": catalog,
           "RAGMON_KAFKA__GROUP_ID": f"g-{uuid.uuid4().hex[:6]}", "RAGMON_KAFKA__LAG_INTERVAL_SECONDS": "0.5",
           "RAGMON_KAFKA__SESSION_TIMEOUT_MS": str(session_ms)}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    end_offsets(kafka, topic)  # partitions with leaders before the replicas subscribe
    doomed, survivor = RagmonServer(tmp_path / "a", **env).start(), RagmonServer(tmp_path / "b", **env).start()
    try:
        held = {"a": 0.0, "b": 0.0}

        def split_evenly() -> bool:
            held.update(a=scraped(doomed.url, "ragmon_kafka_assigned_partitions", topic=topic),
                        b=scraped(survivor.url, "ragmon_kafka_assigned_partitions", topic=topic))
            return held == {"a": 2.0, "b": 2.0}

        wait_for(split_evenly, 60, "two partitions each")
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait(10)
        killed = time.monotonic()
        traces = [e for e in Simulator(seed=4, start=time.time() - 3600).traffic(800) if e["type"] == "trace"]
        per_partition = len(traces) // 4
        for partition in range(4):
            produce(kafka, topic, [encode(t) for t in traces[partition::4][:per_partition]], partition=partition)
        orphaned = 2 * per_partition
        seen_orphaned_backlog = False
        while scraped(survivor.url, "ragmon_kafka_assigned_partitions", topic=topic) < 4:
            lag = scraped(survivor.url, "ragmon_consumer_group_lag_messages", topic=topic)
            seen_orphaned_backlog |= lag >= orphaned
            assert time.monotonic() - killed < session_ms / 1000 + 15, "the partitions did not move in time"
            time.sleep(0.2)
        moved = time.monotonic() - killed
        assert seen_orphaned_backlog, "the group lag never counted the dead replica's partitions"
        wait_for(lambda: scraped(survivor.url, "ragmon_consumer_group_lag_messages", topic=topic) == 0, 60,
                 "the survivor to consume everything")
        assert scraped(survivor.url, "ragmon_kafka_rebalances_total") >= 2
    finally:
        doomed.stop()
        survivor.stop()
    log = (tmp_path / "b" / "serve.log").read_text()
    assert re.search(rf"consumer group: assigned {re.escape(topic)}\[0, 1, 2, 3\]", log), log[-2000:]
    assert "consumer group: revoked" in log
    print(f"\nkilled replica's partitions moved after {moved:.1f} s (session timeout {session_ms / 1000:.0f} s)")
