"""Faults mid-stream through a running `ragmon serve`: PostgreSQL restarting under the Kafka
consumer, and the dead-letter disk filling up under the HTTP ingest. In both, consumption pauses
while the fault lasts, resumes by itself when it ends, and nothing is lost or counted twice."""

from __future__ import annotations

import contextlib
import errno
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from sqlalchemy import text

from ragmon.collectors.files import read_dead_letters
from ragmon.monitor.app.simulate import CORRUPTIONS, Incident, Simulator, corrupt
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.storage.store import make_engine, upgrade
from tests.clean_run import UNCAPPED_SAMPLING, clean_run_samples, leaks_of
from tests.collectors.kafka_support import committed, encode, end_offsets, key_of, new_topic, produce, wait_for
from tests.ragmon_process import RagmonServer, scraped

pytestmark = pytest.mark.integration


def leaking_traffic(traces: int, seed: int) -> list[dict]:
    simulator = Simulator(seed=seed, start=time.time() - 2 * 86400, rate=5.0,
                          incidents=[Incident("leak", "globex", "handbook", start=0, rate=0.2)])
    return list(simulator.traffic(traces))


def test_a_postgresql_restart_under_the_kafka_consumer_pauses_it_and_loses_nothing(kafka, postgres, tmp_path):
    documents = [{"type": "document", "doc_id": f"doc-{i:05d}", "tenant": "acme", "version": "1",
                  "modified_at": time.time() - 3600} for i in range(4000)]
    events = leaking_traffic(4000, seed=23)
    trace_keys: dict = {}
    values = [encode(d) for d in documents] + [encode(e) for e in events]
    keys = [f"d{i % 97}".encode() for i in range(len(documents))] + [key_of(e, trace_keys) for e in events]
    expected = clean_run_samples([encode(e) for e in events], tmp_path / "clean", **UNCAPPED_SAMPLING)
    assert len(leaks_of(expected)) > 50
    # One partition: the consumer sees the clean run's order, so even the order-dependent strata
    # (score baselines, rephrases) must come out the same.
    topic, dlq, catalog = new_topic(kafka, 1, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
    produce(kafka, topic, values, keys)
    url = postgres.create_database(f"faults_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))
    group = f"g-{uuid.uuid4().hex[:6]}"
    env = {"RAGMON_DATABASE__URL": url, "RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]',
           "RAGMON_KAFKA__TRACES_TOPIC": topic, "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq,
           "RAGMON_KAFKA__CATALOG_TOPIC": catalog, "RAGMON_KAFKA__GROUP_ID": group, "RAGMON_KAFKA__MAX_BATCH": "100",
           "RAGMON_SCHEDULER__EMBEDDED": "false", **UNCAPPED_SAMPLING,
           "RAGMON_REDACTION__CALLER_KEY": "fault-test-caller-key-0123456789"}
    progress = lambda: sum(committed(kafka, group, topic).values())  # noqa: E731
    with RagmonServer(tmp_path, **env) as server:
        wait_for(lambda: progress() > 1500, 60, "some progress")
        postgres.halt()
        try:
            # a batch in flight when the database stopped may still commit: until the offsets settle
            paused_at, settled_at = progress(), time.monotonic()
            halted_at = settled_at
            while time.monotonic() - settled_at < 2:
                assert time.monotonic() - halted_at < 30, "offsets kept moving with the database down"
                time.sleep(0.25)
                if progress() != paused_at:
                    paused_at, settled_at = progress(), time.monotonic()
            time.sleep(10)
            assert progress() == paused_at, "offsets advanced while the database was down"
            assert paused_at < len(values), "the consumer finished before the database stopped"
            assert server.process.poll() is None
        finally:
            postgres.resume()
        back = time.monotonic()
        down = back - halted_at
        ends = end_offsets(kafka, topic)
        wait_for(lambda: committed(kafka, group, topic) == ends, 120, "the consumer to resume and finish")
        print(f"\nPostgreSQL down {down:.0f} s: offsets held at {paused_at:,} of {len(values):,}; the rest committed "
              f"{time.monotonic() - back:.1f} s after it was back")
        # Refused batches were not counted: each event exactly once, as nothing was redelivered.
        assert scraped(server.url, "ragmon_events_total", source="kafka") == len(values)
        log = server.log_path.read_text()
    assert "database unavailable" in log or "store:" in log  # the pause was reported
    engine = make_engine(url)
    with engine.connect() as connection:
        stored = {row[0] for row in connection.execute(text("select doc_id from catalog_document"))}
    assert stored == {d["doc_id"] for d in documents}
    samples = {s.trace_id: set(s.strata) for s in SampleStore(engine).find()}
    assert samples == expected  # none lost, none twice, the same strata as an undisturbed run
    engine.dispose()


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (needs root, as on the CI machines)."""
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Write a ballast file until the file system is full."""
    ballast = disk / "ballast"
    chunk = b"\0" * 65536
    with ballast.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as error:
            assert error.errno == errno.ENOSPC
        with contextlib.suppress(OSError):  # then small writes take what is left of the last block
            while True:
                out.write(b"\0" * 512)
    return ballast


def test_a_full_dead_letter_disk_pauses_the_http_ingest_and_loses_nothing(tmp_path):
    events = leaking_traffic(6000, seed=31)
    kinds = sorted(CORRUPTIONS)
    values, broken = [], Counter()
    for n, event in enumerate(events):
        if event["type"] == "trace" and n % 40 == 0:
            how = kinds[sum(broken.values()) % len(kinds)]
            values.append(corrupt(event, how, msgspec.json.encode).replace(b"\n", b" "))
            broken[CORRUPTIONS[how]] += 1
        else:
            values.append(encode(event))
    expected = clean_run_samples(values, tmp_path / "clean", batch=200)
    batches = [values[i:i + 200] for i in range(0, len(values), 200)]
    with small_filesystem(tmp_path / "dlq-disk", "1m") as disk:
        dead = disk / "dead" / "dead.jsonl"
        with RagmonServer(tmp_path, RAGMON_DEAD_LETTER__PATH=str(dead), RAGMON_SCHEDULER__EMBEDDED="false") as server, \
                httpx.Client(base_url=server.url, timeout=30) as client:
            refused, ballast, full_since = 0, None, 0.0
            for number, batch in enumerate(batches):
                if number == len(batches) // 3:
                    ballast, full_since = fill(disk), time.monotonic()
                body = b"\n".join(batch)
                while (answer := client.post("/v1/events", content=body,
                                             headers={"content-type": "application/x-ndjson"})).status_code != 200:
                    assert answer.status_code == 503 and int(answer.headers["retry-after"]) >= 1, answer.text
                    refused += 1
                    if ballast is not None and time.monotonic() - full_since > 8:
                        ballast.unlink()  # space freed: a retry must now go through
                        ballast = None
                    time.sleep(0.5)  # shorter than Retry-After, to keep the test short
            assert ballast is None, "the ingest took a batch with dead letters while their disk was full"
            assert refused >= 5  # paused for the whole outage
            print(f"\ndead-letter disk full for 8 s: {refused} tries answered 503 with Retry-After, then every "
                  f"batch taken")
            counted = scraped(server.url, "ragmon_events_total", source="http")
            rejected = scraped(server.url, "ragmon_rejected_events_total", source="http")
        letters = read_dead_letters(dead)
    # Each broken record dead-lettered exactly once (no partial batch left by a failed write), and
    # the batches refused while the disk was full were counted only when they went through.
    assert Counter(letter["reason"] for letter in letters) == broken
    assert counted == len(values) - sum(broken.values()) and rejected == sum(broken.values())
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    samples = {s.trace_id: set(s.strata) for s in SampleStore(engine).find()}
    engine.dispose()
    assert samples == expected
