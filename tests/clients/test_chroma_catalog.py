"""The chroma catalog source against stores Chroma itself wrote: a folder indexed by LangChain's loader and
splitter into a persistent Chroma directory (chromadb 1.5.9, in the frameworks' environment), read by
ragmon from the directory (no Chroma) and from `chroma run` serving it, then `ragmon catalog sync`.
Expected entries come from what Chroma's own client reads back and from the files on disk, never from
ragmon's code; a store whose schema lacks a table or column ragmon relies on fails with it named."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.chroma import ChromaSource
from ragmon.monitor.app.cli import main
from ragmon.monitor.config.catalog_sources import ChromaSourceConfig
from tests.clients.chroma_store import blob_id, markdown, run_chroma_app
from tests.services.harness import Service, clients_dir, free_port, http_get

CORPUS = {  # path -> (readers in the front matter, body)
    "policies/leave.md": (["group:staff"], "Staff carry over five days of leave each year. Requests go to the "
                          "manager two weeks ahead. Sick leave needs a note after three days of absence."),
    "policies/pay.md": (["group:staff", "group:payroll"], "Salaries are paid on the last working day of the month."),
    "policies/travel.md": (["group:staff"], "Book trains for trips under four hours. Hotels are booked by the "
                           "travel desk and paid by the company card."),
}


def expected_entries(held: dict[str, Any], old_versions: dict[str, str]) -> dict[str, tuple]:
    """(version, chunks, readers, indexed time) per document, from what Chroma's client read back:
    a document whose chunks hold two versions is at the old one (``old_versions``, known to the test)."""
    chunks: dict[str, list[dict]] = defaultdict(list)
    for metadata in held["metadatas"]:
        chunks[metadata["doc_id"]].append(metadata)
    out = {}
    for doc_id, mine in chunks.items():
        versions = {m["doc_version"] for m in mine}
        version = old_versions[doc_id] if len(versions) > 1 else versions.pop()
        readers: list[str] = []
        for m in mine:
            written = m["acl"] if isinstance(m["acl"], list) else [r.strip() for r in m["acl"].split(",")]
            readers += [r for r in written if r not in readers]
        latest = max(datetime.fromisoformat(m["indexed_at"]).timestamp() for m in mine if m["doc_version"] == version)
        out[doc_id] = (version, len(mine), readers, latest)
    return out


def entries_read(**config) -> dict[str, tuple]:
    source = ChromaSource(ChromaSourceConfig(name="index", kind="chroma", collections=["policies"], **config),
                          SourceContext(time.time, {}))
    snapshot = source.read()
    assert not snapshot.refused and not snapshot.unread_entries
    return {doc_id: (e.version, e.chunks, e.acl, e.indexed_at) for (index, doc_id), e in
            snapshot.index_entries.items() if index == "policies"}


class ChromaRun(Service):
    """``chroma run`` of the frameworks' environment serving a persistent directory on 127.0.0.1."""

    name = "chroma"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path, self.port = path, free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._spawn([str(clients_dir() / "bin" / "chroma"), "run", "--path", str(self.path), "--host", "127.0.0.1",
                     "--port", str(self.port)])
        self._wait_until(lambda: http_get(f"{self.url}/api/v2/heartbeat") is not None, "serving")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict[str, Any]:
    """The corpus indexed by LangChain into Chroma, then `policies/leave.md` edited and re-indexed in part
    (its first chunk only): what Chroma holds, as its client reads it back, and the versions."""
    tmp_path = tmp_path_factory.mktemp("chroma-store")
    root, persist = tmp_path / "corpus", tmp_path / "chroma"
    for rel, (acl, body) in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(markdown(acl, body))
    plan = {"root": str(root), "persist": str(persist), "collection": "policies"}
    run_chroma_app(tmp_path, "ingest", plan)
    leave = root / "policies/leave.md"
    old = blob_id(leave)
    leave.write_text(markdown(["group:staff"], "Staff carry over ten days of leave now. " + CORPUS[
        "policies/leave.md"][1]))
    held = run_chroma_app(tmp_path, "ingest", {**plan, "paths": ["policies/leave.md"], "first_chunks": 1})
    versions = {m["doc_version"] for m in held["metadatas"] if m["doc_id"] == str(leave)}
    assert versions == {old, blob_id(leave)}  # Chroma holds both: a re-indexing cut short
    return {"root": root, "persist": persist, "held": held, "old": {str(leave): old}}


