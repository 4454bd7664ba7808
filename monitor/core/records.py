"""What every source hands to the pipeline: raw bytes plus where they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ragmon.monitor.core.errors import Reason


class Privilege(StrEnum):
    """What the sender of a record may do, from least to most. A closed set: a dead letter keeps it,
    so that replaying the record never grants more than its sender had (docs/events.md, "Dead letters").

    - ``ingest``: an HTTP or OTLP client holding the ingest token only; may not change the catalog.
    - ``catalog``: an HTTP client holding the catalog token (or any client of a loopback port
      without one, where the catalog may be written over HTTP).
    - ``trusted``: what the operator feeds in (``ragmon replay FILE``) and the Kafka topics, guarded
      by their own ACLs.
    """

    INGEST = "ingest"
    CATALOG = "catalog"
    TRUSTED = "trusted"


@dataclass(slots=True, frozen=True)
class RawRecord:
    """One undecoded input record.

    ``source`` is a closed-set name (``file``, ``kafka``, ``http``, ``otlp``) used as a metric label.
    ``origin`` locates the record for the dead-letter sink, e.g. ``{"path": ..., "line": 12}`` or
    ``{"topic": ..., "partition": 3, "offset": 1042}``; it never holds record content.
    ``privilege`` is what its sender may do (:class:`Privilege`; the least unless the source says
    otherwise); a dead letter of the record keeps it.
    ``catalog_granted`` is an operator's grant of the catalog right for this one pass
    (``ragmon dead-letters replay --grant-catalog``): it is never written into a dead letter.
    """

    source: str
    data: bytes
    origin: dict[str, Any] = field(default_factory=dict)
    size: int | None = None  # the real size when a source kept only the head of an oversized record
    privilege: Privilege = Privilege.INGEST  # the least: a source grants more on purpose
    catalog_granted: bool = False

    @property
    def may_write_catalog(self) -> bool:
        """False when the sender may not change the catalog: a document or index event of it is
        rejected as ``not_permitted``."""
        return self.catalog_granted or self.privilege is not Privilege.INGEST


@dataclass(slots=True, frozen=True)
class DeadLetter:
    """A rejected record with why it was rejected; ``detail`` names the field, never its content."""

    record: RawRecord
    reason: Reason
    detail: str
