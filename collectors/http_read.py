"""The read side of the HTTP port: the status page (``GET /``), a page per trace
(``GET /traces/{trace_id}``), and the read API (``GET /api/v1/findings``,
``GET /api/v1/traces/{trace_id}``, ``GET /api/v1/unread``), each read as ``http_access.ReadAccess`` allows.

A token scoped to tenants reads the API of its tenants only; the pages show every tenant, so
they need the global read token (403 naming it otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from anyio import CapacityLimiter, to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragmon.collectors.http_access import ReadAccess, ReadRefused

TENANT_TOKEN_PAGES = ("the status page and trace pages show every tenant: they need http.read_token; a tenant read "
                      "token reads /api/v1/findings, /api/v1/traces/{id} and /api/v1/unread of its tenants")
NOT_FOUND_PAGE = ('<!doctype html><title>not found</title><p>ragmon holds nothing of this trace.</p>'
                  '<p><a href="/">status</a></p>')


class ReadApi(Protocol):
    """What the read side serves (``monitor/app/findings_view.py``); ``findings`` and ``trace``
    raise ValueError, naming the parameter, for a query they cannot answer. ``tenants``: the
    tenants the reader may see (as configured), None for every tenant."""

    def findings(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]: ...

    def trace(self, trace_id: str, tenants: Collection[str] | None = None) -> dict[str, Any] | None: ...

    def unread(self, params: Mapping[str, str], tenants: Collection[str] | None = None) -> dict[str, Any]:
        """The OTLP traces ragmon could not read, or read without a caller or a context."""

    def page(self) -> str:
        """The status page (HTML)."""

    def trace_page(self, trace_id: str) -> str | None:
        """The page of one trace (HTML), None when nothing is known of it."""


def is_read_path(path: str) -> bool:
    """Whether ``path`` is the read side's: the status page, trace pages, the read API."""
    return path == "/" or path.startswith(("/traces/", "/api/"))


def read_routes(read_api: ReadApi, access: Callable[[], ReadAccess], limiter: CapacityLimiter) -> list[Route]:
    """The routes of the read side, each answered on a worker thread of ``limiter``; ``access``
    gives the read rule in force when a request arrives (it may be swapped while serving)."""

    def refused(error: ReadRefused) -> Response:
        return JSONResponse({"error": str(error)}, status_code=error.status,
                            headers={"WWW-Authenticate": "Bearer"} if error.status == 401 else None)

    def listing(read: Callable[[dict[str, str], frozenset[str] | None], dict[str, Any]]):
        """A route answering a page of ``read`` (findings, unread traces) for the query's parameters."""

        async def answer(request: Request) -> Response:
            try:
                tenants = access().reader(request)
            except ReadRefused as error:
                return refused(error)
            try:
                page = await to_thread.run_sync(read, dict(request.query_params), tenants, limiter=limiter)
            except ValueError as error:
                return JSONResponse({"error": str(error)}, status_code=400)
            return JSONResponse(page)

        return answer

    async def trace(request: Request) -> Response:
        try:
            tenants = access().reader(request)
        except ReadRefused as error:
            return refused(error)
        try:
            view = await to_thread.run_sync(read_api.trace, request.path_params["trace_id"], tenants, limiter=limiter)
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        if view is None:
            return JSONResponse({"error": "ragmon holds no finding and no sample of this trace"}, status_code=404)
        return JSONResponse(view)

    def refused_page(request: Request) -> Response | None:
        """The answer refusing a page, or None when the request may read it."""
        try:
            tenants = access().reader(request)
        except ReadRefused as error:
            return refused(error)
        return None if tenants is None else JSONResponse({"error": TENANT_TOKEN_PAGES}, status_code=403)

    async def status(request: Request) -> Response:
        if (answer := refused_page(request)) is not None:
            return answer
        return HTMLResponse(await to_thread.run_sync(read_api.page, limiter=limiter))

    async def trace_page(request: Request) -> Response:
        if (answer := refused_page(request)) is not None:
            return answer
        try:
            page = await to_thread.run_sync(read_api.trace_page, request.path_params["trace_id"], limiter=limiter)
        except ValueError as error:
            return PlainTextResponse(f"bad request: {error}", status_code=400)
        if page is None:
            return HTMLResponse(NOT_FOUND_PAGE, status_code=404)
        return HTMLResponse(page)

    return [Route("/api/v1/findings", listing(read_api.findings), methods=["GET"]),
            Route("/api/v1/unread", listing(read_api.unread), methods=["GET"]),
            Route("/api/v1/traces/{trace_id:path}", trace, methods=["GET"]),
            Route("/", status, methods=["GET"]),
            Route("/traces/{trace_id:path}", trace_page, methods=["GET"])]
