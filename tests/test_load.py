"""Load: `ragmon serve` driven at twice what it can take answers 503 with Retry-After instead of
queueing without bound, its memory stays bounded, and it serves normally once the load stops."""

from __future__ import annotations

import itertools
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
LOAD_SECONDS = 15
SLOTS = 4  # http.max_pending_requests of the server under test
MEASURING_CLIENTS = SLOTS + 2


def test_twice_the_capacity_is_refused_with_retry_after_and_memory_stays_bounded(tmp_path):
    simulator = Simulator(seed=8, start=time.time() - 3600, rate=50.0)
    events = [msgspec.json.encode(e) for e in simulator.traffic(20_000) if e["type"] == "trace"]
    bodies = [b"\n".join(events[i:i + BATCH]) for i in range(0, len(events) - BATCH, BATCH)]
    requests = itertools.count()

    def body(n: int) -> bytes:
        """The n-th body with trace ids of its own: a trace sent again is a duplicate, which costs
        the server next to nothing, and the load would no longer be the load it claims to be."""
        return bodies[n % len(bodies)].replace(b'"trace_id":"', f'"trace_id":"r{next(requests)}-'.encode())
    headers = {"content-type": "application/x-ndjson"}
    with RagmonServer(tmp_path, RAGMON_HTTP__MAX_PENDING_REQUESTS=str(SLOTS)) as server:
        pid = server.process.pid

        def attempt() -> tuple:
            """Measure the capacity, then offer twice that for 15 s."""
            # capacity: what it takes when it is never idle: a client per processing slot and two
            # more back to back, counting the requests it answered 200 (a body is read while
            # another is processed, so one client alone would understate it; many more would too,
            # the server's time going into reading bodies it then refuses with 503)
            sent: Counter = Counter()

            def back_to_back(number: int, until: float) -> None:
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    n = number
                    while time.monotonic() < until:
                        status = client.post("/v1/events", content=body(n), headers=headers).status_code
                        assert status in (200, 503)
                        sent[number] += status == 200
                        n += MEASURING_CLIENTS

            started = time.monotonic()
            measuring = [threading.Thread(target=back_to_back, args=(i, started + 5)) for i in range(MEASURING_CLIENTS)]
            for thread in measuring:
                thread.start()
            for thread in measuring:
                thread.join(60)
            capacity = sum(sent.values()) / (time.monotonic() - started)
            baseline = rss_mb(pid)

            # twice that, from many clients at once, for 15 s
            statuses: Counter = Counter()
            retry_after: set = set()
            peak = [baseline]
            stop = threading.Event()
            target = 2 * capacity

            clients = 32
            interval = clients / target  # the clients together offer `target` requests per second

            def client_loop(number: int) -> None:
                # open loop: each request leaves at its scheduled time, however slow the answers are, so
                # the server is really offered twice what it takes (a client waiting for answers before
                # it sends again would slow down with the server and offer less)
                next_at = time.monotonic() + number * interval / clients
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    n = number
                    while not stop.is_set():
                        time.sleep(max(0.0, next_at - time.monotonic()))
                        next_at += interval
                        answer = client.post("/v1/events", content=body(n), headers=headers)
                        statuses[answer.status_code] += 1
                        if answer.status_code in (429, 503):
                            retry_after.add(answer.headers.get("retry-after"))
                        n += clients

            threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
            for thread in threads:
                thread.start()
            load_started = time.monotonic()
            while time.monotonic() - load_started < LOAD_SECONDS:
                peak.append(rss_mb(pid))
                time.sleep(0.5)
            stop.set()
            for thread in threads:
                thread.join(60)
            return capacity, statuses, retry_after, peak, baseline

        # The other tests share these two cores, and what they leave over changes from one moment
        # to the next: when the load phase drew more than the capacity measured just before, that
        # measurement was taken under heavier neighbours and the load was not twice the capacity;
        # it is measured and offered again (at most three times).
        for _ in range(3):
            capacity, statuses, retry_after, peak, baseline = attempt()
            served = statuses[200] / LOAD_SECONDS
            if statuses[429] + statuses[503] > 0.1 * sum(statuses.values()) or served < 1.5 * capacity:
                break

        # recovery: once the load is gone, requests succeed again at once
        with httpx.Client(base_url=server.url, timeout=30) as client:
            time.sleep(1)
            answers = [client.post("/v1/events", content=body(i), headers=headers).status_code for i in range(5)]
            ready = client.get("/readyz").status_code
    refused = statuses[429] + statuses[503]
    print(f"\ncapacity {capacity:.1f} requests/s of {BATCH} events; at 2x: {dict(statuses)}; "
          f"RSS {baseline:.0f} MB before, {max(peak):.0f} MB peak")
    assert refused > 0.1 * sum(statuses.values()) and statuses[200] > 0
    assert set(statuses) <= {200, 429, 503}
    assert retry_after and None not in retry_after
    assert max(peak) < baseline + 150  # bounded: refused work is not queued
    assert answers == [200] * 5 and ready == 200
