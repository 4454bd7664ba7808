"""Who may use the HTTP port: the rule that keeps a non-loopback port from being open to anyone,
bearer tokens (each a current value and, while one is rotated, the next), and who may read."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Collection, Iterable, Mapping

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


class Tokens:
    """The bearer tokens one endpoint accepts: its current token and, while it is being rotated,
    the next one (docs/deployment.md, "Rotating secrets"). None and empty values are left out;
    with none left, nothing is required."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._headers = tuple(dict.fromkeys(f"Bearer {value}".encode() for value in values if value))

    @classmethod
    def of(cls, tokens: Tokens | str | None) -> Tokens:
        """``tokens`` as a :class:`Tokens` (one string: that token alone)."""
        return tokens if isinstance(tokens, Tokens) else cls([tokens])

    @property
    def required(self) -> bool:
        """Whether a request must carry one of the tokens."""
        return bool(self._headers)

    def carried_by(self, request: Request) -> bool:
        """Whether the request carries one of the tokens. Every one is compared in constant time,
        and all of them always: the time taken tells neither which one matched nor how much of it."""
        given = request.headers.get("authorization", "").encode()
        matched = False
        for header in self._headers:
            matched |= hmac.compare_digest(given, header)
        return matched


def bearer_matches(request: Request, expected: Tokens | str | None) -> bool:
    """Whether the request carries ``Authorization: Bearer`` with one of the ``expected`` tokens
    (always, when nothing is expected)."""
    expected = Tokens.of(expected)
    return not expected.required or expected.carried_by(request)


class ReadRefused(Exception):
    """A read the request may not make: ``status`` (401, 403) and a message saying what it lacks."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReadAccess:
    """Who may read (the status page, trace pages, the read API): the rule of docs/deployment.md,
    "The read side".

    With a read credential configured (``token``: one or, while rotating, two tokens that read
    every tenant; or ``tenant_tokens``: token -> the tenants it reads), a read must carry one of
    them; no other token (the ingest token, the catalog token) reads. Without any, reads are open
    when ``closed`` is None (a loopback bind, or a port opened on purpose) and refused with
    ``closed`` as the reason otherwise."""

    def __init__(self, token: Tokens | str | None = None,
                 tenant_tokens: Mapping[str, Collection[str]] | None = None, closed: str | None = None) -> None:
        self._token = Tokens.of(token)
        self._tenant_tokens = {secret.encode(): frozenset(tenants) for secret, tenants in (tenant_tokens or {}).items()}
        self._closed = closed

    @classmethod
    def for_bind(cls, host: str, token: Tokens | str | None, tenant_tokens: Mapping[str, Collection[str]],
                 unauthenticated: bool) -> ReadAccess:
        """The rule of a port bound to ``host``; ``unauthenticated``: the port was opened to anyone on
        purpose (:func:`check_exposure`), reads included when no read credential is set."""
        if Tokens.of(token).required or tenant_tokens or is_loopback(host) or unauthenticated:
            return cls(token, tenant_tokens)
        return cls(closed=f"reads are closed: http.host {host} is not a loopback address and no read token is "
                   "set; set http.read_token (RAGMON_HTTP__READ_TOKEN), or http.read_tokens for tenant-scoped "
                   "tokens (the ingest token never reads)")

    @property
    def closed(self) -> str | None:
        """Why every read is refused, or None when reads are possible."""
        return self._closed

    @property
    def guarded(self) -> bool:
        """Whether a read needs a token."""
        return self._token.required or bool(self._tenant_tokens)

    def reader(self, request: Request) -> frozenset[str] | None:
        """The tenants the request may read (None: every tenant); raises :class:`ReadRefused`."""
        if self._closed is not None:
            raise ReadRefused(403, self._closed)
        if not self.guarded:
            return None
        if self._token.carried_by(request):
            return None
        given = request.headers.get("authorization", "").encode()
        scoped = None
        for secret, tenants in self._tenant_tokens.items():  # every one compared: the time tells nothing
            if hmac.compare_digest(given, b"Bearer " + secret):
                scoped = tenants
        if scoped is None:
            raise ReadRefused(401, "missing or wrong bearer token: reads need a read token (http.read_token or "
                              "http.read_tokens); the ingest token does not read")
        return scoped
