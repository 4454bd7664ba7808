"""The HTTP port's own metrics: every answered request timed and counted by route and status code
(``ragmon_http_request_duration_seconds``), by an ASGI middleware around the app
(``collectors/http.py``).

The route label is the path of one of the app's routes (``/v1/events``, ``/metrics``, ...) or
``other``: clients choose the paths they ask for, so a raw path as a label would let anyone add
series. ragmon's routes have no path parameters, so a path's route is one set lookup; with the
observation itself (``exporters/instruments.RequestDurations``) a request costs about 3 µs more
(``python -m bench.http_metrics``; docs/performance.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

OTHER = "other"
SERVER_ERROR = 500  # what the server error handler answers when the app raised before answering

Observe = Callable[[str, int, float], None]  # (route, status, seconds)


class RequestMetrics:
    """ASGI middleware handing each HTTP request's route, status code and duration to ``observe``;
    other scopes (lifespan) pass through untouched."""

    def __init__(self, app: ASGIApp, *, observe: Observe, routes: Iterable[str]) -> None:
        self.app = app
        self._observe = observe
        self._routes = frozenset(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self._routes else OTHER
        status = SERVER_ERROR
        started = time.perf_counter()

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, answer)
        finally:
            self._observe(route, status, time.perf_counter() - started)
