"""A bounded, redacted digest of one trace's spans: what it is made of, never what it holds.

Kept: the instrumentation scopes (name, version, spans), and the spans grouped by scope, name and
kind, each group with its count, its attribute *keys* (positions written ``N``) and the names of its
span events; the keys of the resources. Never an attribute value. Names and keys are shown as
``names.ShownNames`` shows them (redacted, visible, cut).

Bounded whatever the trace: at most :data:`MAX_SCOPES` scopes, :data:`MAX_GROUPS` groups,
:data:`MAX_KEYS` keys and :data:`MAX_EVENTS` event names a group, and :data:`MAX_BYTES` of JSON
in all (groups past it are counted, not listed); the work is bounded too (at most
:data:`MAX_TRACKED_GROUPS` groups and :data:`MAX_RAW_KEYS` distinct keys a group are looked at).
What is left out is counted in the ``*_omitted`` fields (``groups_omitted``: groups looked at and
not listed; ``spans_omitted``: the spans of those and of the groups never looked at), or flagged
(``keys_cut``: a group had more distinct keys than were looked at).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.unread.names import ShownNames

MAX_SCOPES = 16
MAX_GROUPS = 32
MAX_KEYS = 48
MAX_EVENTS = 8
MAX_RESOURCE_KEYS = 32
MAX_BYTES = 16 * 1024  # of the digest as JSON
MAX_TRACKED_GROUPS = 1024
MAX_RAW_KEYS = 4096
KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")  # OTLP SpanKind, by number


@dataclass
class _Group:
    spans: int = 0
    keys: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    keys_cut: bool = False


def _take(into: set[str], names: Any, bound: int) -> bool:
    """Add the ``names`` (an iterable of keys) to ``into`` up to ``bound`` in all; True when some
    were left out."""
    room = bound - len(into)
    if room <= 0:
        return bool(names)
    if len(names) <= room:
        into.update(names)
        return False
    into.update(itertools.islice(names, room))
    return not set(names) <= into


def digest(spans: Sequence[Span], names: ShownNames) -> dict[str, Any]:
    """The digest of one trace's spans (see the module's docstring)."""
    scopes: dict[tuple[str, str], int] = {}
    groups: dict[tuple[str, str, str, int], _Group] = {}
    untracked = 0  # spans of groups beyond MAX_TRACKED_GROUPS
    resources: dict[int, dict[str, Any]] = {}
    for span in spans:
        scope = (span.scope, span.scope_version)
        scopes[scope] = scopes.get(scope, 0) + 1
        key = (span.scope, span.scope_version, span.name, span.kind)
        group = groups.get(key)
        if group is None:
            if len(groups) >= MAX_TRACKED_GROUPS:
                untracked += 1
                continue
            group = groups[key] = _Group()
        group.spans += 1
        if _take(group.keys, span.attributes.keys(), MAX_RAW_KEYS):
            group.keys_cut = True
        for event in itertools.islice(span.events, MAX_EVENTS * 4):
            if len(group.events) < MAX_EVENTS * 4:
                group.events.add(event.name)
        if len(resources) < MAX_SCOPES:
            resources.setdefault(id(span.resource), span.resource)

    ordered_scopes = sorted(scopes.items(), key=lambda item: (-item[1], item[0]))
    shown_scopes = [{"name": names.name(name), "version": names.name(version) if version else "", "spans": n}
                    for (name, version), n in ordered_scopes[:MAX_SCOPES]]
    position = {scope: i for i, (scope, _) in enumerate(ordered_scopes[:MAX_SCOPES])}
    resource_keys: set[str] = set()
    for resource in resources.values():
        resource_keys.update(names.key(k) for k in itertools.islice(resource, MAX_RAW_KEYS))
    out: dict[str, Any] = {
        "spans": len(spans), "scopes": shown_scopes, "scopes_omitted": max(0, len(ordered_scopes) - MAX_SCOPES),
        "resource_keys": sorted(resource_keys)[:MAX_RESOURCE_KEYS],
        "groups": [], "groups_omitted": 0, "spans_omitted": untracked,
    }
    size = len(msgspec.json.encode(out))
    ordered_groups = sorted(groups.items(), key=lambda item: (-item[1].spans, item[0][2], item[0][:2], item[0][3]))
    for (scope, version, name, kind), group in ordered_groups:
        keys = sorted({names.key(k) for k in group.keys})
        shown = {"scope": position.get((scope, version), -1), "name": names.name(name),
                 "kind": KINDS[kind] if 0 <= kind < len(KINDS) else KINDS[0], "spans": group.spans,
                 "keys": keys[:MAX_KEYS], "keys_omitted": max(0, len(keys) - MAX_KEYS),
                 "keys_cut": group.keys_cut, "events": sorted({names.name(e) for e in group.events})[:MAX_EVENTS]}
        cost = len(msgspec.json.encode(shown)) + 1
        if len(out["groups"]) >= MAX_GROUPS or size + cost > MAX_BYTES:
            out["groups_omitted"] += 1
            out["spans_omitted"] += group.spans
            continue
        out["groups"].append(shown)
        size += cost
    return out
