"""Front matter and sidecar files: small YAML mappings read safely, and the readers they name.

YAML is parsed by PyYAML's safe loader (plain data only: no object is ever constructed from a
tag) with aliases refused, so a few bytes cannot expand into a huge structure, and only after the
text is bounded in bytes. Front matter is the block between a first line ``---`` and the next line
``---`` (or ``...``) at the head of a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml


class FrontMatterError(ValueError):
    """Front matter or a sidecar that is not a small, plain YAML mapping of the expected values."""


class _PlainLoader(yaml.SafeLoader):
    """The safe loader without aliases (``*name``): each node is read once."""

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 (PyYAML's signature)
        if self.check_event(yaml.AliasEvent):
            raise FrontMatterError("YAML aliases are not accepted")
        return super().compose_node(parent, index)


_OPENING = (b"---\n", b"---\r\n")
_CLOSING = (b"---", b"...")


def split_front_matter(data: bytes, max_bytes: int) -> bytes | None:
    """The front matter of a file's bytes, without its delimiters; None when the file has none.
    Raises :class:`FrontMatterError` when it opens but does not close within ``max_bytes``."""
    if not data.startswith(_OPENING):
        return None
    start = data.index(b"\n") + 1
    position = start
    while position < len(data) and position - start <= max_bytes:
        end = data.find(b"\n", position)
        line = data[position: len(data) if end < 0 else end].rstrip(b"\r")
        if line in _CLOSING:
            return data[start:position]
        if end < 0:
            break
        position = end + 1
    raise FrontMatterError(f"front matter opens with --- but does not close within {max_bytes} bytes")


def load_mapping(text: bytes, max_bytes: int) -> dict[str, Any]:
    """A YAML mapping (empty text: ``{}``). Raises :class:`FrontMatterError` for anything else:
    more than ``max_bytes``, not UTF-8, not YAML, aliases, or a top level that is not a mapping."""
    if len(text) > max_bytes:
        raise FrontMatterError(f"{len(text)} bytes of YAML, the limit is {max_bytes}")
    try:
        data = yaml.load(text.decode("utf-8"), Loader=_PlainLoader)  # noqa: S506 (a SafeLoader)
    except UnicodeDecodeError:
        raise FrontMatterError("not UTF-8") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise FrontMatterError("not valid YAML" + (f" (line {mark.line + 1})" if mark else "")) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError("the top level is not a mapping")
    return data


def readers(data: Mapping[str, Any], acl_keys: Mapping[str, str]) -> list[str] | None:
    """The readers the ``acl_keys`` of ``data`` name, each key's bare names given its prefix
    (``groups: [hr]`` with ``{groups: "group:"}`` is ``group:hr``); None when no key gives any. A
    value is a list of strings or one comma-separated string; ``*`` is everyone; an empty list
    (or string) names nobody. Order kept, repeats dropped."""
    found: list[str] | None = None
    for key, prefix in acl_keys.items():
        if data.get(key) is None:  # absent, or `key:` with nothing: not given
            continue
        found = found if found is not None else []
        for name in _names(data[key], key):
            principal = name if name == "*" or ":" in name or not prefix else prefix + name
            if principal not in found:
                found.append(principal)
    return found


def tenant_of(data: Mapping[str, Any], key: str) -> str | None:
    """The tenant ``data`` names under ``key``, or None."""
    if key not in data or data[key] is None:
        return None
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise FrontMatterError(f"{key}: the tenant must be a non-empty string")
    return value.strip()


def _names(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise FrontMatterError(f"{key}: readers must be a list of names or a comma-separated string")
    names = []
    for item in items:
        if not isinstance(item, str):
            raise FrontMatterError(f"{key}: every reader must be a string")
        if item.strip():
            names.append(item.strip())
    return names
