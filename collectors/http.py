"""The one HTTP port of ``ragmon serve``: native event ingest, metrics and health (docs/deployment.md).

``POST /v1/events`` takes a JSON array, one JSON object, or NDJSON (optionally gzip-compressed)
and answers with the accepted and rejected counts and each rejection's position and reason.
It acknowledges (answers 200) only after the pipeline has processed and persisted the batch. When
the pipeline refuses (a store is down) or too many requests are pending, it answers 503 with
``Retry-After``, and the client keeps the data.

Who may send: with ``http.token`` set, every ingest path wants ``Authorization: Bearer <token>``
(``/metrics`` wants ``http.metrics_token`` when that is set); a process refuses to serve a
non-loopback address without a token (:func:`check_exposure`). A request carrying an ``Origin``
header (a browser, possibly on another site's behalf) is refused unless ``http.allowed_origins``
lists that origin, and ``/v1/events`` takes only JSON and NDJSON content types, so a cross-site
form post cannot reach the pipeline.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import threading
import zlib
from collections.abc import Callable, Sequence

import msgspec
from anyio import CapacityLimiter, to_thread
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragmon.collectors.otlp import OtlpReceiver
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.records import RawRecord

log = logging.getLogger(__name__)
SOURCE = "http"
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
EVENT_MEDIA_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")
MAX_REJECTIONS_LISTED = 100  # an answer lists this many rejections, then counts the rest


class ExposureRefused(Exception):
    """The configuration would serve a non-loopback address to anyone; the message says what to set."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``). A name other
    than ``localhost`` is not: it may resolve to anything."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None, allow_unauthenticated: bool) -> bool:
    """Whether serving ``host`` leaves the port open to anyone who can reach it: True only when
    that was allowed on purpose (``http.allow_unauthenticated``). Raises :class:`ExposureRefused`
    for a non-loopback address without a token that was not allowed."""
    if token or is_loopback(host):
        return False
    if not allow_unauthenticated:
        raise ExposureRefused(
            f"http.host {host} is not a loopback address and http.token is not set: anyone who can reach "
            "the port could send events; set http.token (RAGMON_HTTP__TOKEN), or set "
            "http.allow_unauthenticated: true when a network policy already keeps strangers out")
    return True


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class PendingLimit:
    """Counts requests in progress; refuses beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        with self._lock:
            if self._pending >= self._limit:
                return False
            self._pending += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._pending -= 1


def bearer_matches(request: Request, expected: str | None) -> bool:
    """Whether the request carries ``Authorization: Bearer <expected>`` (always, when nothing is expected)."""
    if expected is None:
        return True
    given = request.headers.get("authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {expected}".encode())


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, gunzipped if needed, never more than ``max_bytes`` held."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyError(413, f"body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding == "gzip":
        return gunzip(body, max_bytes)
    if encoding != "identity":
        raise BodyError(415, f"unsupported content encoding {encoding!r}")
    return body


def gunzip(body: bytes, max_bytes: int) -> bytes:
    """Every member of a gzip body (concatenated members are valid gzip), never more than
    ``max_bytes`` of output; a truncated or corrupt body is an error, not a shorter body."""
    out: list[bytes] = []
    size = 0
    rest = body
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            chunk = inflater.decompress(rest, max_bytes + 1 - size)
        except zlib.error:
            raise BodyError(400, "body is not valid gzip") from None
        size += len(chunk)
        out.append(chunk)
        if size > max_bytes or inflater.unconsumed_tail:
            raise BodyError(413, f"decompressed body exceeds the limit of {max_bytes} bytes")
        if not inflater.eof:
            raise BodyError(400, "gzip body is truncated")
        rest = inflater.unused_data
    return b"".join(out)


def split_events(body: bytes, content_type: str) -> list[bytes]:
    """One raw record per event: the lines of NDJSON (by content type, or when the body is not
    one JSON value but has several lines), the items of a JSON array, or the body itself."""
    stripped = body.strip()
    if not stripped:
        return []
    if "ndjson" in content_type or "jsonl" in content_type:
        return _lines(stripped)
    if stripped[:1] == b"[":
        try:
            return [bytes(item) for item in _ARRAY.decode(stripped)]
        except msgspec.DecodeError:
            raise BodyError(400, "body starts like a JSON array but is not one") from None
        except RecursionError:
            raise BodyError(400, "body is a JSON array nested too deep") from None
    if b"\n" in stripped and not _is_json(stripped):  # NDJSON sent as plain JSON
        return _lines(stripped)
    return [stripped]  # one event (pretty-printed or not); the decoder judges it


def _lines(body: bytes) -> list[bytes]:
    return [line for line in body.split(b"\n") if line.strip()]


def _is_json(body: bytes) -> bool:
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    return True


def build_app(
    process: Processor,
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    *,
    token: str | None = None,
    catalog_token: str | None = None,
    guard_catalog: bool = False,
    metrics_token: str | None = None,
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = 16 * 1024 * 1024,
    max_records: int = 10_000,
    max_pending: int = 64,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    otlp: OtlpReceiver | None = None,
    ingest: bool = True,
) -> Starlette:
    """The ASGI app. ``ready`` answers /readyz; ``on_startup`` runs before the first request,
    ``on_shutdown`` after the last one. Without ``ingest`` (the scheduler process) only /metrics
    and the health endpoints are served.

    Catalog writes (document and index events) are a privilege: with ``catalog_token`` set, only
    a request carrying it may make them (it is accepted as the ingest token too); without one,
    ``guard_catalog`` (a non-loopback bind) refuses them to every HTTP client. Refused catalog
    events are rejected as ``not_permitted`` and dead-lettered; the rest of the request goes on."""
    pending = PendingLimit(max_pending)
    origins = frozenset(allowed_origins)

    def may_write_catalog(request: Request) -> bool:
        if catalog_token is not None:
            return bearer_matches(request, catalog_token)
        return not guard_catalog

    def refused(request: Request, expected: str | None) -> Response | None:
        """The answer refusing an ingest request, or None when it may go on."""
        if not bearer_matches(request, expected) and not (catalog_token and bearer_matches(request, catalog_token)):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        origin = request.headers.get("origin")
        if origin is not None and origin not in origins:
            return JSONResponse({"error": "requests from a browser origin are refused (http.allowed_origins)"},
                                status_code=403)
        return None

    async def events(request: Request) -> Response:
        if (answer := refused(request, token)) is not None:
            return answer
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in EVENT_MEDIA_TYPES:
            return JSONResponse({"error": f"unsupported content type {media or '(none)'!r}: send "
                                 f"{', '.join(EVENT_MEDIA_TYPES)}"}, status_code=415)
        if not pending.enter():
            return JSONResponse({"error": "too many pending requests"}, status_code=503,
                                headers={"Retry-After": "1"})
        try:
            return await ingest_events(request, media)
        finally:
            pending.leave()

    async def ingest_events(request: Request, media: str) -> Response:
        try:
            body = await read_body(request, max_body_bytes)
        except BodyError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        origin = {"client": request.client.host if request.client else None}
        catalog = may_write_catalog(request)
        try:
            items = split_events(body, media)
            records = [RawRecord(SOURCE, item, {**origin, "item": i}, may_write_catalog=catalog)
                       for i, item in enumerate(items)]
        except BodyError as error:
            # Unusable as a whole: it still goes through the pipeline, to be dead-lettered and counted.
            records, unusable = [RawRecord(SOURCE, body, {**origin, "item": None}, may_write_catalog=catalog)], error
        else:
            unusable = None
        if len(records) > max_records:  # nothing taken: the client splits the request and sends again
            return JSONResponse({"error": f"{len(records)} events in one request exceed the limit of "
                                 f"{max_records} (http.max_records_per_request)"}, status_code=413)
        try:
            result = await to_thread.run_sync(process, records)
        except Retryable as error:
            log.warning("ingest refused, client asked to retry: %s", error)
            return JSONResponse({"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"})
        if unusable is not None:
            return JSONResponse({"error": str(unusable), "accepted": 0, "rejected": 1}, status_code=400)
        answer = {
            "accepted": result.accepted, "rejected": result.rejected,
            "rejections": [{"index": r.position, "reason": r.reason, "detail": r.detail}
                           for r in result.rejections[:MAX_REJECTIONS_LISTED]],
        }
        if len(result.rejections) > MAX_REJECTIONS_LISTED:
            answer["rejections_not_listed"] = len(result.rejections) - MAX_REJECTIONS_LISTED
        return JSONResponse(answer)

    async def traces(request: Request) -> Response:
        if (answer := refused(request, token)) is not None:
            return answer
        if not pending.enter():
            return Response(b"too many pending requests", status_code=503, headers={"Retry-After": "1"})
        try:
            try:
                body = await read_body(request, max_body_bytes)
            except BodyError as error:
                return Response(str(error).encode(), status_code=error.status, media_type="text/plain")
            answer = await to_thread.run_sync(otlp.receive, body, request.headers.get("content-type", ""))
            return Response(answer.body, status_code=answer.status, media_type=answer.content_type,
                            headers=answer.headers)
        finally:
            pending.leave()

    # Scrapes and probes get worker threads of their own: they must answer while ingest
    # requests hold every other worker, waiting for the pipeline.
    probes = CapacityLimiter(4)

    async def metrics(request: Request) -> Response:
        if not bearer_matches(request, metrics_token):
            return PlainTextResponse("missing or wrong bearer token", status_code=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        body = await to_thread.run_sync(generate_latest, registry, limiter=probes)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
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
    return Starlette(routes=[
        *routes,
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ], lifespan=lifespan)
