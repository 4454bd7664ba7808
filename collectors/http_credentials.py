"""The credentials the HTTP port checks, held so that a reload can replace them while it serves:
every request takes the whole set current when it arrives (docs/deployment.md, "Rotating secrets")."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ragmon.collectors.http_access import ReadAccess, Tokens


@dataclass(frozen=True)
class Credentials:
    """The tokens of each kind of request: ``ingest`` (every ingest path), ``catalog`` (catalog
    writes, accepted for ingest too), ``metrics`` (/metrics) and who may read (``reads``)."""

    ingest: Tokens = field(default_factory=Tokens)
    catalog: Tokens = field(default_factory=Tokens)
    metrics: Tokens = field(default_factory=Tokens)
    reads: ReadAccess = field(default_factory=ReadAccess)


class CredentialSwitch:
    """The credentials in force. :meth:`swap` replaces the whole set in one step: a request checked
    against the old set or the new one, never a mix of both."""

    def __init__(self, credentials: Credentials) -> None:
        self._current = credentials
        self._swapping = threading.Lock()

    @property
    def current(self) -> Credentials:
        """The set in force now (one reference read: atomic)."""
        return self._current

    def swap(self, credentials: Credentials) -> Credentials:
        """Put ``credentials`` in force; returns the set it replaced."""
        with self._swapping:
            previous, self._current = self._current, credentials
        return previous
