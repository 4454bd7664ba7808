"""The one HTTP port of ``ragmon serve``: native event ingest, metrics and health (docs/deployment.md).

``POST /v1/events`` takes a JSON array, one JSON object, or NDJSON (optionally gzip-compressed)
and answers with the accepted and rejected counts and each rejection's position and reason.
It acknowledges (answers 200) only after the pipeline has processed and persisted the batch. When
the pipeline refuses (a store is down) or too many requests are pending, it answers 503 with
``Retry-After``, and the client keeps the data.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import threading
import zlib
from collections.abc import Callable

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
    max_body_bytes: int = 16 * 1024 * 1024,
    max_pending: int = 64,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
    otlp: OtlpReceiver | None = None,
    ingest: bool = True,
) -> Starlette:
    """The ASGI app. ``ready`` answers /readyz; ``on_startup`` runs before the first request,
    ``on_shutdown`` after the last one. Without ``ingest`` (the scheduler process) only /metrics
    and the health endpoints are served."""
    pending = PendingLimit(max_pending)

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    async def events(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        if not pending.enter():
            return JSONResponse({"error": "too many pending requests"}, status_code=503,
                                headers={"Retry-After": "1"})
        try:
            return await ingest(request)
        finally:
            pending.leave()

    async def ingest(request: Request) -> Response:
        try:
            body = await read_body(request, max_body_bytes)
        except BodyError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        origin = {"client": request.client.host if request.client else None}
        try:
            items = split_events(body, request.headers.get("content-type", ""))
            records = [RawRecord(SOURCE, item, {**origin, "item": i}) for i, item in enumerate(items)]
        except BodyError as error:
            # Unusable as a whole: it still goes through the pipeline, to be dead-lettered and counted.
            records, unusable = [RawRecord(SOURCE, body, {**origin, "item": None})], error
        else:
            unusable = None
        try:
            result = await to_thread.run_sync(process, records)
        except Retryable as error:
            log.warning("ingest refused, client asked to retry: %s", error)
            return JSONResponse({"error": "temporarily unavailable"}, status_code=503, headers={"Retry-After": "5"})
        if unusable is not None:
            return JSONResponse({"error": str(unusable), "accepted": 0, "rejected": 1}, status_code=400)
        return JSONResponse({
            "accepted": result.accepted, "rejected": result.rejected,
            "rejections": [{"index": r.position, "reason": r.reason, "detail": r.detail} for r in result.rejections],
        })

    async def traces(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
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
