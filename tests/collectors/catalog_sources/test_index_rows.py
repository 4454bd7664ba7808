"""Chunks an index keeps per row, folded into one index entry per document."""

from __future__ import annotations

import random

from ragmon.collectors.catalog_sources.base import Snapshot
from ragmon.collectors.catalog_sources.index_rows import ChunkRow, fold

ROWS = [
    ChunkRow("policies", "leave.md", "v1", 100.0, ["group:staff"]),
    ChunkRow("policies", "leave.md", "v2", 200.0, ["group:hr"]),
    ChunkRow("policies", "leave.md", "v1", 150.0, ["group:staff"]),
    ChunkRow("policies", "pay.md", "a", 300.0),
    ChunkRow("policies", "pay.md", "b", 300.0),  # a tie: the lesser version
    ChunkRow("sales", "leave.md", "v9", 50.0),
]


def test_the_oldest_row_gives_the_version_every_row_the_readers_and_the_rows_are_the_chunks():
    """leave.md re-indexed in part: its v1 rows are still served, so the entry is v1 (newest v1 time),
    and whoever any row admits (staff, hr) can read part of it."""
    for _ in range(5):  # whatever the order the rows came in
        rows = random.sample(ROWS, len(ROWS))
        snapshot = Snapshot(index_entries={})
        entries = fold(rows, 10, snapshot)
        found = {key: (e.version, e.indexed_at, e.chunks, e.acl) for key, e in entries.items()}
        assert found == {("policies", "leave.md"): ("v1", 150.0, 3, ["group:hr", "group:staff"]),
                         ("policies", "pay.md"): ("a", 300.0, 2, None),
                         ("sales", "leave.md"): ("v9", 50.0, 1, None)}
        assert not snapshot.refused


def test_documents_beyond_max_items_are_refused_in_key_order_and_keep_their_last_state():
    snapshot = Snapshot(index_entries={})
    entries = fold(ROWS, 2, snapshot)
    assert set(entries) == {("policies", "leave.md"), ("policies", "pay.md")}
    assert snapshot.refused == {"too_many": 1} and snapshot.unread_entries == {("sales", "leave.md")}
