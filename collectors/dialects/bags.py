"""Attribute families that hold a key-value bag under a prefix, one attribute per key (MLflow's
trace tags ``mlflow.traceTag.<key>``, Langfuse's ``langfuse.trace.metadata.<key>``), read by a lookup
per wanted key, never by a scan of a span's attributes; and the filling of one span's facts from
another place of the same span."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragmon.collectors.dialects.base import CallerKeys, TraceFacts
from ragmon.collectors.semconv import parse_json_text


def caller_key_names(keys: CallerKeys) -> tuple[str, ...]:
    """Every key the caller keys name, in their order."""
    return (*keys.user, *keys.session, *keys.tenant, *keys.groups, *keys.index)


def prefixed_bag(attributes: dict[str, Any], prefix: str, keys: Iterable[str], json_values: bool) -> dict[str, Any]:
    """The values of ``keys`` under ``prefix``; with ``json_values`` each value's JSON text decoded
    (a value that is not JSON is kept as it is)."""
    found = {}
    for key in keys:
        value = attributes.get(prefix + key)
        if value is not None:
            if json_values and isinstance(value, str):
                parsed = parse_json_text(value)
                value = value if parsed is None else parsed
            found[key] = value
    return found


def fill(facts: TraceFacts, more: TraceFacts) -> TraceFacts:
    """What ``facts`` lacks of the caller, conversation, tenant, groups and index, taken from ``more``."""
    facts.caller_id = facts.caller_id or more.caller_id
    facts.conversation = facts.conversation or more.conversation
    facts.tenant = facts.tenant or more.tenant
    facts.index = facts.index or more.index
    facts.groups = facts.groups if facts.groups is not None else more.groups
    return facts
