"""The HTTP port of ``ragmon serve``: native event ingest, metrics, health and the read side
(``http_read``; docs/deployment.md).

``POST /v1/events`` takes a JSON array, one JSON object, or NDJSON (optionally gzip-compressed)
and answers with the accepted and rejected counts and each rejection's position and reason.
It acknowledges (answers 200) only after the pipeline has processed and persisted the batch. When
the pipeline refuses (a store is down) or too many requests are pending, it answers 503 with
``Retry-After``, and the client keeps the data.

Who may send: with ``http.token`` set, every ingest path wants ``Authorization: Bearer <token>``
(``/metrics`` wants ``http.metrics_token`` when that is set); each token may have a next value
while it is rotated, and the set in force can be swapped while serving (``http_credentials``); a
process refuses to serve a non-loopback address without a token (``http_access.check_exposure``).
Bodies are bounded as ``http_body`` describes. A request carrying an ``Origin``
header (a browser, possibly on another site's behalf) is refused unless ``http.allowed_origins``
lists that origin, and ``/v1/events`` takes only JSON and NDJSON content types, so a cross-site
form post cannot reach the pipeline.

Who may read: ``http_access.ReadAccess`` (the ingest token never reads). Every answer carries the
headers of ``http_guard`` and, with an allowlist given, names one of our hosts; with a read port,
``http_ports`` keeps the read side on it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

from anyio import CapacityLimiter, to_thread
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_CONTENT_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragmon.collectors.http_access import ReadAccess, Tokens, bearer_matches
from ragmon.collectors.http_body import (
    EVENT_MEDIA_TYPES,
    BodyError,
    ByteBudget,
    TooManyRecords,
    read_body,
    retry_after,
    split_events,
)
from ragmon.collectors.http_credentials import Credentials, CredentialSwitch
from ragmon.collectors.http_guard import SECURITY_HEADERS, BrowserGuard, HostAllowlist
from ragmon.collectors.http_metrics import Observe, RequestMetrics
from ragmon.collectors.http_ports import PortSplit
from ragmon.collectors.http_read import ReadApi, is_read_path, read_routes
from ragmon.collectors.otlp import OtlpReceiver
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.records import Privilege, RawRecord

log = logging.getLogger(__name__)
SOURCE = "http"
MAX_REJECTIONS_LISTED = 100  # an answer lists this many rejections, then counts the rest
HEALTH = ("/healthz", "/readyz")  # no data: answered on every port, whatever the Host


class PendingLimit:
    """Counts requests being processed; refuses beyond ``limit``, and tells how long every slot has
    been busy (``saturated``), for the readiness probe."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._pending = 0
        self._full_since: float | None = None
        self._clock = clock
        self._lock = threading.Lock()

    def enter(self) -> bool:
        with self._lock:
            if self._pending >= self._limit:
                return False
            self._pending += 1
            if self._pending == self._limit:
                self._full_since = self._clock()
            return True

    def leave(self) -> None:
        with self._lock:
            self._pending -= 1
            self._full_since = None

    def saturated(self, for_seconds: float) -> bool:
        """Whether every slot has been busy for at least ``for_seconds``."""
        with self._lock:
            return self._full_since is not None and self._clock() - self._full_since >= for_seconds


