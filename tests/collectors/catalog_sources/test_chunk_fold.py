"""Folding a vector store's chunks into index entries: one entry per document, the oldest version of a
document re-indexed in part, every chunk's readers, the indexed time or the sync's, and chunks that
cannot be read counted. The stores' own schemas are tested in tests/clients/test_chroma_catalog.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragmon.collectors.catalog_sources.base import Snapshot, SourceError
from ragmon.collectors.catalog_sources.chunk_fold import ChunkKeys, fold, fold_collections, keep_at_most

KEYS = ChunkKeys(doc_id="source", version="doc_version", acl={"acl": "", "groups": "group:"},
                 indexed_at="indexed_at", id_prefix="corpus/", embedding_model="embed-1")
SYNC_TIME = 1_800_000_000.0


def entries(chunks, keys=KEYS):
    snapshot = Snapshot(index_entries={})
    return fold("policies", chunks, keys, snapshot, SYNC_TIME), snapshot


def test_the_chunks_of_a_document_are_one_entry_counted():
    folded, snapshot = entries([
        {"source": "./hr/leave.md", "doc_version": "v1", "acl": "group:staff", "indexed_at": 1_700_000_000},
        {"source": "hr/leave.md", "doc_version": "v1", "acl": ["group:staff"], "indexed_at": "2023-11-14T22:13:30Z"},
        {"source": "hr/pay.md", "doc_version": 7, "groups": "payroll, user:u-1", "indexed_at": 1_700_000_000_000},
    ])
    assert sorted(folded) == [("policies", "corpus/hr/leave.md"), ("policies", "corpus/hr/pay.md")]
    leave = folded[("policies", "corpus/hr/leave.md")]
    assert (leave.version, leave.chunks, leave.acl, leave.embedding_model) == ("v1", 2, ["group:staff"], "embed-1")
    assert leave.indexed_at == 1_700_000_010.0  # the later of its chunks' times (the version in whole)
    pay = folded[("policies", "corpus/hr/pay.md")]
    assert (pay.version, pay.chunks, pay.acl, pay.indexed_at) == ("7", 1, ["group:payroll", "user:u-1"],
                                                                   1_700_000_000.0)
    assert not snapshot.refused and not snapshot.unread_entries


def test_a_document_re_indexed_in_part_keeps_its_oldest_version():
    # the new version's chunks were added first in the store's order, but indexed later
    folded, _ = entries([
        {"source": "a.md", "doc_version": "new", "indexed_at": 1_700_000_500},
        {"source": "a.md", "doc_version": "old", "indexed_at": 1_700_000_100},
        {"source": "a.md", "doc_version": "old", "indexed_at": 1_700_000_200},
    ])
    entry = folded[("policies", "corpus/a.md")]
    assert (entry.version, entry.indexed_at, entry.chunks) == ("old", 1_700_000_200.0, 3)


def test_without_times_the_chunk_held_first_names_the_version_and_the_sync_dates_it():
    folded, _ = entries([{"source": "a.md", "doc_version": "old"}, {"source": "a.md", "doc_version": "new"}])
    entry = folded[("policies", "corpus/a.md")]
    assert (entry.version, entry.indexed_at) == ("old", SYNC_TIME)
    no_key = ChunkKeys(doc_id="source", version="doc_version", acl={"acl": ""}, indexed_at=None)
    folded, _ = entries([{"source": "a.md", "doc_version": "v", "indexed_at": 5}], no_key)
    assert folded[("policies", "a.md")].indexed_at == SYNC_TIME


def test_readers_of_every_chunk_and_unknown_when_none_says():
    folded, _ = entries([
        {"source": "a.md", "doc_version": "v", "acl": "group:staff, group:hr"},
        {"source": "a.md", "doc_version": "v", "acl": '["group:hr", "*"]'},
        {"source": "b.md", "doc_version": "v"},
        {"source": "c.md", "doc_version": "v", "groups": []},
    ])
    assert folded[("policies", "corpus/a.md")].acl == ["group:staff", "group:hr", "*"]
    assert folded[("policies", "corpus/b.md")].acl is None
    assert folded[("policies", "corpus/c.md")].acl == []


def test_chunks_that_cannot_be_read_are_counted_and_their_documents_keep_their_last_state():
    folded, snapshot = entries([
        {"doc_version": "v"},  # no document id
        {"source": "  ", "doc_version": "v"},
        {"source": "a.md"},  # no version: a keeps its last state, having no chunk read
        {"source": "b.md", "doc_version": True},
        {"source": "b.md", "doc_version": "v2", "acl": " , "},  # an ACL the rule refuses: b's is unknown
        {"source": "b.md", "doc_version": "v2", "acl": "group:staff"},
    ])
    assert list(folded) == [("policies", "corpus/b.md")]
    b = folded[("policies", "corpus/b.md")]
    assert (b.version, b.chunks, b.acl) == ("v2", 2, None)
    assert snapshot.refused == {"bad_record": 5}
    assert snapshot.unread_entries == {("policies", "corpus/a.md")}


def test_entries_beyond_max_items_are_refused_in_the_order_of_their_keys():
    folded, snapshot = entries([{"source": name, "doc_version": "v"} for name in ("c.md", "a.md", "b.md")])
    snapshot.index_entries = folded
    keep_at_most(snapshot, 2)
    assert sorted(snapshot.index_entries) == [("policies", "corpus/a.md"), ("policies", "corpus/b.md")]
    assert snapshot.refused == {"too_many": 1} and snapshot.unread_entries == {("policies", "corpus/c.md")}


def test_collections_fold_under_their_index_and_two_holding_one_document_under_one_index_fail():
    chunks = {"kb_v3": [{"source": "a.md", "doc_version": "v3"}], "kb_v2": [{"source": "a.md", "doc_version": "v2"}],
              "faq": [{"source": "a.md", "doc_version": "v1"}, {"source": "b.md", "doc_version": "v1"}]}
    config = SimpleNamespace(collections=["kb_v3", "faq"], index_names={"kb_v3": "kb"}, max_items=2)
    snapshot = fold_collections(config, KEYS, chunks.__getitem__, SYNC_TIME)
    assert {key: entry.version for key, entry in snapshot.index_entries.items()} == {
        ("faq", "corpus/a.md"): "v1", ("faq", "corpus/b.md"): "v1"}
    # max_items over all the collections, in key order
    assert snapshot.refused == {"too_many": 1} and snapshot.unread_entries == {("kb", "corpus/a.md")}
    config.max_items = 3
    assert fold_collections(config, KEYS, chunks.__getitem__, SYNC_TIME).index_entries[("kb", "corpus/a.md")].version \
        == "v3"
    # both kb_v3 and kb_v2 named kb: one entry of a.md would silently replace the other
    clash = SimpleNamespace(collections=["kb_v3", "kb_v2"], index_names={"kb_v3": "kb", "kb_v2": "kb"}, max_items=9)
    with pytest.raises(SourceError, match="table 'kb_v2' and another one hold chunks of one document under the "
                                          "index 'kb'"):
        fold_collections(clash, KEYS, chunks.__getitem__, SYNC_TIME, what="table")
