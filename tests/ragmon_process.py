"""`ragmon serve` as a separate process, the way users and orchestrators run it; and, for a runtime
run in the test process instead, the garbage collector set as `ragmon serve` sets it."""

from __future__ import annotations

import contextlib
import gc
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.services.harness import free_port


def scraped(url: str, name: str, **labels: str) -> float:
    """The sum of the samples of metric ``name`` (matching ``labels``) on ``url``/metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()))


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process, in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


# A liveness guard, not a speed target: alone, `ragmon serve` is ready in 2 to 5 s; with the suite's
# workers filling both cores, several replicas starting at once, and the host taking CPU time away
# (steal), a start has needed over 30 s with nothing logged yet (imports).
START_TIMEOUT = 120.0


class RagmonServer:
    """Starts `ragmon serve` (or another serving command, e.g. `scheduler`) on a free port with its
    store and dead-letter file in ``scratch``; ``env`` adds RAGMON_ settings. Outer RAGMON_
    variables are not inherited."""

    def __init__(self, scratch: Path, command: str = "serve", *, verify: ssl.SSLContext | bool = True,
                 **env: str) -> None:
        """``verify``: the TLS context (trust, and a client certificate under mutual TLS) the
        readiness poll uses when the server speaks TLS (``RAGMON_HTTP__TLS_CERT_FILE`` in ``env``)."""
        self.scratch = scratch
        self.command = command
        self.port = free_port()
        scheme = "https" if "RAGMON_HTTP__TLS_CERT_FILE" in env else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.verify = verify
        self.log_path = scratch / "serve.log"
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
                    "RAGMON_DATABASE__URL": f"sqlite:///{scratch / 'ragmon.db'}",
                    "RAGMON_DEAD_LETTER__PATH": str(scratch / "dead.jsonl"), **env}
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = START_TIMEOUT) -> RagmonServer:
        """Start the command and wait until ``/readyz`` answers 200 (or the process exits)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ragmon", self.command, "--port", str(self.port)],
                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", verify=self.verify).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ragmon {self.command} did not become ready:\n{self.log_path.read_text()}")
            time.sleep(0.2)

    def stop(self, timeout: float = 30) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait(5)

    def __enter__(self) -> RagmonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def served_in_thread(app) -> Iterator[str]:
    """``app`` (ASGI) served by uvicorn on a thread of this process, on a free loopback port; yields
    its URL once it accepts connections, and stops it (its shutdown handlers run) on exit."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start within 10 s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextlib.contextmanager
def collected_as_served() -> Iterator[None]:
    """This process's cyclic garbage collector as `ragmon serve` sets it once its runtime is built
    (``settle_start_up_objects``: what is alive now frozen, young collections every 200,000
    allocations), given back on exit: the test worker runs other tests after. Enter it once the
    runtime is built. Under Python's defaults, a runtime fed tens of thousands of events in the test
    process spends a large part of its CPU in full collections scanning, again and again, the
    objects it holds (spans in assembly, the loaded catalog, the test's own traffic)."""
    from ragmon.monitor.app.wiring import settle_start_up_objects

    thresholds = gc.get_threshold()
    settle_start_up_objects()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
