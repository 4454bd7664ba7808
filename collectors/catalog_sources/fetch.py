"""Downloading a manifest: only from configured hosts, within a time and a byte limit, redirects
followed by hand and only to configured hosts, the credential sent to the first host alone.

Every message names the URL with its credentials masked (``mask_url``) and never the
``Authorization`` value.
"""

from __future__ import annotations

import time
from urllib.parse import urljoin, urlsplit

import httpx

from ragmon.collectors.catalog_sources.base import SourceError
from ragmon.monitor.config.catalog_sources import check_manifest_url
from ragmon.monitor.config.settings import mask_url

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def fetch(url: str, *, allowed_hosts: list[str], authorization: str | None, timeout: float, max_bytes: int,
          max_redirects: int, transport: httpx.BaseTransport | None = None) -> bytes:
    """The body of ``url`` (GET), or :class:`SourceError`: ``not_allowed`` (a host or scheme not
    configured, here or in a redirect), ``timeout`` (the whole download took longer than
    ``timeout``), ``too_large`` (more than ``max_bytes``), ``unavailable`` (anything else: a status
    other than 200, too many redirects, the network)."""
    deadline = time.monotonic() + timeout
    origin = _origin(url)
    current = url
    with httpx.Client(follow_redirects=False, transport=transport, trust_env=False) as client:
        for _ in range(max_redirects + 1):
            _allowed(current, allowed_hosts)
            headers = {"Accept-Encoding": "identity"}  # bytes counted are bytes read: no inflating
            if authorization and _origin(current) == origin:
                headers["Authorization"] = authorization
            left = deadline - time.monotonic()
            if left <= 0:
                raise SourceError("timeout", f"{mask_url(url)}: no answer within {timeout:g} s")
            try:
                with client.stream("GET", current, headers=headers, timeout=httpx.Timeout(left)) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        current = urljoin(current, response.headers["location"])
                        continue
                    if response.status_code != 200:
                        raise SourceError("unavailable", f"{mask_url(current)}: HTTP {response.status_code}")
                    return _body(response, max_bytes, deadline, current, timeout)
            except httpx.TimeoutException:
                raise SourceError("timeout", f"{mask_url(current)}: no answer within {timeout:g} s") from None
            except httpx.HTTPError as error:
                raise SourceError("unavailable", f"{mask_url(current)}: {type(error).__name__}") from None
    raise SourceError("unavailable", f"{mask_url(url)}: more than {max_redirects} redirects")


def _allowed(url: str, allowed_hosts: list[str]) -> None:
    try:
        check_manifest_url(url, allowed_hosts)
    except ValueError as problem:
        raise SourceError("not_allowed", f"{mask_url(url)}: {problem}") from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _body(response: httpx.Response, max_bytes: int, deadline: float, url: str, timeout: float) -> bytes:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise SourceError("too_large", f"{mask_url(url)}: {declared} bytes, the limit is {max_bytes}")
    if response.headers.get("content-encoding", "identity").lower() not in ("identity", ""):
        raise SourceError("bad_format", f"{mask_url(url)}: a compressed answer, though identity was asked for")
    chunks, size = [], 0
    for chunk in response.iter_bytes():  # identity: as sent
        size += len(chunk)
        if size > max_bytes:
            raise SourceError("too_large", f"{mask_url(url)}: more than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise SourceError("timeout", f"{mask_url(url)}: not read within {timeout:g} s")
        chunks.append(chunk)
    return b"".join(chunks)
