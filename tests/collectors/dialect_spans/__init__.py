"""Real spans, as the frameworks' own exporters sent them: one OTLP/JSON export request per question's
trace, captured from the conformance apps in tests/clients/apps/ (simple span processor, JSON), with
what the application reported for the question (its question, answer, caller, and the ids and scores
of each list the framework returned)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragmon.collectors.otlp_wire import Span, parse_json

HERE = Path(__file__).parent


class Capture:
    """The questions of one capture (``mlflow_3_17``, ...); each look-up parses its spans afresh
    (the mapper keeps what it read on a span)."""

    def __init__(self, name: str) -> None:
        self._fixtures = json.loads((HERE / f"{name}.json").read_text())

    def __len__(self) -> int:
        return len(self._fixtures)

    def __getitem__(self, n: int) -> tuple[dict[str, Any], list[Span]]:
        """``(reported, spans)`` of question ``n``."""
        fixture = self._fixtures[n]
        return fixture["reported"], parse_json(json.dumps(fixture["export"]).encode())


def named(spans: list[Span], name: str) -> Span:
    """The span of ``spans`` called ``name``."""
    return next(s for s in spans if s.name == name)


def root_of(spans: list[Span]) -> Span:
    """The span of ``spans`` without a parent."""
    return next(s for s in spans if not s.parent_id)
