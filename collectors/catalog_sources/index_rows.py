"""From rows an index keeps per chunk to one index entry per document: the fold every index-entry
source kept in a table shares (docs/catalog.md, "Index entries kept in SQL").

An index holds a document as several chunks, each a row (of a vector store's table, of a record
manager). They fold into one :class:`IndexEvent` per ``(index, doc_id)``:

- ``chunks``: the rows;
- ``indexed_at``: the newest row's time;
- ``version`` and ``acl``: the newest row's (a document re-indexed chunk by chunk holds the new version
  once its newest chunk is written; ties go to the greater version, so the fold does not depend on
  the order rows came in).

Documents beyond ``max_items`` (in the order of their keys) are refused, ``too_many``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmon.collectors.catalog_sources.base import IndexKey, Snapshot
from ragmon.monitor.core.model import IndexEvent


@dataclass(frozen=True)
class ChunkRow:
    """One chunk of a document as an index keeps it; ``doc_id`` already a join key."""

    index: str
    doc_id: str
    version: str
    indexed_at: float
    acl: list[str] | None = None


def fold(rows: list[ChunkRow], max_items: int, snapshot: Snapshot) -> dict[IndexKey, IndexEvent]:
    """One entry per document of ``rows`` (see the module), at most ``max_items`` of them; those
    beyond are counted in ``snapshot`` (``too_many``) and keep their last state."""
    newest: dict[IndexKey, ChunkRow] = {}
    counts: dict[IndexKey, int] = {}
    for row in rows:
        key = (row.index, row.doc_id)
        counts[key] = counts.get(key, 0) + 1
        held = newest.get(key)
        if held is None or (row.indexed_at, row.version) > (held.indexed_at, held.version):
            newest[key] = row
    entries: dict[IndexKey, IndexEvent] = {}
    for position, key in enumerate(sorted(newest)):
        if position >= max_items:
            snapshot.refused["too_many"] += 1
            snapshot.unread_entries.add(key)
            continue
        row = newest[key]
        entries[key] = IndexEvent(index=row.index, doc_id=row.doc_id, version=row.version,
                                  indexed_at=row.indexed_at, chunks=counts[key], acl=row.acl)
    return entries
