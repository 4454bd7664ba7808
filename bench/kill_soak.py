"""`make soak` (part): SIGKILL of the Kafka consumer at random points, ten times over a 250k-record
stream on a real broker, then a last consumer to the end. Checks:

- zero events lost: each of the 100k document events has its own id and must be in the catalog
  table, and the group's committed offsets reach the log end;
- zero duplicate samples: the leaks sampled equal, exactly, those of a clean uninterrupted run;
- duplicated metric increments, bounded by one uncommitted batch per kill. A batch is counted in
  the metrics only after its dead letters are written, and committed right after it is counted;
  one record in five is malformed, so every batch holds dead letters (about 40 of 200 records).
  A batch counted and then read again after a kill therefore leaves two dead letters with the
  same origin (partition, offset): dead letters written twice measure the batches processed past
  that point twice, and bound the duplicated increments (about five records per duplicate).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.otlp import answers
from tests.clean_run import UNCAPPED_SAMPLING, clean_run_samples, leaks_of
from tests.collectors.kafka_support import committed, encode, end_offsets, key_of, new_topic, produce, read_all
from tests.ragmon_process import RagmonServer
from tests.services.harness import Kafka

DOCUMENTS = 100_000
TRACES = 100_000
KILLS = 10
MAX_BATCH = 200
MARKER_EVERY = 5  # one record in five is malformed, so each processing of it leaves a dead letter


def processed_twice(kafka: Kafka, dlq: str) -> tuple[int, int]:
    """(dead letters, those beyond the first for their origin) in the dead-letter topic."""
    letters = read_all(kafka, dlq, timeout=120)
    origins = {(dict(m.headers)["ragmon.origin.partition"], dict(m.headers)["ragmon.origin.offset"])
               for m in letters}
    return len(letters), len(letters) - len(origins)


def run(seed: int = 7) -> bool:
    from ragmon.monitor.app.simulate import Incident, Simulator

    rng = random.Random(seed)
    documents = [{"type": "document", "doc_id": f"doc-{i:06d}", "tenant": "acme", "version": "1",
                  "modified_at": time.time() - 3600} for i in range(DOCUMENTS)]
    simulator = Simulator(seed=seed, start=time.time() - TRACES / 20 - 600, rate=20.0,
                          incidents=[Incident("leak", "globex", "handbook", start=0, rate=0.05)])
    traces = [e for e in simulator.traffic(TRACES) if e["type"] == "trace"][:TRACES]
    events = documents + traces
    rng.shuffle(events)
    trace_keys: dict = {}
    values, keys = [], []
    for number, event in enumerate(events):
        if number % (MARKER_EVERY - 1) == 0:
            values.append(b'{"type":"document","doc_id":"marker-%07d"' % number)  # cut short: malformed
            keys.append(f"m{number % 97}".encode())
        values.append(encode(event))
        keys.append(key_of(event, trace_keys) or f"d{number % 97}".encode())
    markers = sum(1 for v in values if v.startswith(b'{"type":"document","doc_id":"marker-'))
    with tempfile.TemporaryDirectory(prefix="ragmon-kill-") as scratch_name, Kafka() as kafka:
        scratch = Path(scratch_name)
        expected_leaks = leaks_of(clean_run_samples([encode(t) for t in traces], scratch / "clean",
                                                    **UNCAPPED_SAMPLING))
        topic, dlq, catalog = new_topic(kafka, 6, "traces"), new_topic(kafka, 1, "dlq"), new_topic(kafka, 1, "cat")
        produce(kafka, topic, values, keys)
        group = f"g-{uuid.uuid4().hex[:6]}"
        env = {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]', "RAGMON_KAFKA__TRACES_TOPIC": topic,
               "RAGMON_KAFKA__DEAD_LETTER_TOPIC": dlq, "RAGMON_KAFKA__CATALOG_TOPIC": catalog,
               "RAGMON_KAFKA__GROUP_ID": group, "RAGMON_KAFKA__MAX_BATCH": str(MAX_BATCH),
               "RAGMON_SCHEDULER__EMBEDDED": "false", **UNCAPPED_SAMPLING}
        (scratch / "run").mkdir()
        twice_per_kill = []
        started = time.monotonic()
        for kill in range(KILLS):
            server = RagmonServer(scratch / "run", **env).start()
            # the group first waits out the killed member's session, then this one makes progress;
            # the kill falls at a random point after that
            before = sum(committed(kafka, group, topic).values())
            while sum(committed(kafka, group, topic).values()) <= before:
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 8))
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(10)
            done = sum(committed(kafka, group, topic).values())
            # what the killed process did beyond its last commit, the next one does again
            twice_per_kill.append(processed_twice(kafka, dlq)[1] - sum(twice_per_kill))
            print(f"  kill {kill + 1}: {done:,} of {len(values):,} committed; malformed records processed twice: "
                  f"{twice_per_kill[-1]}", flush=True)
        with RagmonServer(scratch / "run", **env) as server:
            ends = end_offsets(kafka, topic)
            while committed(kafka, group, topic) != ends:
                time.sleep(0.5)
            print(f"  the last consumer reached the end; {answers(server.url):,.0f} traces in its own count")
        letters, twice = processed_twice(kafka, dlq)
        elapsed = time.monotonic() - started
        with sqlite3.connect(scratch / "run" / "ragmon.db") as db:
            stored = {row[0] for row in db.execute("select doc_id from catalog_document")}
            rows = db.execute("select trace_id, strata from sample").fetchall()
    leaks = {trace_id for trace_id, strata in rows if "permission_violation" in strata}
    lost = DOCUMENTS - len(stored & {d["doc_id"] for d in documents})
    # Of the records a batch holds, about one in MARKER_EVERY is a marker: the records processed
    # twice are about MARKER_EVERY times the markers processed twice.
    worst = max(twice_per_kill)
    print(f"kill soak: {len(values):,} records, {KILLS} SIGKILLs, {elapsed:.0f} s: {lost} document events lost; "
          f"sampled leaks {len(leaks)} vs {len(expected_leaks)} in a clean run "
          f"({'equal' if leaks == expected_leaks else 'DIFFERENT'}); {letters - twice:,} of {markers:,} malformed "
          f"records dead-lettered; processed twice: {twice} malformed records in all, at most {worst} at one kill "
          f"(about {worst * MARKER_EVERY} records of any kind; bound: one batch, {MAX_BATCH} records)")
    return (lost == 0 and leaks == expected_leaks and letters - twice == markers
            and worst * MARKER_EVERY <= MAX_BATCH * 1.5)

if __name__ == "__main__":
    sys.exit(0 if run() else 1)
