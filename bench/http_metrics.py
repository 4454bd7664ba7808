"""What counting and timing each HTTP request by route and status (``collectors/http_metrics.py``)
costs: the real app of ``ragmon serve`` called as ASGI in one event loop, without a network, with and
without the middleware, on ``GET /healthz`` (the cheapest route, so the difference stands out).
Prints µs per request for both and the difference, and the same with an observation that does
nothing (the middleware's own share): the fastest of many interleaved runs, since on a shared
machine other work only ever adds time.
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from ragmon.collectors.http import build_app
from ragmon.exporters.instruments import Metrics
from ragmon.monitor.config.settings import LabelsConfig
from ragmon.monitor.core.pipeline import BatchResult

REQUESTS = 5_000
RUNS = 25


def app(observe):
    return build_app(lambda records: BatchResult(), CollectorRegistry(), lambda: True, observe_request=observe)


async def drive(asgi, requests: int) -> float:
    """µs per request of ``requests`` GET /healthz, one after another."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": "/healthz", "raw_path": b"/healthz", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 4318)}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message) -> None:
        pass

    started = time.perf_counter()
    for _ in range(requests):
        await asgi(dict(scope), receive, send)
    return (time.perf_counter() - started) / requests * 1e6


def run() -> dict[str, float]:
    apps = {"without": app(None), "no-op observation": app(lambda route, status, seconds: None),
            "with": app(Metrics(CollectorRegistry(), LabelsConfig()).http_requests.observe)}
    loop = asyncio.new_event_loop()
    for asgi in apps.values():
        loop.run_until_complete(drive(asgi, 1000))  # warm (imports, the first series)
    runs: dict[str, list[float]] = {name: [] for name in apps}
    for _ in range(RUNS):
        for name, asgi in apps.items():
            runs[name].append(loop.run_until_complete(drive(asgi, REQUESTS)))
    loop.close()
    figures = {name: min(values) for name, values in runs.items()}
    print(f"http metrics: GET /healthz as ASGI, fastest of {RUNS} runs of {REQUESTS} requests")
    for name, value in figures.items():
        print(f"  {name:20s} {value:6.1f} µs per request")
    print(f"  added by the metrics {figures['with'] - figures['without']:6.1f} µs per request "
          f"(the middleware alone {figures['no-op observation'] - figures['without']:.1f})")
    return figures


if __name__ == "__main__":
    run()