def test_a_persistent_directory_written_by_langchain_is_read_as_one_entry_per_document(store):
    expected = expected_entries(store["held"], store["old"])
    assert len(expected) == len(CORPUS) and expected[str(store["root"] / "policies/leave.md")][1] >= 3
    assert entries_read(path=store["persist"]) == expected


def test_readers_kept_as_chroma_lists_are_read_from_the_directory(tmp_path):
    root, persist = tmp_path / "corpus", tmp_path / "chroma"
    for rel, (acl, body) in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(markdown(acl, body))
    held = run_chroma_app(tmp_path, "ingest", {"root": str(root), "persist": str(persist), "collection": "policies",
                                               "acl_as_list": True})
    assert all(isinstance(m["acl"], list) for m in held["metadatas"])  # Chroma gives them back as lists
    read = entries_read(path=persist)
    assert read == expected_entries(held, {})
    assert read[str(root / "policies/pay.md")][2] == ["group:staff", "group:payroll"]


def test_a_chroma_run_server_gives_the_same_entries(store, tmp_path):
    served = tmp_path / "served"
    shutil.copytree(store["persist"], served)  # the server writes to its directory; the fixture's stays as it is
    with ChromaRun(served) as server:
        read = entries_read(url=server.url, allowed_hosts=["127.0.0.1"], page_size=2)
    assert read == expected_entries(store["held"], store["old"])
    assert entries_read(path=served) == read


def test_ragmon_catalog_sync_sends_each_entry_once(store, tmp_path):
    sources = [{"name": "policies-index", "kind": "chroma", "path": str(store["persist"]),
                "collections": ["policies"]}]
    environ = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
               "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_CATALOG__SOURCES": json.dumps(sources)}
    reports = []
    for _ in range(2):
        done = CliRunner().invoke(main, ["catalog", "sync", "-o", "json"], env=environ)
        assert done.exit_code == 0, done.output
        [report] = json.loads(done.stdout)
        reports.append(report)
    documents = len(expected_entries(store["held"], store["old"]))
    assert reports[0]["outcome"] == "ok" and reports[0]["items"] == documents
    assert reports[0]["changes"]["index"] == documents
    assert reports[1]["changes"] == {"document": 0, "tombstone": 0, "index": 0, "removal": 0}


def broken_copy(store, tmp_path: Path, *statements: str) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(store["persist"], copy)
    with sqlite3.connect(copy / "chroma.sqlite3") as db:
        for statement in statements:
            db.execute(statement)
    return copy


@pytest.mark.parametrize(("statements", "message"), [
    (["ALTER TABLE embedding_metadata RENAME COLUMN string_value TO str_value"],
     "table embedding_metadata has no column string_value"),
    (["DROP TABLE max_seq_id"], "no table max_seq_id"),
    (["ALTER TABLE segments RENAME COLUMN scope TO kind"], "table segments has no column scope"),
])
def test_a_store_whose_schema_moved_fails_naming_what_is_missing(store, tmp_path, statements, message):
    copy = broken_copy(store, tmp_path, *statements)
    with pytest.raises(SourceError) as raised:
        entries_read(path=copy)
    assert raised.value.reason == "bad_format" and message in str(raised.value)


def test_a_missing_collection_or_a_log_not_applied_fails_the_sync(store, tmp_path):
    with pytest.raises(SourceError, match="collection 'nope' not found in Chroma's default_tenant/default_database"):
        ChromaSource(ChromaSourceConfig(name="index", kind="chroma", path=store["persist"], collections=["nope"]),
                     SourceContext(time.time, {})).read()
    copy = broken_copy(store, tmp_path, "INSERT INTO embeddings_queue (seq_id, operation, topic, id) SELECT "
                       "max(seq_id) + 1, 0, topic, 'late#0' FROM embeddings_queue")
    with pytest.raises(SourceError, match="writes its metadata segment has not applied yet"):
        entries_read(path=copy)
