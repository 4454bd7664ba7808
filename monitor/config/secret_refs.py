"""References to secrets kept outside the config file: ``env:NAME`` (an environment variable) or
``file:/path`` (a file's content, e.g. a mounted Kubernetes Secret). The YAML names where a secret
is; the process reads it at start, and a reference that leads nowhere is an error naming it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _well_formed(ref: str) -> str:
    kind, _, where = ref.partition(":")
    if kind == "env" and _ENV_NAME.fullmatch(where):
        return ref
    if kind == "file" and where.startswith("/"):
        return ref
    # the value is not quoted: what was given in place of a reference is often the secret itself
    raise ValueError("is not a reference to a secret: write env:VARIABLE_NAME or file:/absolute/path "
                     "(the secret itself does not go in the config file)")


SecretRef = Annotated[str, AfterValidator(_well_formed)]


class UnresolvedSecret(ValueError):
    """A reference that leads to no secret; the message names the setting and the reference."""


def resolve(ref: str, setting: str, environ: Mapping[str, str]) -> str:
    """The secret ``ref`` names (surrounding whitespace dropped); raises :class:`UnresolvedSecret`
    naming ``setting`` when the variable is unset or empty, or the file unreadable or empty."""
    kind, _, where = _well_formed(ref).partition(":")
    if kind == "env":
        value = environ.get(where, "").strip()
        if not value:
            raise UnresolvedSecret(f"{setting}: {ref}: the environment variable {where} is not set or empty")
        return value
    try:
        value = Path(where).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise UnresolvedSecret(f"{setting}: {ref}: cannot read the file: {getattr(error, 'strerror', None) or error}") \
            from None
    if not value:
        raise UnresolvedSecret(f"{setting}: {ref}: the file is empty")
    return value
