"""Who may use the HTTP port: the rule that keeps a non-loopback port from being open to anyone,
and bearer tokens."""

from __future__ import annotations

import hmac
import ipaddress

from starlette.requests import Request


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


def bearer_matches(request: Request, expected: str | None) -> bool:
    """Whether the request carries ``Authorization: Bearer <expected>`` (always, when nothing is expected)."""
    if expected is None:
        return True
    given = request.headers.get("authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {expected}".encode())
