"""Direct-push latency of leak alerts: from a leaking trace accepted by `ragmon serve` (the HTTP
answer) to the real Alertmanager holding the alert (its API lists it), over 200 leaks, each in a
tenant and index of its own so that each is a new alert. Prints p50, p99 and max, median over runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from tests.ragmon_process import RagmonServer
from tests.services.harness import Alertmanager

LEAKS = 200
RUNS = 3
_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def leak(n: int, now: float, tenant: str) -> dict:
    passage = {"id": f"p{n}", "doc_id": f"d{n}", "acl": ["group:hr"], "score": 0.9}
    return {"type": "trace", "trace_id": f"bench-leak-{n}", "time": now, "tenant": tenant,
            "query": "q", "index": {"name": f"index-{n}"}, "caller": {"id": "u", "groups": ["staff"]},
            "retrievals": [{"retriever": "vector", "passages": [passage]}], "answer": {"text": "a"}}


def held(client: httpx.Client, manager: Alertmanager, tenant: str) -> bool:
    alerts = client.get(f"{manager.url}/api/v2/alerts", params={"filter": f'tenant="{tenant}"'}).json()
    return bool(alerts)


def run_once(manager: Alertmanager) -> list[float]:
    latencies = []
    run = uuid.uuid4().hex[:12].translate(_LETTERS)
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-") as scratch, \
            RagmonServer(Path(scratch), RAGMON_ALERTS__ALERTMANAGER_URL=manager.url) as ragmon, \
            httpx.Client(timeout=10) as client:
        for n in range(LEAKS):
            # unique across runs on one Alertmanager, and without a long run of digits: alerts name a
            # tenant by its shown id (docs/alerts.md), and a number the detectors take for a card or
            # phone number is shown redacted, which the filter on the tenant sent would not find
            tenant = f"tenant-{n}-{run}"
            answer = client.post(f"{ragmon.url}/v1/events", json=leak(n, time.time(), tenant))
            accepted = time.monotonic()
            assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
            deadline = accepted + 30
            while not held(client, manager, tenant):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"leak {n} never reached Alertmanager")
                time.sleep(0.005)
            latencies.append(time.monotonic() - accepted)
    return latencies


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run() -> dict[str, float]:
    print(f"direct-push leak alert latency (accepted -> Alertmanager holds it), {LEAKS} leaks, {RUNS} runs")
    figures = []
    with Alertmanager() as manager:
        for number in range(RUNS):
            latencies = run_once(manager)
            p50, p99, worst = quantile(latencies, 0.5), quantile(latencies, 0.99), max(latencies)
            figures.append((p50, p99, worst))
            print(f"  run {number + 1}: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms")
    print(f"  median of runs: p50 {statistics.median(f[0] for f in figures) * 1000:.0f} ms, "
          f"p99 {statistics.median(f[1] for f in figures) * 1000:.0f} ms "
          f"(the measurement polls Alertmanager every 5 ms)")
    return {"alert_push_p50_seconds": statistics.median(f[0] for f in figures),
            "alert_push_p99_seconds": statistics.median(f[1] for f in figures)}


if __name__ == "__main__":
    run()
