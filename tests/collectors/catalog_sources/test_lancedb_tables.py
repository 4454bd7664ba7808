"""The lancedb source on Lance tables written here with Lance's own writer (pylance, the `lancedb` extra): one
entry per document by the fold's rules, only the metadata keys read, bounded, read-only, and a table that is
missing or shaped otherwise fails the sync with what was wrong named. The tables LangChain's LanceDB store writes
are read in test_lancedb.py."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pydantic import ValidationError

from ragmon.collectors.catalog_sources import build_source
from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.monitor.config.catalog_sources import LanceDbSourceConfig

NOW = 1_800_000_000.0
ROWS = [  # chunks as an indexer writes them: (id, text, metadata); leave.md re-indexed in part
    ("c1", "Leave: ten days.", {"doc_id": "hr/leave.md", "doc_version": "v1", "acl": ["group:staff"],
                                "indexed_at": "2026-11-01T10:00:00+00:00"}),
    ("c2", "Pay: monthly.", {"doc_id": "hr/pay.md", "doc_version": "p1", "acl": ["group:payroll"],
                             "indexed_at": "2026-11-01T10:00:05+00:00"}),
    ("c3", "Leave: twelve days.", {"doc_id": "hr/leave.md", "doc_version": "v2", "acl": ["group:hr"],
                                   "indexed_at": "2026-11-20T09:00:00+00:00"}),
    ("c4", "Carry over: five.", {"doc_id": "hr/leave.md", "doc_version": "v1", "acl": ["group:staff"],
                                 "indexed_at": "2026-11-01T10:00:02+00:00"}),
]


def seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def write_table(database: Path, table: str, rows=ROWS, nested: bool = True) -> Path:
    """``rows`` as a Lance dataset ``database/table.lance``, with a vector column, as LanceDB lays a table out."""
    records = [{"id": chunk_id, "vector": [float(n), 1.0], "text": text, **({"metadata": metadata} if nested
                                                                          else metadata)}
               for n, (chunk_id, text, metadata) in enumerate(rows)]
    folder = database / f"{table}.lance"
    lance.write_dataset(pa.Table.from_pylist(records), str(folder), mode="overwrite")
    return folder


def read(database: Path, **options):
    config = LanceDbSourceConfig(**{"name": "lance", "kind": "lancedb", "path": database, "collections": ["policies"],
                                    **options})
    return build_source(config, SourceContext(lambda: NOW, {})).read()


def entries(snapshot) -> dict[tuple[str, str], tuple]:
    return {key: (e.version, e.chunks, e.acl, e.indexed_at) for key, e in snapshot.index_entries.items()}


@pytest.mark.parametrize("nested", [True, False], ids=["metadata struct", "columns of their own"])
def test_rows_fold_into_one_entry_per_document(tmp_path, nested):
    write_table(tmp_path, "policies", nested=nested)
    snapshot = read(tmp_path, **({} if nested else {"metadata_column": None}))
    assert not snapshot.refused and not snapshot.unread_entries
    # leave.md: the oldest version (v1, indexed first), the latest time of v1's chunks, every chunk's readers
    assert entries(snapshot) == {
        ("policies", "hr/leave.md"): ("v1", 3, ["group:staff", "group:hr"], seconds("2026-11-01T10:00:02+00:00")),
        ("policies", "hr/pay.md"): ("p1", 1, ["group:payroll"], seconds("2026-11-01T10:00:05+00:00")),
    }


def test_tables_are_indexes_by_their_names_and_rows_deleted_are_gone(tmp_path):
    write_table(tmp_path, "policies")
    folder = write_table(tmp_path, "kb_v3", rows=[("k1", "x", {"doc_id": "kb/a.md", "doc_version": "a1"})])
    lance.dataset(str(tmp_path / "policies.lance")).delete("id = 'c2'")  # a new version without pay.md
    snapshot = read(tmp_path, collections=["policies", "kb_v3"], index_names={"kb_v3": "kb"})
    assert set(snapshot.index_entries) == {("policies", "hr/leave.md"), ("kb", "kb/a.md")}
    kb = snapshot.index_entries[("kb", "kb/a.md")]
    assert (kb.version, kb.acl, kb.indexed_at, kb.chunks) == ("a1", None, NOW, 1)  # no ACL key: unknown
    assert folder.is_dir()


def test_chunks_without_a_document_id_or_version_are_refused(tmp_path):
    rows = [("a", "x", {"doc_id": "hr/a.md", "doc_version": None}), ("b", "y", {"doc_id": None, "doc_version": "1"}),
            ("c", "z", {"doc_id": "hr/c.md", "doc_version": "c1"})]
    write_table(tmp_path, "policies", rows=rows)
    snapshot = read(tmp_path)
    assert set(snapshot.index_entries) == {("policies", "hr/c.md")}
    assert snapshot.refused["bad_record"] == 2 and snapshot.unread_entries == {("policies", "hr/a.md")}
    # a document id key the table's schema lacks: every row is refused, nothing is read as an entry
    snapshot = read(tmp_path, doc_id_key="source")
    assert snapshot.index_entries == {} and snapshot.refused["bad_record"] == 3


def test_only_the_metadata_keys_are_read_never_the_vectors_or_the_text(tmp_path, monkeypatch):
    write_table(tmp_path, "policies")
    asked: list = []
    scan = lance.LanceDataset.to_batches

    def spied(self, *args, **kwargs):
        asked.append(kwargs.get("columns"))
        return scan(self, *args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "to_batches", spied)
    read(tmp_path, acl_keys={"acl": "", "groups": "group:"})  # `groups` is not in the table: not asked for
    assert asked == [{"doc_id": "`metadata`.`doc_id`", "doc_version": "`metadata`.`doc_version`",
                      "acl": "`metadata`.`acl`", "indexed_at": "`metadata`.`indexed_at`"}]


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_read_changes_nothing_in_the_table(tmp_path):
    folder = write_table(tmp_path, "policies")
    before = tree_digest(folder)
    read(tmp_path)
    read(tmp_path)
    assert tree_digest(folder) == before


def test_a_table_not_read_whole_fails_the_sync(tmp_path):
    write_table(tmp_path, "policies")
    with pytest.raises(SourceError, match="table 'missing' not found: no folder .*missing.lance") as raised:
        read(tmp_path, collections=["policies", "missing"])
    assert raised.value.reason == "unavailable"
    with pytest.raises(SourceError, match=r"table 'policies' holds 4 chunks, more than max_chunks \(3\)") as raised:
        read(tmp_path, max_chunks=3)
    assert raised.value.reason == "too_large"
    with pytest.raises(SourceError, match="has no column 'meta' .metadata_column.; set metadata_column to null"):
        read(tmp_path, metadata_column="meta")
    with pytest.raises(SourceError, match="column 'text' .metadata_column. is not a struct of metadata keys"):
        read(tmp_path, metadata_column="text")
    (tmp_path / "broken.lance").mkdir()  # a folder that is no Lance dataset
    with pytest.raises(SourceError, match="table 'broken': ") as raised:
        read(tmp_path, collections=["broken"])
    assert raised.value.reason == "unavailable"


def test_max_items_keeps_the_first_documents_by_id(tmp_path):
    write_table(tmp_path, "policies")
    snapshot = read(tmp_path, max_items=1)
    assert set(snapshot.index_entries) == {("policies", "hr/leave.md")}
    assert snapshot.refused["too_many"] == 1 and snapshot.unread_entries == {("policies", "hr/pay.md")}


def test_without_the_extra_the_configuration_and_the_sync_name_it(tmp_path, monkeypatch):
    write_table(tmp_path, "policies")
    config = LanceDbSourceConfig(name="lance", kind="lancedb", path=tmp_path, collections=["policies"])
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lance" else found(name, *a))
    missing = r'pylance package, which is not installed: pip install "ragmon\[lancedb\]"'
    with pytest.raises(ValidationError, match=missing):
        LanceDbSourceConfig(name="lance", kind="lancedb", path=tmp_path, collections=["policies"])
    monkeypatch.setitem(sys.modules, "lance", None)  # installed when configured, gone when synced
    with pytest.raises(SourceError, match=r'kind lancedb needs the pylance package .*pip install "ragmon\[lancedb\]"'):
        build_source(config, SourceContext(lambda: NOW, {})).read()
