"""From rows an index keeps per chunk to one index entry per document: the fold every index-entry
source kept in a table shares (docs/catalog.md, "Index entries kept in SQL").

An index holds a document as several chunks, each a row (of a vector store's table, of a record
manager). They fold into one :class:`IndexEvent` per ``(index, doc_id)``:

- ``chunks``: the rows;
- ``version``: the oldest row's (ties: the lesser version, so the fold does not depend on the order
  rows came in). Rows of one document holding several versions are a document re-indexed in part
  (new chunks written, old ones not yet removed, or the run cut short): the index still serves the
  old chunks, so the document is stale until no row of the old version is left, as the vector-store
  sources fold their chunks (``chunk_fold``);
- ``indexed_at``: the newest time among the rows of that version;
- ``acl``: the readers of every row that names some (whoever any chunk admits can be served part of
  the document: a revocation is pending until no row admits the reader); no row naming any: unknown.

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
    by_document: dict[IndexKey, list[ChunkRow]] = {}
    for row in rows:
        by_document.setdefault((row.index, row.doc_id), []).append(row)
    entries: dict[IndexKey, IndexEvent] = {}
    for position, key in enumerate(sorted(by_document)):
        if position >= max_items:
            snapshot.refused["too_many"] += 1
            snapshot.unread_entries.add(key)
            continue
        held = by_document[key]
        version = min(held, key=lambda row: (row.indexed_at, row.version)).version
        readers = [row.acl for row in held if row.acl is not None]
        entries[key] = IndexEvent(
            index=key[0], doc_id=key[1], version=version,
            indexed_at=max(row.indexed_at for row in held if row.version == version), chunks=len(held),
            acl=sorted({name for acl in readers for name in acl}) if readers else None)
    return entries
