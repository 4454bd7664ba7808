"""A running `ragmon serve` follows the catalog another process writes (`ragmon replay` of catalog
events into the same database), and judges its recent traces again: leaks and stale passages the
new catalog shows in traces answered before it arrived are found late and said to be, while a
revocation made after a trace is not held against it. Two real processes; expected values from
the events as sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx

from tests.ragmon_process import RagmonServer, scraped

WAIT_SECONDS = 60  # a liveness bound on a loaded machine; the refresh itself polls every second here


def trace(n: int, now: float) -> dict:
    """A staff member's question whose context holds the payroll sheet (v1) and the handbook (v1),
    and whose candidates also hold the board memo."""
    def passage(doc: str) -> dict:
        return {"id": f"{doc}#{n % 2}", "doc_id": doc, "doc_version": "v1", "score": 0.5}

    context = [passage("payroll"), passage("handbook")]
    return {"type": "trace", "trace_id": f"before-{n}", "time": now - 120 + n, "tenant": "acme",
            "caller": {"id": f"u-{n}", "groups": ["staff"]}, "index": {"name": "policies"}, "query": "q",
            "retrievals": [{"retriever": "vector", "passages": [*context, passage("memo")]}], "context": context}


def catalog(now: float) -> list[dict]:
    """Learned after the traces, but in force before them: payroll is for group:payroll, the
    handbook moved to v2; the memo was revoked only after the traces (not their rule)."""
    return [
        {"type": "document", "doc_id": "payroll", "tenant": "acme", "version": "v1", "modified_at": now - 3600,
         "acl": ["group:payroll"]},
        {"type": "document", "doc_id": "handbook", "tenant": "acme", "version": "v1", "modified_at": now - 7200,
         "acl": ["group:staff"]},
        {"type": "document", "doc_id": "handbook", "tenant": "acme", "version": "v2", "modified_at": now - 3600,
         "acl": ["group:staff"]},
        {"type": "document", "doc_id": "memo", "tenant": "acme", "version": "v1", "modified_at": now - 30,
         "acl": ["group:board"]},
        {"type": "index", "index": "policies", "doc_id": "handbook", "version": "v1", "indexed_at": now - 7000},
    ]


def wait_for(url: str, name: str, value: float, **labels: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while (seen := scraped(url, name, **labels)) != value:
        assert time.monotonic() < deadline, f"{name}{labels} = {seen}, not {value}"
        time.sleep(0.2)


def test_a_running_serve_follows_a_replay_of_catalog_events_and_judges_its_traces_again(tmp_path):
    now = time.time()
    traces = [trace(n, now) for n in range(6)]
    with RagmonServer(tmp_path, RAGMON_CATALOG__REFRESH_SECONDS="1") as server:
        posted = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(t) for t in traces),
                            headers={"content-type": "application/x-ndjson"})
        assert posted.status_code == 200 and posted.json()["accepted"] == len(traces), posted.text
        assert scraped(server.url, "ragmon_permission_violations_total") == 0  # no catalog: nothing to judge by
        assert httpx.get(f"{server.url}/").text.count("0 documents") == 1

        (tmp_path / "catalog.jsonl").write_text("\n".join(json.dumps(e) for e in catalog(now)) + "\n")
        replay = subprocess.run([sys.executable, "-m", "ragmon", "replay", str(tmp_path / "catalog.jsonl")],
                                env={k: v for k, v in server.env.items()}, capture_output=True, text=True,
                                timeout=120)
        assert replay.returncode == 0, replay.stdout + replay.stderr

        # the serving process sees the documents and the index entry the other one wrote
        wait_for(server.url, "ragmon_index_stale_documents", 1, index="policies")  # handbook: v1 indexed, v2 out
        # each trace's context held one payroll passage and one handbook passage, its candidates those
        # and one memo passage: the payroll passages are leaks, the handbook ones stale, found late
        contexts, candidates = len(traces), len(traces)
        wait_for(server.url, "ragmon_passages_found_late_total", contexts, stage="context",
                 signal="permission_violation")
        assert scraped(server.url, "ragmon_passages_found_late_total", stage="candidates",
                       signal="permission_violation") == candidates
        wait_for(server.url, "ragmon_passages_found_late_total", contexts, stage="context", signal="stale_passage")
        assert scraped(server.url, "ragmon_passages_found_late_total", stage="candidates",
                       signal="stale_passage") == candidates
        # also where every leak is counted, so the leak alert sees them; the memo (revoked after the
        # traces) is none of them
        assert scraped(server.url, "ragmon_permission_violations_total", stage="context") == contexts
        assert scraped(server.url, "ragmon_permission_violations_total", stage="candidates") == candidates
        assert scraped(server.url, "ragmon_stale_passages_served_total", stage="context") == contexts

        leaks = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "permission_violation", "limit": 100})
        found = leaks.json()["findings"]
        assert {f["trace_id"] for f in found} == {t["trace_id"] for t in traces}
        assert all(f["reason"].startswith("found late, after the catalog changed: catalog ACL [group:payroll] "
                                          "excludes the caller") for f in found)
        assert all(f["documents"] == [{"doc_id": "payroll", "version": "v1"}] for f in found)
        stale = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "stale_passage", "limit": 100})
        assert {f["reason"] for f in stale.json()["findings"]} == {
            "found late, after the catalog changed: version v1 was served; the version current at the time of "
            "the trace was v2"}

        # the same catalog written again changes nothing: nothing is found twice
        replay = subprocess.run([sys.executable, "-m", "ragmon", "replay", str(tmp_path / "catalog.jsonl")],
                                env=dict(server.env), capture_output=True, text=True, timeout=120)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        time.sleep(3)  # three refresh intervals
        assert scraped(server.url, "ragmon_passages_found_late_total") == 2 * (contexts + candidates)
        assert os.path.exists(tmp_path / "ragmon.db")


def test_a_replay_judges_its_earlier_traces_against_the_catalog_events_that_follow_them(tmp_path):
    """Traces first, the catalog after them, in one file: at its end `ragmon replay` has judged the
    traces again, whatever batch each event fell in."""
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main

    now = time.time()
    traces = [trace(n, now) for n in range(5)]
    lines = [json.dumps(e) for e in (*traces, *catalog(now))]
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")}
    runner = CliRunner()
    replayed = runner.invoke(main, ["replay", str(tmp_path / "events.jsonl"), "--batch-size", "2"], env=env)
    assert replayed.exit_code == 0, replayed.output
    listed = runner.invoke(main, ["findings", "list", "--signal", "permission_violation", "--limit", "100", "-o",
                                  "json"], env=env)
    found = json.loads(listed.stdout)["findings"]
    assert {(f["trace_id"], f["stage"]) for f in found} == {(t["trace_id"], stage) for t in traces
                                                           for stage in ("candidates", "context")}
    assert all(f["reason"].startswith("found late, after the catalog changed: ") for f in found)
    # the handbook's versions came in the file's later batches, within the judge's interval: the end
    # of the replay judges them all the same
    stale = runner.invoke(main, ["findings", "list", "--signal", "stale_passage", "--limit", "100", "-o", "json"],
                          env=env)
    assert len(json.loads(stale.stdout)["findings"]) == 2 * len(traces)
