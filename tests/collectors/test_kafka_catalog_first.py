"""Catalog first on Kafka (docs/events.md), against the real broker and `ragmon serve` as a process: a
replica judges no trace before its catalog reader has reached the catalog topic's end offsets as
of its start, and again as of a rebalance that hands it partitions.

The catalog holds thousands of documents; the documents the traces use change at its end (a newer
version, an ACL revocation), so a replica that judged traces while its reader was still on its
way would miss stale passages and leaks. The expected counts come from the events below, judged
here by the rules of docs/signals.md; a warm run (the catalog read before the traces are produced) must
give the same verdicts.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from tests.collectors.kafka_support import committed, encode, end_offsets, new_topic, produce, wait_for
from tests.ragmon_process import RagmonServer, scraped

pytestmark = pytest.mark.integration

TENANT = "acme"
FILLER = 4_000  # unrelated documents between the first and the last word on the traces' documents
TRACES = 150
STAFF, LEGAL = ["group:staff"], ["group:legal"]


def catalog_events(filler: int, traces: int, now: float) -> tuple[list[dict], list[dict]]:
    """(the documents as first published, the changes published after ``filler`` others): for
    trace i, ``stale-i`` gets version 2 and ``revoked-i`` loses the staff group."""
    clock = iter(now - 7200 + n * 0.01 for n in range(10 * (filler + traces)))

    def document(doc_id: str, version: str, acl: list[str]) -> dict:
        return {"type": "document", "doc_id": doc_id, "tenant": TENANT, "version": version,
                "modified_at": next(clock), "acl": acl}

    first = [document(f"{kind}-{i}", "1", STAFF) for i in range(traces) for kind in ("ok", "stale", "revoked")]
    first += [document(f"filler-{i}", "1", STAFF) for i in range(filler)]
    changes = [event for i in range(traces)
               for event in (document(f"stale-{i}", "2", STAFF), document(f"revoked-{i}", "1", LEGAL))]
    return first, changes


def trace_events(traces: int, now: float) -> list[dict]:
    """Each retrieval list holds a fresh, a stale and a revoked passage (each passage carrying
    version 1 and an ACL that admits the caller) and a filler; the context takes some of them."""
    events = []
    for i in range(traces):
        def passage(doc_id: str, score: float) -> dict:
            return {"id": f"{doc_id}#0", "doc_id": doc_id, "doc_version": "1", "acl": STAFF, "score": score,
                    "text": f"passage of {doc_id}"}

        candidates = [passage(f"ok-{i}", 0.9), passage(f"stale-{i}", 0.8), passage(f"revoked-{i}", 0.7),
                      passage(f"filler-{i}", 0.6)]
        context = [candidates[0]] + ([candidates[1]] if i % 3 == 0 else []) + ([candidates[2]] if i % 2 == 0 else [])
        events.append({"type": "trace", "trace_id": f"t-{uuid.uuid4().hex}", "time": now - 60 + i * 0.01,
                       "query": f"question {i}", "tenant": TENANT, "index": {"name": "handbook"},
                       "caller": {"id": f"u{i % 7}", "groups": ["staff"]},
                       "retrievals": [{"retriever": "vector", "passages": candidates}], "context": context,
                       "answer": {"text": f"answer {i}"}})
    return events


def expected_verdicts(catalog: list[dict], traces: list[dict]) -> dict[str, Counter]:
    """Stale passages and permission violations per stage, judged from the catalog's last word
    on each document: a passage is stale when its version is not the document's newest; it is a
    violation when the document's ACL shares no principal with the caller (and is not "*")."""
    newest: dict[str, dict] = {}
    for event in catalog:
        if event["doc_id"] not in newest or event["modified_at"] >= newest[event["doc_id"]]["modified_at"]:
            newest[event["doc_id"]] = event
    verdicts = {"stale": Counter(), "violations": Counter()}
    for trace in traces:
        principals = {f"tenant:{trace['tenant']}", f"user:{trace['caller']['id']}",
                      *(f"group:{g}" for g in trace["caller"]["groups"])}
        stages = {"candidates": [p for r in trace["retrievals"] for p in r["passages"]], "context": trace["context"]}
        for stage, passages in stages.items():  # distinct passage ids per trace and stage
            stale = {p["id"] for p in passages if p["doc_version"] != newest[p["doc_id"]]["version"]}
            acls = [(p["id"], newest[p["doc_id"]]["acl"]) for p in passages]
            leaked = {pid for pid, acl in acls if "*" not in acl and principals.isdisjoint(acl)}
            verdicts["stale"][stage] += len(stale)
            verdicts["violations"][stage] += len(leaked)
    return verdicts


def verdicts_of(url: str) -> dict[str, Counter]:
    return {"stale": Counter({stage: scraped(url, "ragmon_stale_passages_served_total", stage=stage)
                              for stage in ("candidates", "context")}),
            "violations": Counter({stage: scraped(url, "ragmon_permission_violations_total", stage=stage)
                                   for stage in ("candidates", "context")})}


