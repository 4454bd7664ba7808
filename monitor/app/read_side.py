"""How a serving command guards its read side and its port from the settings: who may read
(``http.read_token``, ``http.read_tokens``, closed off loopback without either) and which hosts
requests may name (``http.allowed_hosts``), said once at start (docs/deployment.md, "The read side")."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from ragmon.collectors.http_access import ReadAccess
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
    others = {name: secret.get_secret_value() for name, secret in
              (("http.token", http.token), ("http.catalog_token", http.catalog_token),
               ("http.metrics_token", http.metrics_token)) if secret is not None}
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
        if secret in tenant_tokens or (http.read_token and secret == http.read_token.get_secret_value()):
            raise ConfigError(f"http.read_tokens: {ref} holds a token given already (read_token or another "
                              "reference): one token, one scope")
        tenant_tokens[secret] = tenants
    token = http.read_token.get_secret_value() if http.read_token else None
    access = ReadAccess.for_bind(host, token, tenant_tokens, unauthenticated)
    if access.closed is not None:
        log.warning("%s", access.closed)
    return access


def host_allowlist(settings: Settings, host: str) -> HostAllowlist:
    """The hosts requests to a port bound to ``host`` may name: ``localhost``, every IP address,
    ``host`` itself and ``http.allowed_hosts``."""
    return HostAllowlist.for_bind(host, settings.http.allowed_hosts)
