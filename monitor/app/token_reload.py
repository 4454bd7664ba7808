"""Tokens reloaded while ``ragmon serve`` runs: on SIGHUP, or when a file they come from changes
(``secret_watch.py``), the configuration (file, environment and the ``file:`` secrets it refers
to) is read again and the HTTP port's tokens are swapped in one step; a configuration that cannot
be used is refused with an ERROR and the tokens in force are kept (docs/deployment.md, "Rotating
secrets"). Only the tokens change: every other setting takes effect at the next start."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping

from ragmon.collectors.http_access import ExposureRefused, check_exposure
from ragmon.collectors.http_credentials import Credentials, CredentialSwitch
from ragmon.monitor.app.read_side import read_access, tokens_of
from ragmon.monitor.config.settings import ConfigError, Settings

log = logging.getLogger(__name__)


def http_credentials(settings: Settings, host: str, unauthenticated: bool,
                     environ: Mapping[str, str] | None = None) -> Credentials:
    """The tokens and read rule of a port bound to ``host`` from ``settings``; raises
    :class:`ConfigError` as :func:`read_access` does."""
    return Credentials(ingest=tokens_of(settings, "token"), catalog=tokens_of(settings, "catalog_token"),
                       metrics=tokens_of(settings, "metrics_token"),
                       reads=read_access(settings, host, unauthenticated, environ))


class TokenReload:
    """Reads the settings again (``load``) and puts their tokens in force in ``switch``, for a port
    bound to ``host``. ``on_exposure`` is told whether the port is now open to anyone on purpose
    (``http.allow_unauthenticated`` without a token), for ``ragmon_http_unauthenticated``."""

    def __init__(self, switch: CredentialSwitch, load: Callable[[], Settings], host: str,
                 on_exposure: Callable[[bool], None] = lambda open_to_all: None) -> None:
        self._switch = switch
        self._load = load
        self._host = host
        self._on_exposure = on_exposure
        self._one_at_a_time = threading.Lock()
        self.loaded: Settings | None = None  # the settings of the last reload that succeeded

    def reload(self, cause: str = "SIGHUP") -> bool:
        """Swap in the tokens of the configuration as it is now; False (and an ERROR naming what is
        wrong, never a token) when it cannot be used, the tokens in force kept. ``cause``: what
        asked for it, for the log."""
        with self._one_at_a_time:
            try:
                settings = self._load()
                token = settings.http.token.get_secret_value() if settings.http.token else None
                unauthenticated = check_exposure(self._host, token, settings.http.allow_unauthenticated)
                credentials = http_credentials(settings, self._host, unauthenticated, os.environ)
            except (ConfigError, ExposureRefused) as problem:
                log.error("tokens not reloaded, the ones in force are kept: %s", problem)
                return False
            self._switch.swap(credentials)
            self._on_exposure(unauthenticated)
            self.loaded = settings
            log.info("tokens reloaded from the configuration (%s)", cause)
            return True

    def on_sighup(self) -> None:
        """Reload on every SIGHUP, on a thread of its own: the handler runs on the thread serving
        requests, and reading files there would hold them up."""
        def handler(signum: int, frame: object) -> None:
            threading.Thread(target=self.reload, name="token-reload", daemon=True).start()

        signal.signal(signal.SIGHUP, handler)
