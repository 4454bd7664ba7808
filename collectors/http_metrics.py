"""The HTTP port's own metrics: every answered request timed and counted by route and status code
(``ragmon_http_request_duration_seconds``), by an ASGI middleware around the app
(``collectors/http.py``).

The route label is the path of one of the app's routes (``/v1/events``, ``/metrics``, ...), the
template of a route with a path parameter (``/api/v1/traces/{trace_id}``), or ``other``: clients
choose the paths they ask for, so a raw path as a label would let anyone add series. A path's route
is one set lookup, then a prefix test per templated route (two); with the observation itself
(``exporters/instruments.RequestDurations``) a request costs about 3 µs more (``python -m
bench.http_metrics``; docs/performance.md).
"""

from __future__ import annotations

import re
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
        routes = list(routes)
        self._routes = frozenset(route for route in routes if "{" not in route)
        # ("/traces/", "/traces/{trace_id}") for "/traces/{trace_id:path}": its prefix and its label
        self._templates = tuple((route.split("{", 1)[0], _template(route)) for route in routes if "{" in route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self._routes else self._templated(path)
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

    def _templated(self, path: str) -> str:
        for prefix, label in self._templates:
            if path.startswith(prefix):  # a `path` parameter takes any rest, the empty one too
                return label
        return OTHER


def _template(route: str) -> str:
    """A route's path with its parameters' converters left out: ``{trace_id:path}`` -> ``{trace_id}``."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", route)
