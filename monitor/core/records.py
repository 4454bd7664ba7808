"""What every source hands to the pipeline: raw bytes plus where they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragmon.monitor.core.errors import Reason


@dataclass(slots=True, frozen=True)
class RawRecord:
    """One undecoded input record.

    ``source`` is a closed-set name (``file``, ``kafka``, ``http``, ``otlp``) used as a metric label.
    ``origin`` locates the record for the dead-letter sink, e.g. ``{"path": ..., "line": 12}`` or
    ``{"topic": ..., "partition": 3, "offset": 1042}``; it never holds record content.
    ``may_write_catalog`` is False when the sender may not change the catalog (an HTTP client
    without the catalog token): a document or index event of it is rejected as ``not_permitted``.
    """

    source: str
    data: bytes
    origin: dict[str, Any] = field(default_factory=dict)
    size: int | None = None  # the real size when a source kept only the head of an oversized record
    may_write_catalog: bool = True


@dataclass(slots=True, frozen=True)
class DeadLetter:
    """A rejected record with why it was rejected; ``detail`` names the field, never its content."""

    record: RawRecord
    reason: Reason
    detail: str
