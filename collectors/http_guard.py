"""What every answer of the HTTP port does against a browser turned against it: the headers that
keep a page from running script, being framed, sniffed or cached, and the ``Host`` check that
defeats DNS rebinding (docs/deployment.md, "The read side").

DNS rebinding: a page on ``http://evil.example:4318/`` whose name the attacker then points at
127.0.0.1 is same-origin with ragmon's loopback port, so its script could read the status page
and the findings; the browser still says ``Host: evil.example:4318``. Only names listed (or the
name of the bound address) are answered. Every IP address is answered too: a page can be
same-origin with an IP address only by being served from that very address and port, and
Kubernetes probes and Prometheus scrapes address a pod by its IP.
"""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The status page has no script, no frame, no form, and loads nothing but its inline style and
# the empty icon (data:): everything else is refused. `frame-ancestors` and X-Frame-Options keep
# it out of frames (clickjacking); no-store keeps findings out of browser and proxy caches.
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
_ENCODED = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
LOCAL_NAMES = ("localhost",)


class HostAllowlist:
    """The names a request may address in its ``Host`` header (any port): ``localhost``, the
    names given, and every IP address."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names = frozenset(_bare(name) for name in (*LOCAL_NAMES, *names))

    @classmethod
    def for_bind(cls, host: str, extra: Iterable[str] = ()) -> HostAllowlist:
        """The allowlist of a port bound to ``host``: its name, when it is one, and ``extra``."""
        return cls([host, *extra])

    def allows(self, header: str) -> bool:
        """Whether a ``Host`` header (``name``, ``name:port``, ``1.2.3.4:port``, ``[::1]:port``) names us."""
        host = _host_of(header)
        if host is None:
            return False
        return host in self._names or _is_ip(host)


class BrowserGuard:
    """ASGI middleware: refuses a request whose ``Host`` the allowlist does not name (421; 400
    without one), except on the ``exempt`` paths (health probes, which carry nothing a page could
    steal); adds :data:`SECURITY_HEADERS` to every answer. ``hosts`` None: no Host check."""

    def __init__(self, app: ASGIApp, *, hosts: HostAllowlist | None, exempt: Iterable[str] = ()) -> None:
        self.app = app
        self._hosts = hosts
        self._exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *((n, v) for n, v in _ENCODED if n not in present)]}
            await send(message)

        if self._hosts is not None and scope["path"] not in self._exempt:
            header = next((value for name, value in scope["headers"] if name == b"host"), None)
            if header is None:
                await _refuse(guarded, 400, "the request has no Host header")
                return
            if not self._hosts.allows(header.decode("latin-1")):
                await _refuse(guarded, 421, "this server does not answer for the host the request names; "
                              "list it in http.allowed_hosts if it is one of this server's names")
                return
        await self.app(scope, receive, guarded)


async def _refuse(send: Send, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _bare(name: str) -> str:
    return name.strip("[]").lower().rstrip(".")


def _host_of(header: str) -> str | None:
    """The host a ``Host`` header names, lower-cased, without port, brackets or a final dot; None
    when the header is malformed."""
    header = header.strip()
    if header.startswith("["):
        host, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isascii() and rest[1:].isdigit())):
            return None
        return host.lower()
    host, colon, port = header.partition(":")
    if (colon and not (port.isascii() and port.isdigit())) or not host:
        return None
    return _bare(host)


@functools.lru_cache(maxsize=1024)  # parsing an address costs 7 µs; clients name a handful of hosts
def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
