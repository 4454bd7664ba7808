"""The ``RAGMON_`` environment as one overlay on the YAML file's data.

A variable names a path and gives a value: ``RAGMON_HTTP__PORT=4418`` is ``http.port``, and
``RAGMON_HTTP='{"port": 4418}'`` is the ``http`` section given as a JSON object (a value that
starts with ``[`` or ``{`` is JSON, anything else a string). The rules:

- An object is merged key by key, at every depth, into what the file gives at its path: the
  section variable above changes the port and keeps the file's token. A list or a string replaces
  what the file gives.
- Two variables that give one key (``RAGMON_HTTP='{"token": ...}'`` and ``RAGMON_HTTP__TOKEN``;
  ``RAGMON_HTTP`` as a string and ``RAGMON_HTTP__PORT``; ``RAGMON_HTTP__PORT`` and
  ``RAGMON_http__port``) are an error naming both, never a winner picked by the environment's
  order, which differs from one launcher to the next. Variables for different keys merge.
- The variables a kubelet sets for a Service whose name starts with ``ragmon`` are no settings
  (:func:`is_service_link`) and are skipped.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "RAGMON_"
ENV_CONFIG_FILE = "RAGMON_CONFIG"  # path of the YAML file, when --config is not given

# The variables a kubelet sets in every pod for every Service of its namespace (Docker-link
# style): for a Service `ragmon-prod` with port 4318 named `http`, RAGMON_PROD_SERVICE_HOST,
# _SERVICE_PORT, _SERVICE_PORT_HTTP, _PORT, _PORT_4318_TCP and _PORT_4318_TCP_{PROTO,PORT,ADDR}.
# A Service name is a DNS label, so the prefix is words joined by single underscores; every
# ragmon setting has a double one (SECTION__KEY), so none is mistaken for these.
SERVICE_NAME = re.compile(r"[A-Z0-9]+(?:_[A-Z0-9]+)*")
SERVICE_LINK_SUFFIX = re.compile(
    r"SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9]+)*|PORT(?:_[0-9]+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)?"
)

log = logging.getLogger(__name__)


class OverrideError(ValueError):
    """A ``RAGMON_`` variable cannot be applied; the message names the variable (never its value,
    which may be a secret)."""


def apply_environment(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    """Merge the ``RAGMON_`` variables of ``environ`` into ``data`` (the file's sections, changed
    in place) by the rules of this module. The result does not depend on the order of ``environ``.
    Raises :class:`OverrideError` naming the variables."""
    overlay = _overlay(_variables(environ))
    _merge(data, overlay, ())


def is_service_link(name: str, environ: Mapping[str, str]) -> bool:
    """Whether ``name`` is one of the variables a kubelet injects for a Service rather than a
    setting: ``<SERVICE>_`` and a link suffix (``SERVICE_LINK_SUFFIX``), where ``environ`` holds
    the ``<SERVICE>_SERVICE_HOST`` the kubelet always sets with them. So with a Service ``ragmon``,
    ``RAGMON_SERVICE_HOST`` and ``RAGMON_PORT_4318_TCP`` are skipped, while ``RAGMON_HTTP__PORT``
    is a setting and a mistyped ``RAGMON_HTTP_PORT`` stays an error."""
    # a name can split more than one way (RAGMON_SCHEDULER_SERVICE_PORT: the Service
    # `ragmon-scheduler`, or a `ragmon-scheduler-service`), so every split is tried
    parts = name.split("_")
    for cut in range(1, len(parts)):
        service, suffix = "_".join(parts[:cut]), "_".join(parts[cut:])
        if (SERVICE_NAME.fullmatch(service) and SERVICE_LINK_SUFFIX.fullmatch(suffix)
                and f"{service}_SERVICE_HOST" in environ):
            return True
    return False


def _variables(environ: Mapping[str, str]) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """(variable, path, value) of every setting in ``environ``, sorted by variable name."""
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name == ENV_CONFIG_FILE:
            continue
        if is_service_link(name, environ):
            log.debug("ignoring %s: Kubernetes sets it for a Service, it is not a ragmon setting", name)
            continue
        path = tuple(part.lower() for part in name[len(ENV_PREFIX):].split("__"))
        if not all(path):
            raise OverrideError(f"environment variable {name}: empty key (use SECTION__KEY)")
        yield name, path, _value(name, environ[name])


def _value(name: str, text: str) -> Any:
    if not text.startswith(("[", "{")):  # an empty value is a string, not JSON
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise OverrideError(f"environment variable {name}: not valid JSON") from None


@dataclass(frozen=True)
class _Given:
    """A value (not an object) one variable gives at one path."""

    variable: str
    value: Any


class _Branch(dict):
    """An object in the overlay: its keys, and the first variable (by name) that reached it."""

    def __init__(self, variable: str) -> None:
        super().__init__()
        self.variable = variable


def _overlay(variables: Iterator[tuple[str, tuple[str, ...], Any]]) -> _Branch:
    root = _Branch("")
    clashes: list[str] = []
    for variable, path, value in variables:
        for key in reversed(path[1:]):
            value = {key: value}
        _graft(root, path[0], value, variable, (path[0],), clashes)
    if clashes:
        raise OverrideError("\n".join(clashes))
    return root


def _graft(node: _Branch, key: str, value: Any, variable: str, where: tuple[str, ...], clashes: list[str]) -> None:
    """Put what ``variable`` gives at ``where`` (``node[key]``) into the overlay; a key another
    variable gave already is a clash, noted in ``clashes``."""
    present = node.get(key)
    if isinstance(value, dict) and not isinstance(present, _Given):
        branch = node.setdefault(key, _Branch(variable))
        for child, inner in value.items():
            _graft(branch, child, inner, variable, (*where, child), clashes)
    elif present is None:
        node[key] = _Given(variable, value)
    else:
        first, second = sorted((present.variable, variable))
        clashes.append(f"environment variables {first} and {second} both give `{'.'.join(where)}`: "
                       "set it in one of them")


def _merge(data: dict[str, Any], overlay: _Branch, where: tuple[str, ...]) -> None:
    for key, given in overlay.items():
        if isinstance(given, _Given):
            data[key] = given.value
            continue
        present = data.get(key)
        if present is None:  # absent, or an empty `key:` in the file
            present = data[key] = {}
        elif not isinstance(present, dict):
            raise OverrideError(f"environment variable {given.variable}: `{'.'.join((*where, key))}` in the config "
                                "file is not a section or mapping, so the variable cannot set keys inside it")
        _merge(present, given, (*where, key))
