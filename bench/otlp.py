"""OTLP/HTTP protobuf throughput of `ragmon serve`: simulator traces turned into OpenInference spans
by the emitter (through the real opentelemetry-sdk), encoded as OTLP protobuf requests of 50 traces
each, posted by 2 clients; the rate is traces until every one is counted in ragmon_answers_total.
Optionally (``--phoenix``) the same requests go to Arize Phoenix (its own virtual environment,
SQLite), timed until Phoenix's API lists every trace, and ragmon's rate is printed as a multiple.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests.ragmon_process import RagmonServer, scraped
from tests.services.harness import CACHE, free_port

TRACES = 10_000
PHOENIX_TRACES = 1_000  # Phoenix takes tens of traces per second: a smaller set, for both, for the ratio
PER_REQUEST = 50
RUNS = 3
PHOENIX = CACHE / "phoenix-venv"


def otlp_bodies(traces: int = TRACES) -> list[bytes]:
    """OTLP protobuf request bodies, PER_REQUEST whole traces each."""
    from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragmon.collectors.emitter import OpenInferenceTransport
    from ragmon.monitor.app.simulate import Simulator

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    transport = OpenInferenceTransport(provider)
    simulator = Simulator(seed=17, start=time.time() - 3 * 3600, rate=1.0)
    events = [e for e in simulator.traffic(traces) if e["type"] == "trace"][:traces]
    bodies = []
    for start in range(0, len(events), PER_REQUEST):
        for event in events[start:start + PER_REQUEST]:
            when = event["time"]  # the simulator writes some times as RFC 3339 text
            when = datetime.fromisoformat(when).timestamp() if isinstance(when, str) else when
            transport.send({**event, "time": when}, None)
        bodies.append(encode_spans(exporter.get_finished_spans()).SerializeToString())
        exporter.clear()
    return bodies


def post_all(url: str, bodies: list[bytes], clients: int = 2) -> None:
    def worker(part: list[bytes]) -> None:
        with httpx.Client(timeout=120) as client:
            for body in part:
                while True:
                    answer = client.post(url, content=body, headers={"content-type": "application/x-protobuf"})
                    if answer.status_code == 200:
                        break
                    assert answer.status_code in (429, 503), answer.text[:200]
                    time.sleep(float(answer.headers.get("retry-after", "1")))

    threads = [threading.Thread(target=worker, args=(bodies[i::clients],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def answers(url: str) -> float:
    """Traces ragmon has processed, from its /metrics."""
    return scraped(url, "ragmon_answers_total")


def ragmon_once(bodies: list[bytes], traces: int) -> float:
    with tempfile.TemporaryDirectory(prefix="ragmon-bench-") as scratch, \
            RagmonServer(Path(scratch), RAGMON_OTLP__ASSEMBLY_WAIT_SECONDS="0.2",
                         RAGMON_HTTP__MAX_PENDING_REQUESTS="16") as server:
        started = time.perf_counter()
        post_all(f"{server.url}/v1/traces", bodies)
        while answers(server.url) < traces:
            time.sleep(0.05)
        return traces / (time.perf_counter() - started)


def phoenix_once(bodies: list[bytes], traces: int) -> float:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="phoenix-bench-") as scratch:
        env = {**os.environ, "PHOENIX_WORKING_DIR": scratch, "PHOENIX_PORT": str(port), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false"}
        process = subprocess.Popen([str(PHOENIX / "bin" / "phoenix"), "serve"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and process.poll() is None, "phoenix did not start"
                time.sleep(0.5)
            started = time.perf_counter()
            post_all(f"{base}/v1/traces", bodies)
            while phoenix_traces(base) < traces:
                time.sleep(0.2)
            return traces / (time.perf_counter() - started)
        finally:
            process.terminate()
            process.wait(30)


def phoenix_version() -> str:
    done = subprocess.run([str(PHOENIX / "bin" / "python"), "-c",
                           "import importlib.metadata as m; print(m.version('arize-phoenix'))"],
                          capture_output=True, text=True)
    return f"{done.stdout.strip()} (SQLite)"


def phoenix_traces(base: str) -> int:
    """Root spans Phoenix holds, through its GraphQL API."""
    query = {"query": "{ projects { edges { node { traceCount } } } }"}
    data = httpx.post(f"{base}/graphql", json=query, timeout=30).json()
    return sum(edge["node"]["traceCount"] for edge in data["data"]["projects"]["edges"])


def run(phoenix: bool = False) -> dict[str, float]:
    bodies = otlp_bodies()
    traces = TRACES
    rates = [ragmon_once(bodies, traces) for _ in range(RUNS)]
    rate = statistics.median(rates)
    print(f"OTLP/HTTP protobuf: {traces} traces in {len(bodies)} requests, median of {RUNS} runs")
    print(f"  ragmon serve                             {rate:>10,.0f} traces/s")
    figures = {"otlp_traces_per_second": rate}
    if phoenix:
        if not (PHOENIX / "bin" / "phoenix").exists():
            print(f"  Arize Phoenix: not installed in {PHOENIX} (python3 -m venv {PHOENIX} && "
                  f"{PHOENIX}/bin/pip install arize-phoenix)")
        else:
            subset = bodies[: PHOENIX_TRACES // PER_REQUEST]
            theirs = statistics.median(phoenix_once(subset, PHOENIX_TRACES) for _ in range(RUNS))
            ours = statistics.median(ragmon_once(subset, PHOENIX_TRACES) for _ in range(RUNS))
            print(f"  on {PHOENIX_TRACES} of those traces, median of {RUNS} runs each:")
            print(f"  ragmon serve                             {ours:>10,.0f} traces/s")
            print(f"  Arize Phoenix {phoenix_version():<26} {theirs:>10,.0f} traces/s")
            print(f"  ragmon / Phoenix                         {ours / theirs:>10.1f}x")
            figures["phoenix_traces_per_second"] = theirs
            figures["phoenix_multiple"] = ours / theirs
    return figures


if __name__ == "__main__":
    run(phoenix="--phoenix" in sys.argv)
