"""How a serving command guards its read side and its port from the settings: who may read
(``http.read_token`` and its next value, ``http.read_tokens``, closed off loopback without either) and which hosts
requests may name (``http.allowed_hosts``), said once at start (docs/deployment.md, "The read side")."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from ragmon.collectors.http_access import ReadAccess, Tokens
from ragmon.collectors.http_guard import HostAllowlist
from ragmon.monitor.config.secret_refs import UnresolvedSecret, resolve
from ragmon.monitor.config.settings import ConfigError, Settings

log = logging.getLogger(__name__)


def read_access(settings: Settings, host: str, unauthenticated: bool,
                environ: Mapping[str, str] | None = None) -> ReadAccess:
    """The read rule of a port bound to ``host``, the tenant-scoped tokens read from where
    ``http.read_tokens`` points (``environ``, default the process's). Raises :class:`ConfigError`
    for a reference that leads nowhere or a read token that is also another token. Logs a
    WARNING when reads are closed, saying what opens them."""
    http = settings.http
    environ = os.environ if environ is None else environ
    others = {f"http.{name}": secret.get_secret_value() for name in
              ("token", "token_next", "catalog_token", "catalog_token_next", "metrics_token", "metrics_token_next")
              if (secret := getattr(http, name)) is not None}
    readers = {secret.get_secret_value() for secret in (http.read_token, http.read_token_next) if secret is not None}
    tenant_tokens: dict[str, list[str]] = {}
    for ref, tenants in http.read_tokens.items():
        try:
            secret = resolve(ref, "http.read_tokens", environ)
        except UnresolvedSecret as error:
            raise ConfigError(str(error)) from None
        for name, other in others.items():
            if secret == other:
                raise ConfigError(f"http.read_tokens: {ref} holds the same token as {name}: whoever holds that one "
                                  "would read; give readers a token of their own")
        if secret in tenant_tokens or secret in readers:
            raise ConfigError(f"http.read_tokens: {ref} holds a token given already (read_token or another "
                              "reference): one token, one scope")
        tenant_tokens[secret] = tenants
    access = ReadAccess.for_bind(host, tokens_of(settings, "read_token"), tenant_tokens, unauthenticated)
    if access.closed is not None:
        log.warning("%s", access.closed)
    return access


def tokens_of(settings: Settings, name: str) -> Tokens:
    """The tokens ``http.<name>`` and ``http.<name>_next`` give: the current one and, while it is
    rotated, the next."""
    return Tokens(secret.get_secret_value() for secret in (getattr(settings.http, name),
                                                           getattr(settings.http, f"{name}_next"))
                  if secret is not None)


def host_allowlist(settings: Settings, host: str) -> HostAllowlist:
    """The hosts requests to a port bound to ``host`` may name: ``localhost``, every IP address,
    ``host`` itself and ``http.allowed_hosts``."""
    return HostAllowlist.for_bind(host, settings.http.allowed_hosts)
