"""Request bodies, bounded: read within a time limit and a process-wide byte budget, gunzipped
within member, ratio and time limits, and split into one record per event without copying more
than the limit allows."""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable

import anyio
import msgspec
from anyio import to_thread
from starlette.requests import Request

_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
EVENT_MEDIA_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


async def read_body(request: Request, max_bytes: int, lease: Lease, timeout: float = 30.0) -> bytes:
    """The request body, gunzipped if needed, never more than ``max_bytes`` held, every byte taken
    from ``lease``. A body not received within ``timeout`` seconds is a 408: a client trickling
    its body holds no more than its bytes. Decompression runs on a worker thread, bounded in
    members, ratio and time (:func:`gunzip`)."""
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



def retry_after(error: BodyError) -> dict[str, str]:
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