def serve_env(kafka, traces_topic: str, catalog_topic: str, group: str) -> dict[str, str]:
    return {"RAGMON_KAFKA__BOOTSTRAP_SERVERS": f'["{kafka.bootstrap_servers}"]',
            "RAGMON_KAFKA__TRACES_TOPIC": traces_topic, "RAGMON_KAFKA__CATALOG_TOPIC": catalog_topic,
            "RAGMON_KAFKA__DEAD_LETTER_TOPIC": f"{traces_topic}-dlq", "RAGMON_KAFKA__GROUP_ID": group,
            "RAGMON_KAFKA__SAMPLES_TOPIC": f"{traces_topic}-samples", "RAGMON_SCHEDULER__EMBEDDED": "false"}


@contextlib.contextmanager
def serving(scratch: Path, env: dict[str, str]) -> Iterator[RagmonServer]:
    """`ragmon serve` in ``scratch``, once ready (reading the whole catalog takes a while)."""
    scratch.mkdir()
    server = RagmonServer(scratch, **env).start(timeout=180)
    try:
        yield server
    finally:
        server.stop()


def consumed(kafka, server: RagmonServer, group: str, topic: str, traces: int) -> None:
    """Wait until the group committed the traces topic's end and the replica counted every trace."""
    ends = {partition: end for partition, end in end_offsets(kafka, topic).items() if end > 0}  # empty: no commit
    wait_for(lambda: committed(kafka, group, topic) == ends, 120, "the group to commit the traces topic's end")
    wait_for(lambda: scraped(server.url, "ragmon_events_total", source="kafka", type="trace") == traces, 30,
             "every trace counted")


def produce_traces(kafka, topic: str, traces: list[dict], partition: int | None = None) -> None:
    produce(kafka, topic, [encode(t) for t in traces], [t["caller"]["id"].encode() for t in traces], partition)


def test_traces_waiting_before_the_start_are_judged_against_the_whole_catalog(kafka, tmp_path):
    now = time.time()
    first, changes = catalog_events(FILLER, TRACES, now)
    traces = trace_events(TRACES, now)
    expected = expected_verdicts(first + changes, traces)
    assert expected["stale"] == {"candidates": TRACES, "context": len(range(0, TRACES, 3))}
    assert expected["violations"] == {"candidates": TRACES, "context": len(range(0, TRACES, 2))}
    catalog = new_topic(kafka, 1, "cat")
    produce(kafka, catalog, [encode(e) for e in first + changes], [e["doc_id"].encode() for e in first + changes])

    cold_topic, cold_group = new_topic(kafka, 3, "traces"), f"cold-{uuid.uuid4().hex[:6]}"
    produce_traces(kafka, cold_topic, traces)
    started = time.monotonic()
    with serving(tmp_path / "cold", serve_env(kafka, cold_topic, catalog, cold_group)) as server:
        # ready only once the whole catalog is in
        assert scraped(server.url, "ragmon_events_total", source="kafka", type="document") == len(first + changes)
        print(f"cold start: ready after {time.monotonic() - started:.1f} s")
        consumed(kafka, server, cold_group, cold_topic, TRACES)
        cold = verdicts_of(server.url)

    warm_topic, warm_group = new_topic(kafka, 3, "traces"), f"warm-{uuid.uuid4().hex[:6]}"
    with serving(tmp_path / "warm", serve_env(kafka, warm_topic, catalog, warm_group)) as server:
        produce_traces(kafka, warm_topic, traces)
        consumed(kafka, server, warm_group, warm_topic, TRACES)
        warm = verdicts_of(server.url)

    assert warm == expected
    assert cold == expected


def test_partitions_handed_over_by_a_rebalance_wait_for_the_catalog_of_that_moment(kafka, tmp_path):
    """A running replica takes over the partition of a group member that leaves, right after the
    catalog changed: it judges that partition's waiting traces only once its reader has read the
    changes. The leaving member is a plain consumer of the same group, so that it consumes nothing."""
    now = time.time()
    first, changes = catalog_events(FILLER, TRACES, now)
    traces = trace_events(TRACES, now)
    expected = expected_verdicts(first + changes, traces)
    catalog, topic, group = new_topic(kafka, 1, "cat"), new_topic(kafka, 2, "traces"), f"g-{uuid.uuid4().hex[:6]}"
    # the documents as first published, before the start; the filler and the changes come later
    early = first[: 3 * TRACES]
    produce(kafka, catalog, [encode(e) for e in early], [e["doc_id"].encode() for e in early])
    with serving(tmp_path / "replica", serve_env(kafka, topic, catalog, group)) as server:
        other = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                              enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            assignment = wait_for(lambda: other.poll(timeout_ms=200) == {} and other.assignment(), 60,
                                  "the other member to get a partition")
            other.pause(*assignment)
            [partition] = [tp.partition for tp in assignment]
            later = first[3 * TRACES:] + changes
            produce(kafka, catalog, [encode(e) for e in later], [e["doc_id"].encode() for e in later])
            produce_traces(kafka, topic, traces, partition)
        finally:
            other.close(autocommit=False)  # leaves the group: the replica is handed the partition now
        consumed(kafka, server, group, topic, TRACES)
        assert verdicts_of(server.url) == expected
