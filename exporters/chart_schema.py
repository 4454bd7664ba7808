"""The `config` part of the Helm chart's values.schema.json, generated from the pydantic models of
the configuration, so `helm install --set config.bogus=1` fails at render time with the same
unknown-key and type rules `ragmon config check` applies.

The rest of the chart's schema is written by hand; ``python -m ragmon.exporters.chart_schema
helm/ragmon/values.schema.json`` replaces its `config` property and `$defs` in place (a test
fails when the checked-in file differs from what this makes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ragmon.monitor.config.settings import Settings

# the chart sets these itself (the pods' address and the Service's ports), so they are not the user's
SET_BY_THE_CHART = {"HttpConfig": ("host", "port", "read_port")}


def config_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema of the config file (every key optional, unknown keys refused) and its ``$defs``,
    without titles and defaults (the values file is an override; Helm does not apply defaults)."""
    schema = _without(Settings.model_json_schema(mode="validation"), {"title", "default"})
    definitions = schema.pop("$defs")
    for name, keys in SET_BY_THE_CHART.items():
        for key in keys:
            definitions[name]["properties"][key] = {"not": {}, "description": "Set by the chart."}
    schema["description"] = ("The ragmon config file (docs/configuration.md), mounted at /etc/ragmon/ragmon.yaml; "
                             "no secrets.")
    return schema, definitions


def values_schema(chart_schema: dict[str, Any]) -> dict[str, Any]:
    """``chart_schema`` with its `config` property and ``$defs`` made from the config models."""
    config, definitions = config_schema()
    updated = dict(chart_schema)
    updated["properties"] = {**chart_schema["properties"], "config": config}
    updated["$defs"] = definitions
    return updated


def render(chart_schema: dict[str, Any]) -> str:
    return json.dumps(values_schema(chart_schema), indent=2, ensure_ascii=False) + "\n"


def _without(node: Any, keys: set[str]) -> Any:
    if isinstance(node, dict):
        # "properties" maps field names, which may be called like a dropped keyword
        return {k: (_without(v, keys) if k != "properties" else {n: _without(p, keys) for n, p in v.items()})
                for k, v in node.items() if k not in keys}
    if isinstance(node, list):
        return [_without(item, keys) for item in node]
    return node


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.write_text(render(json.loads(target.read_text(encoding="utf-8"))), encoding="utf-8")
