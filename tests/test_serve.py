"""`ragmon serve` as a process: SIGTERM lets the request in flight finish and persist.
`ragmon demo`: every injected incident is found."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from datetime import UTC, datetime

import httpx
import msgspec
import pytest
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.simulate import Simulator
from tests.ragmon_process import RagmonServer, scraped


@pytest.mark.slow
def test_sigterm_finishes_the_request_in_flight(tmp_path):
    # One ingest slot, reported busy (/readyz 503) a tenth of a second after the request takes it:
    # the test sees the request being processed without depending on how fast the pipeline is.
    server = RagmonServer(tmp_path, RAGMON_HTTP__MAX_BODY_BYTES=str(256 * 1024 * 1024),
                          RAGMON_HTTP__MAX_PENDING_REQUESTS="1", RAGMON_HTTP__SATURATION_SECONDS="0.1").start()
    try:
        simulator = Simulator(seed=3, start=time.time() - 3 * 86400)
        traffic = [e for e in simulator.traffic(3000) if e["type"] == "trace"]
        # the documents come last: finding them stored proves the whole request was processed
        documents = list(simulator.catalog())[::2]
        body = b"\n".join(msgspec.json.encode(e) for e in [*traffic, *documents])
        answers: list[httpx.Response] = []
        poster = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{server.url}/v1/events", content=body, timeout=120,
                       headers={"content-type": "application/x-ndjson"})))
        poster.start()
        while True:  # wait until the request holds the slot and its answers are not counted yet
            assert poster.is_alive() and not answers, "the request finished before SIGTERM could interrupt it"
            busy = httpx.get(f"{server.url}/readyz").status_code == 503
            if busy and scraped(server.url, "ragmon_answers_total") == 0:
                break
            time.sleep(0.02)
        # uvicorn re-raises the signal once shut down, so a supervisor sees why the process ended; it waits
        # 30 s at most for the request (timeout_graceful_shutdown), which these traces need a few seconds of
        assert server.stop(timeout=60) == -signal.SIGTERM
        poster.join(120)
    finally:
        server.stop()
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["accepted"] == len(traffic) + len(documents)
    with sqlite3.connect(tmp_path / "ragmon.db") as db:
        assert db.execute("select count(*) from catalog_document").fetchone()[0] == len(documents)


@pytest.mark.slow
def test_the_demo_finds_every_injected_incident(tmp_path):
    _the_demo_finds_every_injected_incident(tmp_path)


@pytest.mark.slow
def test_the_demo_run_late_on_a_friday_exports_its_busy_week(tmp_path, monkeypatch):
    """The demo's simulated days start five days back: run late on a Friday (UTC), they start minutes
    before a Monday, and the week before holds only those minutes. The export takes the busy week."""
    late_friday = datetime(2026, 12, 4, 23, 50, tzinfo=UTC).timestamp()
    offset = late_friday - time.time()
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + offset)
    _the_demo_finds_every_injected_incident(tmp_path)


def _the_demo_finds_every_injected_incident(tmp_path):
    out = tmp_path / "demo.json"
    batches = tmp_path / "batches"
    result = CliRunner().invoke(main, ["demo", "--traces", "8000", "--seconds", "1", "--json-file", str(out),
                                       "--batch-dir", str(batches)],
                                env={k: None for k in os.environ if k.startswith("RAGMON_")})
    assert result.exit_code == 0, result.output
    findings = json.loads(out.read_text())["findings"]
    assert {f["incident"] for f in findings} == {"stale_index", "leak", "no_answer_spike", "reembedding"}
    assert all(f["detected"] for f in findings), findings
    assert "what ragmon found" in result.output
    printed = " ".join(result.output.split())
    assert "alert RagmonPermissionLeakContext critical globex/handbook" in printed  # pushed as it fired
    assert "alert RagmonPermissionLeakContext resolved globex/handbook" in printed
    [week] = list(batches.iterdir())  # the weekly export for labeling
    cases = [json.loads(line) for line in (week / "cases.jsonl").read_text().splitlines()]
    tasks = json.loads((week / "tasks.json").read_text())
    assert len(cases) == len(tasks) > 10 and all(c["origin"]["week"] == week.name for c in cases)
    assert f"{len(cases)} redacted cases of {week.name}" in " ".join(result.output.split())
