"""A vector store's HTTP API, asked for JSON within bounds: only a URL of the configured hosts (https,
or http on a loopback address), no redirect followed, every request within one deadline and all
answers within one byte limit, the credential sent as a header and never in a message.

One :class:`JsonApi` is one sync's reading of one server; its limits span all its requests.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from ragmon.collectors.catalog_sources.base import SourceError
from ragmon.monitor.config.catalog_sources import check_manifest_url
from ragmon.monitor.config.settings import mask_url


class NotFound(Exception):
    """The server answered 404."""


class JsonApi:
    """``with JsonApi(url, ...) as api: api.call("POST", path, body)``."""

    def __init__(self, base_url: str, *, allowed_hosts: list[str], headers: dict[str, str], timeout: float,
                 max_bytes: int, transport: httpx.BaseTransport | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._shown = mask_url(base_url)
        self._allowed_hosts = allowed_hosts
        self._client = httpx.Client(follow_redirects=False, transport=transport, trust_env=False, headers={
            "Accept-Encoding": "identity", "Content-Type": "application/json", **headers})
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._max_bytes = max_bytes
        self._left = max_bytes

    def __enter__(self) -> JsonApi:
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        """The JSON answer of ``method path``; :class:`NotFound` on a 404, :class:`SourceError` on
        anything else but a 200 (``not_allowed``, ``timeout``, ``too_large``, ``unavailable``, ``bad_format``)."""
        url = self._base + path
        try:
            check_manifest_url(url, self._allowed_hosts)
        except ValueError as problem:
            raise SourceError("not_allowed", f"{self._shown}: {problem}") from None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise SourceError("timeout", f"{self._shown}: not read within {self._timeout:g} s")
        try:
            with self._client.stream(method, url, content=json.dumps(body) if body is not None else None,
                                     timeout=httpx.Timeout(left)) as response:
                data = self._body(response)
                status = response.status_code
        except httpx.TimeoutException:
            raise SourceError("timeout", f"{self._shown}: no answer within {self._timeout:g} s") from None
        except httpx.HTTPError as error:
            raise SourceError("unavailable", f"{self._shown}: {type(error).__name__}") from None
        if status == 404:
            raise NotFound
        if status != 200:  # a redirect too: never followed
            raise SourceError("unavailable", f"{self._shown}: HTTP {status}")
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise SourceError("bad_format", f"{self._shown}: an answer that is not JSON") from None

    def _body(self, response: httpx.Response) -> bytes:
        if response.headers.get("content-encoding", "identity").lower() not in ("identity", ""):
            raise SourceError("bad_format", f"{self._shown}: a compressed answer, though identity was asked for")
        chunks = []
        for chunk in response.iter_bytes():
            self._left -= len(chunk)
            if self._left < 0:
                raise SourceError("too_large", f"{self._shown}: answers of more than {self._max_bytes} bytes")
            if time.monotonic() > self._deadline:
                raise SourceError("timeout", f"{self._shown}: not read within {self._timeout:g} s")
            chunks.append(chunk)
        return b"".join(chunks)
