"""Load: `ragmon serve` driven at twice what it can take answers 503 with Retry-After instead of
queueing without bound, its memory stays bounded, and it serves normally once the load stops."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import msgspec
import pytest

from ragmon.monitor.app.simulate import Simulator
from tests.ragmon_process import RagmonServer, rss_mb

pytestmark = pytest.mark.integration

BATCH = 200  # events per request


def test_twice_the_capacity_is_refused_with_retry_after_and_memory_stays_bounded(tmp_path):
    simulator = Simulator(seed=8, start=time.time() - 3600, rate=50.0)
    events = [msgspec.json.encode(e) for e in simulator.traffic(20_000) if e["type"] == "trace"]
    bodies = [b"\n".join(events[i:i + BATCH]) for i in range(0, len(events) - BATCH, BATCH)]
    headers = {"content-type": "application/x-ndjson"}
    with RagmonServer(tmp_path, RAGMON_HTTP__MAX_PENDING_REQUESTS="4") as server:
        pid = server.process.pid
        with httpx.Client(base_url=server.url, timeout=60) as client:
            # capacity: one client, back to back
            started, sent = time.monotonic(), 0
            while time.monotonic() - started < 5:
                assert client.post("/v1/events", content=bodies[sent % len(bodies)], headers=headers).status_code == 200
                sent += 1
            capacity = sent / (time.monotonic() - started)
        baseline = rss_mb(pid)

        # twice that, from many clients at once, for 15 s
        statuses: Counter = Counter()
        retry_after: set = set()
        peak = [baseline]
        stop = threading.Event()
        target = 2 * capacity

        def client_loop(number: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                n = number
                while not stop.is_set():
                    answer = client.post("/v1/events", content=bodies[n % len(bodies)], headers=headers)
                    statuses[answer.status_code] += 1
                    if answer.status_code in (429, 503):
                        retry_after.add(answer.headers.get("retry-after"))
                    n += 16
                    time.sleep(16 / target)  # 16 clients together offer `target` requests per second

        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        load_started = time.monotonic()
        while time.monotonic() - load_started < 15:
            peak.append(rss_mb(pid))
            time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(60)

        # recovery: once the load is gone, requests succeed again at once
        with httpx.Client(base_url=server.url, timeout=30) as client:
            time.sleep(1)
            answers = [client.post("/v1/events", content=bodies[i], headers=headers).status_code for i in range(5)]
            ready = client.get("/readyz").status_code
    refused = statuses[429] + statuses[503]
    print(f"\ncapacity {capacity:.1f} requests/s of {BATCH} events; at 2x: {dict(statuses)}; "
          f"RSS {baseline:.0f} MB before, {max(peak):.0f} MB peak")
    assert refused > 0.1 * sum(statuses.values()) and statuses[200] > 0
    assert set(statuses) <= {200, 429, 503}
    assert retry_after and None not in retry_after
    assert max(peak) < baseline + 150  # bounded: refused work is not queued
    assert answers == [200] * 5 and ready == 200
