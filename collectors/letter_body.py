"""What a dead letter keeps of the record it could not take (docs/reliability.md, "Dead letters").

A rejected record may hold anything its sender put in it: personal data, a pasted key. By default
a letter keeps a keyed hash of the bytes (to match a letter with a sender's copy, or two letters
with each other, without keeping the bytes) and the text with the redactor's placeholders in place
of what it detects. The raw bytes are kept only when ``dead_letter.keep_raw`` is on, and then
encrypted with AES-GCM under ``dead_letter.encryption_key``, so that a replay can decrypt them and
a copy of the file alone reveals nothing.

Redacting costs about a millisecond per kilobyte of text, far more than rejecting a record does:
so the text is cut to ``max_text_bytes``, and a flood of junk gets redacted text for at most
``texts_per_second`` letters (a burst of ten seconds' worth first); the letters beyond that keep
their hash, and ``text_omitted`` says so. Examples are what an on-call engineer needs, not all of them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from collections.abc import Callable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ragmon.monitor.core.rate_limit import TokenBucket
from ragmon.monitor.core.records import Privilege

# The associated data binds a ciphertext to its use (not decryptable as anything else) and, from v2,
# to the privilege its sender had: a letter whose privilege field or header is raised (``ingest`` ->
# ``trusted``, on an edited file or a message produced to the topic) no longer decrypts. A v1
# ciphertext, written before letters recorded a privilege, opens with the least privilege only.
_AAD_V1 = b"ragmon dead letter v1"
_AAD_V2 = b"ragmon dead letter v2\x00"
_NONCE_BYTES = 12
_TAG_BYTES = 16  # AES-GCM's authentication tag, at the end of the ciphertext


class LetterBody:
    """Turns a rejected record's bytes into the fields its letter keeps.

    ``hash_key``: key of the HMAC-SHA256 of the bytes (empty: a plain SHA-256). ``redact``: the
    redactor's text function; None keeps no text. ``raw_key``: a 16, 24 or 32-byte AES key; None
    keeps no raw bytes. ``max_bytes`` bounds the raw bytes kept, ``max_text_bytes`` the bytes the
    text is made from, ``texts_per_second`` how many letters get a text (see the module)."""

    def __init__(self, *, hash_key: bytes = b"", redact: Callable[[str], str] | None = None,
                 raw_key: bytes | None = None, max_bytes: int = 65536, max_text_bytes: int = 4096,
                 texts_per_second: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._hash_key = hash_key
        self._redact = redact
        self._cipher = AESGCM(raw_key) if raw_key is not None else None
        self._max_bytes = max_bytes
        self._max_text_bytes = max_text_bytes
        self._texts = TokenBucket(texts_per_second, max(1.0, texts_per_second * 10), clock)

    def fields(self, data: bytes, privilege: Privilege) -> dict[str, str | bool]:
        """``raw_hmac`` (or ``raw_sha256``); ``text`` when a redactor is set and the rate allows,
        else ``text_omitted``; ``raw_encrypted`` (base64 of nonce and ciphertext, bound to
        ``privilege``, the sender's) when raw bytes are kept."""
        kept = data[: self._max_bytes]
        out: dict[str, str | bool]
        if self._hash_key:
            out = {"raw_hmac": hmac.new(self._hash_key, data, hashlib.sha256).hexdigest()}
        else:
            out = {"raw_sha256": hashlib.sha256(data).hexdigest()}
        if self._redact is not None:
            if self._texts.take():
                out["text"] = self._redact(data[: self._max_text_bytes].decode("utf-8", errors="replace"))
            else:
                out["text_omitted"] = True
        if self._cipher is not None:
            out["raw_encrypted"] = _seal(self._cipher, kept, privilege)
        return out


def _seal(cipher: AESGCM, data: bytes, privilege: Privilege) -> str:
    nonce = os.urandom(_NONCE_BYTES)
    return base64.b64encode(nonce + cipher.encrypt(nonce, data, _AAD_V2 + privilege.value.encode())).decode("ascii")


def seal_raw(raw_key: bytes, data: bytes, privilege: Privilege) -> str:
    """``data`` sealed as a letter's ``raw_encrypted`` under ``raw_key``, bound to ``privilege``:
    what a letter written now holds (``ragmon keys rotate`` re-seals older letters with it)."""
    return _seal(AESGCM(raw_key), data, privilege)


def decrypt_raw(raw_key: bytes, raw_encrypted: str, privilege: Privilege) -> tuple[bytes, Privilege]:
    """The bytes a letter's ``raw_encrypted`` holds and the privilege they may be replayed with:
    ``privilege`` (what the letter records) when the ciphertext was sealed with it, the least
    (``ingest``) for a ciphertext of before privileges were recorded. Raises ``cryptography``'s
    InvalidTag under a wrong key, a changed ciphertext, or a privilege other than the sealed one."""
    blob = base64.b64decode(raw_encrypted)
    cipher, nonce, sealed = AESGCM(raw_key), blob[:_NONCE_BYTES], blob[_NONCE_BYTES:]
    try:
        return cipher.decrypt(nonce, sealed, _AAD_V2 + privilege.value.encode()), privilege
    except InvalidTag:
        return cipher.decrypt(nonce, sealed, _AAD_V1), Privilege.INGEST


class UnreadableRaw(ValueError):
    """Why a letter's raw bytes cannot be had back; the words never quote the letter."""


def raw_problem(raw_encrypted: str) -> str | None:
    """What keeps ``raw_encrypted`` from being decrypted under any key (not base64, too short to
    hold a nonce and a tag), or None."""
    try:
        blob = base64.b64decode(raw_encrypted, validate=True)
    except (binascii.Error, ValueError):  # ValueError: characters outside ASCII
        return "`raw_encrypted` is not base64"
    if len(blob) < _NONCE_BYTES + _TAG_BYTES:
        return "`raw_encrypted` is too short to hold a nonce and a tag: truncated"
    return None


def open_raw(raw_keys: bytes | Sequence[bytes], raw_encrypted: str, privilege: Privilege) -> tuple[bytes, Privilege]:
    """What :func:`decrypt_raw` gives under the first of ``raw_keys`` that opens the letter (the key
    in use, then the previous ones: a letter written before a rotation stays readable), or
    :class:`UnreadableRaw` saying why not."""
    if (problem := raw_problem(raw_encrypted)) is not None:
        raise UnreadableRaw(problem)
    for raw_key in [raw_keys] if isinstance(raw_keys, bytes) else raw_keys:
        try:
            return decrypt_raw(raw_key, raw_encrypted, privilege)
        except InvalidTag:
            continue
    raise UnreadableRaw("raw bytes fail their authentication tag: a key neither dead_letter.encryption_key nor "
                        "previous_encryption_keys holds, or the letter was altered (its privilege too is sealed "
                        "with its bytes)")
