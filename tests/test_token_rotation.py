"""A token rotated on a running `ragmon serve`, end to end: the old token works, the next one is
added and SIGHUP sent, both work; a configuration that cannot be used is refused and the tokens in
force kept; the next one is promoted and SIGHUP sent, the old one is refused. One process from
start to end, and a client sending all along never sees a request refused."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import yaml

from tests.ragmon_process import RagmonServer

OLD, NEW = "ingest-old-0123456789", "ingest-new-0123456789"
READ_OLD, READ_NEW = "read-old-0123456789", "read-new-0123456789"


def event(n: int) -> dict:
    return {"type": "trace", "trace_id": f"rot-{n}", "time": time.time() - 5, "query": "q", "tenant": "acme",
            "index": {"name": "policies"}, "answer": {"text": "yes", "citations": []}, "context": []}


class SteadyClient:
    """Sends an event every few milliseconds with the token it holds now, and keeps every answer
    that was not 200."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.sent, self.failures = 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                token = self.token
                answer = client.post(f"{self.url}/v1/events", json=event(self.sent),
                                     headers={"authorization": f"Bearer {token}"})
                self.sent += 1
                if answer.status_code != 200:
                    self.failures.append((token, answer.status_code, answer.text))
                time.sleep(0.01)

    def __enter__(self) -> SteadyClient:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


def sent_more(client: SteadyClient, requests: int, when: str) -> None:
    """Wait until ``client`` has sent ``requests`` more: that it kept sending through a phase is what
    the test shows, however slowly a busy machine lets it send."""
    wanted, deadline = client.sent + requests, time.monotonic() + 60
    while client.sent < wanted:
        assert time.monotonic() < deadline, f"the client sent nothing {when}"
        time.sleep(0.01)


def status(server: RagmonServer, token: str, path: str = "/v1/events") -> int:
    headers = {"authorization": f"Bearer {token}"}
    if path == "/v1/events":
        return httpx.post(f"{server.url}{path}", json=event(-1), headers=headers, timeout=30).status_code
    return httpx.get(f"{server.url}{path}", headers=headers, timeout=30).status_code


def reconfigure(server: RagmonServer, config: Path, http: dict, outcome: str) -> None:
    """Write ``http`` as the config file's section, send SIGHUP, and wait for the log line saying
    ``outcome`` ("tokens reloaded" or "tokens not reloaded") once more than before."""
    config.write_text(yaml.safe_dump({"http": http}))
    before = server.log_path.read_text().count(outcome)
    os.kill(server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while server.log_path.read_text().count(outcome) <= before:
        assert time.monotonic() < deadline, f"no {outcome!r} in the log:\n{server.log_path.read_text()}"
        time.sleep(0.05)


def test_a_token_rotates_on_sighup_without_a_restart_or_a_refused_request(tmp_path):
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump({"http": {"token": OLD, "read_token": READ_OLD}}))
    with RagmonServer(tmp_path, RAGMON_CONFIG=str(config)) as server:
        pid = server.process.pid
        assert (status(server, OLD), status(server, NEW)) == (200, 401)
        assert (status(server, READ_OLD, "/api/v1/findings"), status(server, READ_NEW, "/api/v1/findings")) == (
            200, 401)
        with SteadyClient(server.url, OLD) as client:
            reconfigure(server, config, {"token": OLD, "token_next": NEW, "read_token": READ_OLD,
                                         "read_token_next": READ_NEW}, "tokens reloaded")
            assert (status(server, OLD), status(server, NEW)) == (200, 200)
            assert status(server, READ_NEW, "/api/v1/findings") == 200
            client.token = NEW  # the client moves to the next token at its own pace
            # a request sent with the old token may still be on its way: let it land, then some with the next
            sent_more(client, 5, "with the next token")

            # a configuration that cannot be used: refused, the tokens in force kept
            reconfigure(server, config, {"token_next": "only-a-next-token-0123"}, "tokens not reloaded")
            assert (status(server, OLD), status(server, NEW)) == (200, 200)
            assert "ERROR ragmon.monitor.app.token_reload: tokens not reloaded, the ones in force are kept: invalid " \
                "configuration" in server.log_path.read_text()
            assert "token_next is set without token" in server.log_path.read_text()

            reconfigure(server, config, {"token": NEW, "read_token": READ_NEW}, "tokens reloaded")
            assert (status(server, OLD), status(server, NEW)) == (401, 200)
            assert status(server, READ_OLD, "/api/v1/findings") == 401
            assert status(server, READ_NEW, "/api/v1/findings") == 200
            sent_more(client, 5, "once the old token was retired")
        assert server.process.pid == pid and server.process.poll() is None
        assert client.failures == []
        log = server.log_path.read_text()
        assert not any(secret in log for secret in (OLD, NEW, READ_OLD, READ_NEW, "only-a-next-token-0123"))