def build_app(
    process: Processor,
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    *,
    token: Tokens | str | None = None,
    catalog_token: Tokens | str | None = None,
    guard_catalog: bool = False,
    metrics_token: Tokens | str | None = None,
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = 16 * 1024 * 1024,
    max_records: int = 10_000,
    max_pending: int = 64,
    body_timeout: float = 30.0,
    max_inflight_bytes: int = 256 * 1024 * 1024,
    saturation_seconds: float = 10.0,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    otlp: OtlpReceiver | None = None,
    ingest: bool = True,
    observe_request: Observe | None = None,
    read_api: ReadApi | None = None,
    reads: ReadAccess | None = None,
    hosts: HostAllowlist | None = None,
    read_port: int | None = None,
    credentials: CredentialSwitch | None = None,
) -> Starlette:
    """The ASGI app. ``ready`` answers /readyz; ``on_startup`` runs before the first request,
    ``on_shutdown`` after the last one. Without ``ingest`` (the scheduler process) only /metrics
    and the health endpoints are served. ``observe_request`` is told the route, status and duration
    of every request (``collectors/http_metrics.py``). ``read_api`` serves ``GET /api/v1/findings``
    and ``GET /api/v1/traces/{trace_id}`` (JSON), the status page ``GET /`` and a page per trace
    ``GET /traces/{trace_id}`` (HTML), as ``reads`` allows (default: open to all). ``hosts``: the
    ``Host`` allowlist (None: no check); ``read_port``: the port the read side is served on alone.

    ``credentials``, when given, holds the tokens and ``reads`` in place of ``token``,
    ``catalog_token``, ``metrics_token`` and ``reads``, so that they can be swapped while serving;
    every request is checked against the set in force when it arrived.

    Catalog writes (document and index events) are a privilege: with ``catalog_token`` set, only
    a request carrying it may make them (it is accepted as the ingest token too); without one,
    ``guard_catalog`` (a non-loopback bind) refuses them to every HTTP client. Refused catalog
    events are rejected as ``not_permitted`` and dead-lettered; the rest of the request goes on.

    A body is read (within ``body_timeout``, its bytes taken from the process-wide
    ``max_inflight_bytes``) before the request takes one of the ``max_pending`` processing slots,
    so a client trickling its body holds no slot; /readyz answers 503 once every slot has been
    busy for ``saturation_seconds``, so that an orchestrator routes new traffic elsewhere."""
    pending = PendingLimit(max_pending)
    budget = ByteBudget(max_inflight_bytes)
    splitting = CapacityLimiter(1)
    origins = frozenset(allowed_origins)
    switch = credentials if credentials is not None else CredentialSwitch(Credentials(
        Tokens.of(token), Tokens.of(catalog_token), Tokens.of(metrics_token),
        reads if reads is not None else ReadAccess()))

    def may_write_catalog(request: Request, held: Credentials) -> bool:
        if held.catalog.required:
            return held.catalog.carried_by(request)
        return not guard_catalog

    def refused(request: Request, held: Credentials) -> Response | None:
        """The answer refusing an ingest request, or None when it may go on."""
        catalog = held.catalog.required and held.catalog.carried_by(request)
        if not bearer_matches(request, held.ingest) and not catalog:
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        origin = request.headers.get("origin")
        if origin is not None and origin not in origins:
            return JSONResponse({"error": "requests from a browser origin are refused (http.allowed_origins)"},
                                status_code=403)
        return None

    async def events(request: Request) -> Response:
        held = switch.current
        if (answer := refused(request, held)) is not None:
            return answer
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in EVENT_MEDIA_TYPES:
            return JSONResponse({"error": f"unsupported content type {media or '(none)'!r}: send "
                                 f"{', '.join(EVENT_MEDIA_TYPES)}"}, status_code=415)
        lease = budget.lease()
        try:
            try:
                body = await read_body(request, max_body_bytes, lease, body_timeout)
            except BodyError as error:
                return JSONResponse({"error": str(error)}, status_code=error.status, headers=retry_after(error))
            if not pending.enter():
                return JSONResponse({"error": "too many pending requests"}, status_code=503,
                                    headers={"Retry-After": "1"})
            try:
                return await ingest_events(request, media, body, may_write_catalog(request, held))
            finally:
                pending.leave()
        finally:
            lease.release()

    async def ingest_events(request: Request, media: str, body: bytes, catalog: bool) -> Response:
        origin = {"client": request.client.host if request.client else None}
        privilege = Privilege.CATALOG if catalog else Privilege.INGEST
        try:
            # on a worker thread, one body at a time: a large array is decoded whole before it is counted
            items = await to_thread.run_sync(split_events, body, media, max_records, limiter=splitting)
            records = [RawRecord(SOURCE, item, {**origin, "item": i}, privilege=privilege)
                       for i, item in enumerate(items)]
        except TooManyRecords as error:  # nothing taken: the client splits the request and sends again
            return JSONResponse({"error": str(error)}, status_code=413)
        except BodyError as error:
            # Unusable as a whole: it still goes through the pipeline, to be dead-lettered and counted.
            records, unusable = [RawRecord(SOURCE, body, {**origin, "item": None}, privilege=privilege)], error
        else:
            unusable = None
        try:
            result = await to_thread.run_sync(process, records)
        except Retryable as error:
            log.warning("ingest refused, client asked to retry: %s", error)
            return JSONResponse({"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"})
        if unusable is not None:
            return JSONResponse({"error": str(unusable), "accepted": 0, "rejected": 1}, status_code=400)
        answer = {
            "accepted": result.accepted, "rejected": result.rejected, "duplicates": result.duplicates,
            "rejections": [{"index": r.position, "reason": r.reason, "detail": r.detail}
                           for r in result.rejections[:MAX_REJECTIONS_LISTED]],
        }
        if len(result.rejections) > MAX_REJECTIONS_LISTED:
            answer["rejections_not_listed"] = len(result.rejections) - MAX_REJECTIONS_LISTED
        return JSONResponse(answer)

    async def traces(request: Request) -> Response:
        if (answer := refused(request, switch.current)) is not None:
            return answer
        lease = budget.lease()
        try:
            try:
                body = await read_body(request, max_body_bytes, lease, body_timeout)
            except BodyError as error:
                return Response(str(error).encode(), status_code=error.status, media_type="text/plain",
                                headers=retry_after(error))
            if not pending.enter():
                return Response(b"too many pending requests", status_code=503, headers={"Retry-After": "1"})
            try:
                answer = await to_thread.run_sync(otlp.receive, body, request.headers.get("content-type", ""))
            finally:
                pending.leave()
            return Response(answer.body, status_code=answer.status, media_type=answer.content_type,
                            headers=answer.headers)
        finally:
            lease.release()

    # Scrapes and probes get worker threads of their own: they must answer while ingest
    # requests hold every other worker, waiting for the pipeline.
    probes = CapacityLimiter(4)

    async def metrics(request: Request) -> Response:
        if not bearer_matches(request, switch.current.metrics):
            return PlainTextResponse("missing or wrong bearer token", status_code=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        if "application/openmetrics-text" in request.headers.get("accept", ""):
            # OpenMetrics carries the exemplars (trace ids) the classic text format cannot
            body = await to_thread.run_sync(openmetrics_latest, registry, limiter=probes)
            return Response(body, headers={"content-type": OPENMETRICS_CONTENT_TYPE})
        body = await to_thread.run_sync(generate_latest, registry, limiter=probes)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        if pending.saturated(saturation_seconds):
            return PlainTextResponse("not ready: every ingest slot busy", status_code=503)
        ok = await to_thread.run_sync(ready, limiter=probes)
        return PlainTextResponse("ready" if ok else "not ready", status_code=200 if ok else 503)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if on_startup is not None:
            await to_thread.run_sync(on_startup)
        yield
        if on_shutdown is not None:
            await to_thread.run_sync(on_shutdown)

    routes = [] if otlp is None or not ingest else [Route("/v1/traces", traces, methods=["POST"])]
    if ingest:
        routes.append(Route("/v1/events", events, methods=["POST"]))
    routes += [
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
    if read_api is not None:
        routes += read_routes(read_api, lambda: switch.current.reads, probes)
    # outermost first: every answer counted (a refused Host too), then guarded, then kept to its port
    middleware = [] if observe_request is None else [
        Middleware(RequestMetrics, observe=observe_request, routes=[route.path for route in routes])]
    middleware.append(Middleware(BrowserGuard, hosts=hosts, exempt=HEALTH))
    if read_port is not None:
        middleware.append(Middleware(PortSplit, read_port=read_port, is_read=is_read_path, shared=frozenset(HEALTH)))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                     exception_handlers={Exception: server_error})


async def server_error(request: Request, error: Exception) -> Response:
    """The answer to a request whose handler failed (the traceback goes to the log): it leaves
    outside the middleware, so it carries the security headers itself."""
    return PlainTextResponse("Internal Server Error", status_code=500, headers=SECURITY_HEADERS)
