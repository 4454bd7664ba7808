"""The lancedb source against tables the frameworks wrote on lancedb 0.40.0, in the frameworks' environment, read by
ragmon with pylance alone: LangChain's `LanceDB` vector store (langchain-community 0.4.2) through a first indexing,
a re-indexing cut short and a document deleted, then `ragmon catalog sync`; LlamaIndex's `LanceDBVectorStore`
(llama-index-vector-stores-lancedb 0.6.0). Expected entries come from what the framework returned and LanceDB's
own client reads back, never from ragmon's code."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from datetime import datetime
from typing import Any

import pytest
from click.testing import CliRunner

from ragmon.collectors.catalog_sources.base import SourceContext
from ragmon.collectors.catalog_sources.lancedb import LanceDbSource
from ragmon.monitor.app.cli import main
from ragmon.monitor.config.catalog_sources import LanceDbSourceConfig
from tests.collectors.catalog_sources.frameworks import write

pytestmark = pytest.mark.integration  # LangChain and LanceDB run in the frameworks' environment

DOCUMENTS = {
    "hr/leave.md": {"chunks": ["Staff carry over five days.", "Requests go to the manager.", "Sick leave: a note."],
                    "version": "leave-1", "acl": ["group:staff"]},
    "hr/pay.md": {"chunks": ["Salaries are paid monthly."], "version": "pay-1",
                  "acl": ["group:staff", "group:payroll"]},
    "hr/travel.md": {"chunks": ["Book trains.", "Hotels by the travel desk."], "version": "travel-1"},
}
LEAVE_2 = {"hr/leave.md": {"chunks": ["Staff carry over ten days.", "Requests go to HR."], "version": "leave-2",
                           "acl": ["group:hr"]}}


def expected_entries(rows: list[dict[str, Any]], old_versions: dict[str, str]) -> dict[str, tuple]:
    """(version, chunks, readers, indexed time) per document, from the rows LanceDB read back: a document whose
    chunks hold two versions is at the old one (``old_versions``, known to the test)."""
    chunks: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        chunks[row["metadata"]["doc_id"]].append(row["metadata"])
    out = {}
    for doc_id, mine in chunks.items():
        versions = {m["doc_version"] for m in mine}
        version = old_versions[doc_id] if len(versions) > 1 else versions.pop()
        readers: list[str] = []
        for m in mine:
            readers += [r for r in (m["acl"] or []) if r not in readers]
        latest = max(datetime.fromisoformat(m["indexed_at"]).timestamp() for m in mine if m["doc_version"] == version)
        out[doc_id] = (version, len(mine), readers if any(m["acl"] is not None for m in mine) else None, latest)
    return out


def entries_read(uri, **options) -> dict[str, tuple]:
    config = LanceDbSourceConfig(name="index", kind="lancedb", path=uri, collections=["policies"], **options)
    snapshot = LanceDbSource(config, SourceContext(time.time, {})).read()
    assert not snapshot.refused and not snapshot.unread_entries
    return {doc_id: (e.version, e.chunks, e.acl, e.indexed_at) for (index, doc_id), e in
            snapshot.index_entries.items() if index == "policies"}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> dict[str, Any]:
    """DOCUMENTS indexed by LangChain into a new table: the database directory and what LanceDB read back."""
    scratch = tmp_path_factory.mktemp("lancedb")
    uri = scratch / "lancedb"
    first = write("langchain_lancedb", {"uri": str(uri), "table": "policies", "documents": DOCUMENTS}, scratch)
    assert len(first["added"]) == sum(len(d["chunks"]) for d in DOCUMENTS.values()) == len(first["rows"])
    return {"uri": uri, "scratch": scratch, "first": first}


def test_a_table_written_by_langchain_is_read_as_one_entry_per_document(indexed):
    expected = expected_entries(indexed["first"]["rows"], {})
    assert set(expected) == set(DOCUMENTS) and expected["hr/travel.md"][2] is None  # no ACL written: unknown
    assert entries_read(indexed["uri"]) == expected
    assert entries_read(indexed["uri"], doc_id_key="source", id_prefix="corpus/") == {
        f"corpus/{doc_id}": entry for doc_id, entry in expected.items()}


def test_a_reindexing_cut_short_and_a_deletion_through_langchain(indexed, tmp_path):
    sources = [{"name": "policies-index", "kind": "lancedb", "path": str(indexed["uri"]),
                "collections": ["policies"]}]
    environ = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
               "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_CATALOG__SOURCES": json.dumps(sources)}

    def sync() -> dict[str, Any]:
        done = CliRunner().invoke(main, ["catalog", "sync", "-o", "json", "--accept-deletions"], env=environ)
        assert done.exit_code == 0, done.output
        [report] = json.loads(done.stdout)
        return report

    first = sync()
    assert (first["outcome"], first["items"], first["changes"]["index"]) == ("ok", len(DOCUMENTS), len(DOCUMENTS))
    assert sync()["changes"] == {"document": 0, "tombstone": 0, "index": 0, "removal": 0}

    # leave.md re-indexed in part (its new first chunk appended beside the old ones), travel.md deleted
    later = write("langchain_lancedb", {"uri": str(indexed["uri"]), "table": "policies", "mode": "append",
                                        "documents": LEAVE_2, "first_chunks": 1, "delete_sources": ["hr/travel.md"]},
                  tmp_path)
    assert later["version"] > indexed["first"]["version"]
    expected = expected_entries(later["rows"], {"hr/leave.md": "leave-1"})
    assert set(expected) == {"hr/leave.md", "hr/pay.md"}
    leave = expected["hr/leave.md"]
    assert leave[0] == "leave-1" and leave[1] == 4 and leave[2] == ["group:staff", "group:hr"]
    assert entries_read(indexed["uri"]) == expected
    changed = sync()
    assert changed["changes"] == {"document": 0, "tombstone": 0, "index": 1, "removal": 1}  # leave.md, travel.md


def test_a_table_written_by_llamaindex_is_read_by_its_ref_doc_ids(tmp_path):
    words = "Staff carry over five days of leave each year and requests go to the manager two weeks ahead. "
    documents = {"hr/leave.md": {"text": words * 8, "version": "leave-1", "acl": "group:staff, group:hr"},
                 "hr/pay.md": {"text": "Salaries are paid on the last working day.", "version": "pay-1",
                               "acl": "group:payroll"}}
    uri = tmp_path / "lancedb"
    answer = write("llamaindex_lancedb", {"uri": str(uri), "table": "policies", "documents": documents}, tmp_path)
    assert {"id", "doc_id", "vector", "text", "metadata"} <= set(answer["columns"])
    assert sorted(row["id"] for row in answer["rows"]) == sorted(n for ids in answer["nodes"].values() for n in ids)
    assert len(answer["nodes"]["hr/leave.md"]) > 1  # split into several nodes
    # LlamaIndex writes its ref doc id as `doc_id` into every node's metadata (over the application's own)
    assert all(row["metadata"]["doc_id"] == row["doc_id"] == row["metadata"]["source"] for row in answer["rows"])
    expected = {}
    for ref, node_ids in answer["nodes"].items():
        times = {datetime.fromisoformat(row["metadata"]["indexed_at"]).timestamp() for row in answer["rows"]
                 if row["doc_id"] == ref}
        expected[ref] = (documents[ref]["version"], len(node_ids),
                         [name.strip() for name in documents[ref]["acl"].split(",")], max(times))
    assert entries_read(uri) == expected
    assert entries_read(uri, doc_id_key="source") == expected
