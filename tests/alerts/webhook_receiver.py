"""A webhook receiver for tests: an HTTP server on 127.0.0.1 that keeps every JSON body posted to
it, by path, and lets a test wait for one that matches."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self) -> None:
        self.received: list[tuple[float, str, dict]] = []  # (monotonic time, path, body)
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"null")
                with receiver._changed:
                    receiver.received.append((time.monotonic(), self.path, body))
                    receiver._changed.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, path: str, match: Callable[[dict], bool], timeout: float) -> tuple[float, dict]:
        """The first body posted to ``path`` that ``match`` accepts, with when it arrived; waits up
        to ``timeout`` seconds, then fails with what did arrive."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for arrived, where, body in self.received:
                    if where == path and match(body):
                        return arrived, body
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"nothing matching on {path} within {timeout} s; received: "
                                         f"{[(p, b) for _, p, b in self.received]}")
                self._changed.wait(left)


def has_alert(name: str, status: str = "firing", **labels: str) -> Callable[[dict], bool]:
    """A matcher for webhook bodies (Alertmanager's or ragmon's) holding such an alert."""
    def match(body: dict) -> bool:
        return any(a["labels"].get("alertname") == name and a.get("status") == status
                   and all(a["labels"].get(k) == v for k, v in labels.items()) for a in body.get("alerts", []))
    return match
