"""`make soak`: `ragmon serve` under steady HTTP load at half its measured capacity for 30 minutes
(``--minutes M`` to change), RSS sampled every 10 s. Passes when no request failed and the RSS of
the last fifth of the run is within 10% of the second fifth's (after warm-up): flat memory."""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import msgspec

from tests.ragmon_process import RagmonServer, rss_mb

BATCH = 200


def run(minutes: float = 30.0) -> bool:
    from ragmon.monitor.app.simulate import Simulator

    simulator = Simulator(seed=51, start=time.time() - 60, rate=100_000.0)  # times stay near now
    headers = {"content-type": "application/x-ndjson"}
    with tempfile.TemporaryDirectory(prefix="ragmon-soak-") as scratch, RagmonServer(Path(scratch)) as server:
        pid = server.process.pid
        fresh = lambda: b"\n".join(msgspec.json.encode(e) for e in simulator.traffic(BATCH))  # noqa: E731
        with httpx.Client(base_url=server.url, timeout=60) as client:
            started, sent = time.monotonic(), 0
            while time.monotonic() - started < 10:
                client.post("/v1/events", content=fresh(), headers=headers).raise_for_status()
                sent += 1
            capacity = sent / (time.monotonic() - started)
            pace = 1 / (capacity / 2)
            print(f"soak: capacity {capacity:.1f} requests/s of {BATCH} events; running at half for {minutes:g} min")
            samples: list[tuple[float, float]] = []
            failures = 0
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(10):
                    samples.append((time.monotonic(), rss_mb(pid)))
                    print(f"  {len(samples) * 10:>5} s  RSS {samples[-1][1]:.0f} MB", flush=True)

            threading.Thread(target=sample, daemon=True).start()
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                tick = time.monotonic()
                if client.post("/v1/events", content=fresh(), headers=headers).status_code != 200:
                    failures += 1
                time.sleep(max(0.0, pace - (time.monotonic() - tick)))
            stop.set()
    rss = [value for _, value in samples]
    fifth = max(1, len(rss) // 5)
    early, late = statistics.median(rss[fifth:2 * fifth]), statistics.median(rss[-fifth:])
    flat = late <= early * 1.10
    print(f"soak: {failures} failed requests; RSS {early:.0f} MB after warm-up, {late:.0f} MB at the end "
          f"({'flat' if flat else 'GROWING'})")
    return failures == 0 and flat


if __name__ == "__main__":
    minutes = float(sys.argv[sys.argv.index("--minutes") + 1]) if "--minutes" in sys.argv else 30.0
    sys.exit(0 if run(minutes) else 1)
