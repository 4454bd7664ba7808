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
import re
import threading
import time
import zlib
from collections.abc import Callable, Sequence

import anyio
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


class ByteBudget:
    """Bytes of request bodies held at once in this process, read or decompressed. A request takes
    from it as its body arrives (:meth:`lease`) and gives everything back when it is answered; one
    that would go over the budget is refused (503), so many large or slow bodies at once cannot
    exhaust memory."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held = 0
        self._lock = threading.Lock()

    def lease(self) -> Lease:
        return Lease(self)

    def _take(self, n: int) -> bool:
        with self._lock:
            if self._held + n > self._limit:
                return False
            self._held += n
            return True

    def _give(self, n: int) -> None:
        with self._lock:
            self._held -= n

    @property
    def held(self) -> int:
        with self._lock:
            return self._held


class Lease:
    """One request's share of a :class:`ByteBudget`."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self._held = 0

    def take(self, n: int) -> None:
        """Hold ``n`` more bytes; :class:`BodyError` 503 when the process holds too much already."""
        if not self._budget._take(n):
            raise BodyError(503, "the server holds too many request bodies at once; retry shortly")
        self._held += n

    def release(self) -> None:
        self._budget._give(self._held)
        self._held = 0


def bearer_matches(request: Request, expected: str | None) -> bool:
    """Whether the request carries ``Authorization: Bearer <expected>`` (always, when nothing is expected)."""
    if expected is None:
        return True
    given = request.headers.get("authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {expected}".encode())


