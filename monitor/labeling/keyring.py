"""The caller keyring: the key new pseudonyms and keyed shown ids are made with, and the keys they
were made with before (``redaction.caller_key`` and ``redaction.previous_caller_keys``).

A pseudonym is an HMAC: it cannot be turned into the one another key gives without the id it
stands for, which ragmon does not store. So a rotation does not re-key what is stored: a look-up by
an id (``ragmon erase``, ``trace show``, the read API) tries the id under every key of the ring,
rows record which key made them (:func:`key_id`), and a previous key stays in the ring until no row
needs it (``ragmon keys rotate`` says when; docs/deployment.md, "Rotating secrets").
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

_ID_TEXT = b"ragmon backup: caller key check"  # what backups have named a key by since before key ids


def key_id(key: str) -> str:
    """A name for a caller key that tells two keys apart without revealing either (16 hex digits,
    an HMAC under the key): stored with the rows the key made, and in a backup's manifest."""
    return hmac.new(key.encode(), _ID_TEXT, hashlib.sha256).hexdigest()[:16]


class CallerKeyring:
    """The keys of the caller-id hash, the newest first. Empty when no key is configured (only
    redaction without pseudonyms is then possible)."""

    def __init__(self, newest: str, previous: Sequence[str] = ()) -> None:
        keys: list[str] = []
        for key in (newest, *previous) if newest else ():
            if key and key not in keys:  # a key named twice is tried once
                keys.append(key)
        self._keys = tuple(key.encode() for key in keys)
        self.ids = tuple(key_id(key) for key in keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    @property
    def newest_id(self) -> str:
        """The id of the key new pseudonyms are made with ("" with no key)."""
        return self.ids[0] if self.ids else ""

    def digest(self, data: bytes) -> str:
        """HMAC-SHA256 of ``data`` under the newest key, in hex."""
        return hmac.new(self._keys[0], data, hashlib.sha256).hexdigest()

    def digests(self, data: bytes) -> tuple[str, ...]:
        """HMAC-SHA256 of ``data`` under every key, the newest first, in hex."""
        return tuple(hmac.new(key, data, hashlib.sha256).hexdigest() for key in self._keys)
