"""ACLs: one rule for reading them, wherever they arrive (docs/events.md, "ACLs").

A document event's ``acl``, a native passage's ``acl`` and the ``acl`` of a document's metadata in an
OTLP span are read alike by :func:`read_acl`:

- a list of strings is the list of principals;
- a string is the same list written as text (stores such as Chroma keep scalar metadata only):
  a JSON array of strings when it starts with ``[``, else principals separated by commas, each
  trimmed of spaces. A string naming no principal (``""``, ``" , "``) is refused: it is more often
  an unset field than a deliberate "nobody", which is written ``[]``.

A principal is ``kind:name`` (``user:``, ``group:``, ``tenant:``) or ``*`` for everyone. A bare name
such as ``staff`` is read as written and matches no caller (callers hold only prefixed principals):
:func:`bare_principals` finds them, so that such ACLs are counted and warned about.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

EVERYONE = "*"
_decode_json = msgspec.json.Decoder(list[str]).decode


class BadAcl(ValueError):
    """An ACL that is neither a list of strings nor a string of principals; the message says why."""


def read_acl(value: object) -> list[str]:
    """``value`` as a list of principals (see the module's rule); raises :class:`BadAcl`."""
    if value.__class__ is list and all(item.__class__ is str for item in value):  # type: ignore[attr-defined]
        return value  # type: ignore[return-value]
    if not isinstance(value, str):
        raise BadAcl("must be a list of principals or one string of them")
    text = value.strip()
    if text.startswith("["):
        try:
            return _decode_json(text)
        except msgspec.DecodeError:
            raise BadAcl("starts with [ but is not a JSON array of strings") from None
    principals = [part.strip() for part in text.split(",")]
    principals = [p for p in principals if p]
    if not principals:
        raise BadAcl("names no principal: write [] for an ACL that admits nobody")
    return principals


def bare_principals(acl: Iterable[str]) -> list[str]:
    """The principals of ``acl`` that are neither ``kind:name`` nor ``*``: they match no caller."""
    return [p for p in acl if p != EVERYONE and ":" not in p]