async def read_body(request: Request, max_bytes: int, lease: Lease | None = None, timeout: float = 30.0) -> bytes:
    """The request body, gunzipped if needed, never more than ``max_bytes`` held, every byte taken
    from ``lease``. A body not received within ``timeout`` seconds is a 408: a client trickling
    its body holds no more than its bytes. Decompression runs on a worker thread, bounded in
    members, ratio and time (:func:`gunzip`)."""
    lease = lease or ByteBudget(max_bytes * 2).lease()
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding not in ("gzip", "identity"):
        raise BodyError(415, f"unsupported content encoding {encoding!r}")
    chunks, size = [], 0
    try:
        with anyio.fail_after(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise BodyError(413, f"body exceeds the limit of {max_bytes} bytes")
                lease.take(len(chunk))
                chunks.append(chunk)
    except TimeoutError:
        raise BodyError(408, f"body not received within {timeout:g} s (http.body_timeout_seconds)") from None
    body = b"".join(chunks)
    if encoding == "gzip":
        inflated = await to_thread.run_sync(gunzip, body, max_bytes)
        lease.take(len(inflated))
        return inflated
    return body


MAX_GZIP_MEMBERS = 64  # concatenated members are valid gzip; a real client sends one
MAX_GZIP_RATIO = 1000  # JSON compresses 10-50x; far more is a bomb
MAX_GZIP_SECONDS = 2.0
_GZIP_CHUNK = 64 * 1024  # input fed, and output taken, this much at a time


def gunzip(body: bytes, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> bytes:
    """Every member of a gzip body, never more than ``max_bytes`` of output, at most
    :data:`MAX_GZIP_MEMBERS` members, :data:`MAX_GZIP_RATIO` times the input and
    :data:`MAX_GZIP_SECONDS` of work; a truncated or corrupt body is an error, not a shorter body.

    The input is fed in pieces: zlib copies whatever follows a member's end, and a copy of the
    whole rest per member would be megabytes per member."""
    started = clock()
    ceiling = min(max_bytes, max(len(body) * MAX_GZIP_RATIO, 64 * 1024))
    view = memoryview(body)
    out: list[bytes] = []
    size = members = position = 0
    while position < len(body):
        members += 1
        if members > MAX_GZIP_MEMBERS:
            raise BodyError(400, f"gzip body has more than {MAX_GZIP_MEMBERS} members")
        inflater = zlib.decompressobj(wbits=31)
        while not inflater.eof:
            if position >= len(body):
                raise BodyError(400, "gzip body is truncated")
            pending = view[position:position + _GZIP_CHUNK]
            position += len(pending)
            while True:
                try:
                    chunk = inflater.decompress(pending, _GZIP_CHUNK)
                except zlib.error:
                    raise BodyError(400, "body is not valid gzip") from None
                size += len(chunk)
                out.append(chunk)
                if size > ceiling:
                    raise BodyError(413, f"decompressed body exceeds the limit of {ceiling} bytes "
                                    f"(http.max_body_bytes, or {MAX_GZIP_RATIO} times the compressed size)")
                if clock() - started > MAX_GZIP_SECONDS:
                    raise BodyError(400, f"gzip body took more than {MAX_GZIP_SECONDS:g} s to decompress")
                pending = inflater.unconsumed_tail
                if inflater.eof or not pending:
                    break
        position -= len(inflater.unused_data)  # the start of the next member, read again
    return b"".join(out)



def _retry_after(error: BodyError) -> dict[str, str]:
    return {"Retry-After": "1"} if error.status == 503 else {}


def split_events(body: bytes, content_type: str, max_records: int | None = None) -> list[bytes]:
    """One raw record per event: the lines of NDJSON (by content type, or when the body is not
    one JSON value but has several lines), the items of a JSON array, or the body itself.

    More than ``max_records`` events is a 413 naming the limit, found before the lines are copied
    (a megabyte of one-byte lines is half a million records)."""
    stripped = body.strip()
    if not stripped:
        return []
    if "ndjson" in content_type or "jsonl" in content_type:
        return _lines(stripped, max_records)
    if stripped[:1] == b"[":
        try:
            items = _ARRAY.decode(stripped)
        except msgspec.DecodeError:
            raise BodyError(400, "body starts like a JSON array but is not one") from None
        except RecursionError:
            raise BodyError(400, "body is a JSON array nested too deep") from None
        if max_records is not None and len(items) > max_records:
            raise TooManyRecords(len(items), max_records)
        return [bytes(item) for item in items]
    if b"\n" in stripped and not _is_json(stripped):  # NDJSON sent as plain JSON
        return _lines(stripped, max_records)
    return [stripped]  # one event (pretty-printed or not); the decoder judges it


class TooManyRecords(BodyError):
    def __init__(self, count: int | None, limit: int) -> None:
        counted = f"{count} events" if count is not None else f"more than {limit} events"
        super().__init__(413, f"{counted} in one request exceed the limit of {limit} "
                              "(http.max_records_per_request)")


_LINE = re.compile(rb"[^\n]*\S[^\n]*")  # a line with something on it


def _lines(body: bytes, max_records: int | None = None) -> list[bytes]:
    if max_records is not None and body.count(b"\n") >= max_records:  # maybe too many: count without copying
        for n, _ in enumerate(_LINE.finditer(body), 1):
            if n > max_records:
                raise TooManyRecords(None, max_records)
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
    body_timeout: float = 30.0,
    max_inflight_bytes: int = 256 * 1024 * 1024,
    saturation_seconds: float = 10.0,
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
    events are rejected as ``not_permitted`` and dead-lettered; the rest of the request goes on.

    A body is read (within ``body_timeout``, its bytes taken from the process-wide
    ``max_inflight_bytes``) before the request takes one of the ``max_pending`` processing slots,
    so a client trickling its body holds no slot; /readyz answers 503 once every slot has been
    busy for ``saturation_seconds``, so that an orchestrator routes new traffic elsewhere."""
    pending = PendingLimit(max_pending)
    budget = ByteBudget(max_inflight_bytes)
    splitting = CapacityLimiter(1)
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
        lease = budget.lease()
        try:
            try:
                body = await read_body(request, max_body_bytes, lease, body_timeout)
            except BodyError as error:
                return JSONResponse({"error": str(error)}, status_code=error.status, headers=_retry_after(error))
            if not pending.enter():
                return JSONResponse({"error": "too many pending requests"}, status_code=503,
                                    headers={"Retry-After": "1"})
            try:
                return await ingest_events(request, media, body)
            finally:
                pending.leave()
        finally:
            lease.release()

    async def ingest_events(request: Request, media: str, body: bytes) -> Response:
        origin = {"client": request.client.host if request.client else None}
        catalog = may_write_catalog(request)
        try:
            # on a worker thread, one body at a time: a large array is decoded whole before it is counted
            items = await to_thread.run_sync(split_events, body, media, max_records, limiter=splitting)
            records = [RawRecord(SOURCE, item, {**origin, "item": i}, may_write_catalog=catalog)
                       for i, item in enumerate(items)]
        except TooManyRecords as error:  # nothing taken: the client splits the request and sends again
            return JSONResponse({"error": str(error)}, status_code=413)
        except BodyError as error:
            # Unusable as a whole: it still goes through the pipeline, to be dead-lettered and counted.
            records, unusable = [RawRecord(SOURCE, body, {**origin, "item": None}, may_write_catalog=catalog)], error
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
        if (answer := refused(request, token)) is not None:
            return answer
        lease = budget.lease()
        try:
            try:
                body = await read_body(request, max_body_bytes, lease, body_timeout)
            except BodyError as error:
                return Response(str(error).encode(), status_code=error.status, media_type="text/plain",
                                headers=_retry_after(error))
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
        if not bearer_matches(request, metrics_token):
            return PlainTextResponse("missing or wrong bearer token", status_code=401,
                                     headers={"WWW-Authenticate": "Bearer"})
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
    return Starlette(routes=[
        *routes,
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ], lifespan=lifespan)
