"""A LlamaIndex docstore as index entries: `docstore.json` persisted by LlamaIndex itself (in the frameworks'
environment) from a folder, then brought level with the folder after an edit and a deletion. Expected values come
from what LlamaIndex answered (`ref_doc_info`, `get_document_hash`, `refresh_ref_docs`), never from ragmon."""

from __future__ import annotations

import json
import os
import time

import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.docstore import DocstoreSource
from ragmon.monitor.config.catalog_sources import DocstoreSourceConfig
from tests.collectors.catalog_sources.frameworks import write

pytestmark = pytest.mark.integration  # LlamaIndex runs in the frameworks' environment

CORPUS = {"hr/leave.md": "Leave policy. Ten days a year. Carry over five days. Ask your manager first.\n",
          "hr/pay.md": "Pay is monthly.\n", "sales/deck.md": "The deck.\n"}
ACL = {"hr/leave.md": ["group:staff"], "hr/pay.md": "group:payroll, user:u-7"}


def read(**options):
    options = {"name": "llamaindex", "kind": "llamaindex_docstore", "index": "policies", **options}
    return DocstoreSource(DocstoreSourceConfig(**options), SourceContext(time.time, {})).read()


def corpus(tmp_path, files):
    root = tmp_path / "corpus"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_each_source_document_with_its_hash_nodes_and_readers_then_an_edit_and_a_deletion(tmp_path):
    root = corpus(tmp_path, CORPUS)
    plan = {"corpus": str(root), "persist": str(tmp_path / "storage"), "acl": ACL}
    first = write("llamaindex_docstore", plan, tmp_path)
    entries = read(path=tmp_path / "storage").index_entries
    assert set(entries) == {("policies", ref_id) for ref_id in first["ref_doc_info"]}
    for ref_id, info in first["ref_doc_info"].items():
        entry = entries[("policies", ref_id)]
        assert (entry.version, entry.chunks, entry.indexed_at) == (
            info["doc_hash"], len(info["node_ids"]), first["persisted_mtime"])
    acls = {os.path.relpath(doc_id, root): entry.acl for (_, doc_id), entry in entries.items()}
    assert acls == {"hr/leave.md": ["group:staff"], "hr/pay.md": ["group:payroll", "user:u-7"], "sales/deck.md": None}
    assert entries[("policies", str(root / "hr/leave.md"))].chunks > 1  # the splitter made several nodes

    (root / "hr/pay.md").write_text("Pay is monthly, on the last day.\n")
    second = write("llamaindex_docstore", {**plan, "delete": ["hr/leave.md"]}, tmp_path)
    assert second["refreshed"] == {str(root / "hr/leave.md"): False, str(root / "hr/pay.md"): True,
                                   str(root / "sales/deck.md"): False}
    entries = read(path=tmp_path / "storage" / "docstore.json").index_entries
    assert set(entries) == {("policies", str(root / "hr/pay.md")), ("policies", str(root / "sales/deck.md"))}
    pay = entries[("policies", str(root / "hr/pay.md"))]
    assert pay.version == second["ref_doc_info"][str(root / "hr/pay.md")]["doc_hash"] != first["ref_doc_info"][
        str(root / "hr/pay.md")]["doc_hash"]


def test_the_version_and_the_indexed_time_from_the_documents_metadata(tmp_path):
    root = corpus(tmp_path, CORPUS)
    versions = {relative: f"blob-{n}" for n, relative in enumerate(CORPUS)}
    plan = {"corpus": str(root), "persist": str(tmp_path / "storage"), "versions": versions,
            "indexed_at": "2026-11-02T09:00:00Z"}
    answer = write("llamaindex_docstore", plan, tmp_path)
    entries = read(path=tmp_path / "storage", version_key="doc_version", indexed_at_key="indexed_at",
                   doc_id_key=None, id_prefix="li:").index_entries
    assert {doc_id: (entry.version, entry.indexed_at) for (_, doc_id), entry in entries.items()} == {
        f"li:{ref_id}": (info["metadata"]["doc_version"], 1793610000.0)
        for ref_id, info in answer["ref_doc_info"].items()}
    assert sorted(entry.version for entry in entries.values()) == sorted(versions.values())


def test_a_document_that_cannot_be_read_keeps_its_last_state_and_a_broken_store_fails(tmp_path):
    root = corpus(tmp_path, CORPUS)
    write("llamaindex_docstore", {"corpus": str(root), "persist": str(tmp_path / "storage"), "acl": ACL}, tmp_path)
    path = tmp_path / "storage" / "docstore.json"
    store = json.loads(path.read_text())
    store["docstore/ref_doc_info"][str(root / "hr/pay.md")]["metadata"]["acl"] = 7
    del store["docstore/ref_doc_info"][str(root / "sales/deck.md")]["metadata"]["file_path"]
    path.write_text(json.dumps(store))
    snapshot = read(path=path)
    assert set(snapshot.index_entries) == {("policies", str(root / "hr/leave.md"))}
    assert snapshot.refused == {"bad_record": 2} and snapshot.unread_entries == {("policies", str(root / "hr/pay.md"))}

    with pytest.raises(SourceError, match="no other/ref_doc_info") as namespace:
        read(path=path, namespace="other")
    assert namespace.value.reason == "bad_format"
    with pytest.raises(SourceError) as large:
        read(path=path, max_bytes=path.stat().st_size - 1)
    assert large.value.reason == "too_large"
    path.write_text("{not json")
    with pytest.raises(SourceError) as broken:
        read(path=path)
    assert broken.value.reason == "bad_format"
    with pytest.raises(SourceError) as missing:
        read(path=tmp_path / "nowhere")
    assert missing.value.reason == "unavailable"
