"""Two ports, one app: with ``http.read_port`` set, the read side (status page, trace pages, read
API) answers on that port only, and ingest and ``/metrics`` on the main port only, so a network
policy can admit readers to one and senders and Prometheus to the other. Health answers on both."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

NOT_HERE = b'{"error": "not served on this port (http.read_port serves the status page and the read API)"}'


class PortSplit:
    """ASGI middleware: a request on ``read_port`` reaches only the paths ``is_read`` says are
    the read side's (and ``shared``); a request on any other port reaches every path but those.
    The port is the one the connection arrived on (the ASGI scope's ``server``)."""

    def __init__(self, app: ASGIApp, *, read_port: int, is_read: Callable[[str], bool],
                 shared: frozenset[str] = frozenset()) -> None:
        self.app = app
        self._read_port = read_port
        self._is_read = is_read
        self._shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self._shared:
            server = scope.get("server")
            on_read_port = server is not None and server[1] == self._read_port
            if on_read_port != self._is_read(scope["path"]):
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(NOT_HERE)).encode())]})
                await send({"type": "http.response.body", "body": NOT_HERE})
                return
        await self.app(scope, receive, send)
