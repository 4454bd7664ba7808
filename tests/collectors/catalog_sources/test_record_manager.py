"""LangChain's indexing record manager as index entries: a `SQLRecordManager` table written by LangChain's own
`index()` (in the frameworks' environment), read from the SQLite file and from PostgreSQL. Expected values come
from what LangChain answered (`index()`'s counts, `list_keys`, its clock), never from ragmon."""

from __future__ import annotations

import hashlib
import sqlite3
import time

import psycopg
import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.record_manager import RecordManagerSource
from ragmon.monitor.config.catalog_sources import RecordManagerSourceConfig
from tests.collectors.catalog_sources.frameworks import write

pytestmark = pytest.mark.integration  # LangChain runs in the frameworks' environment

NAMESPACE = "memory/policies"
DOCUMENTS = {"hr/leave.md": ["Leave: ten days.", "Carry over: five days."], "hr/pay.md": ["Pay: monthly."],
             "hr/travel.md": ["Travel: economy class."]}


def read(environ=None, **options):
    options = {"name": "langchain", "kind": "record_manager", "namespace": NAMESPACE, "index": "policies", **options}
    return RecordManagerSource(RecordManagerSourceConfig(**options), SourceContext(time.time, environ or {})).read()


def langchain_version(keys: list[str]) -> str:
    """The documented version of a document from LangChain's own keys: its one key, or sha256 of them sorted."""
    return keys[0] if len(keys) == 1 else "sha256:" + hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """DOCUMENTS indexed once: the record manager's file and what LangChain answered."""
    scratch = tmp_path_factory.mktemp("indexed")
    return scratch / "records.db", write("record_manager", plan(scratch, DOCUMENTS), scratch)


def plan(tmp_path, documents, **more):
    return {"db": str(tmp_path / "records.db"), "namespace": NAMESPACE, "store": str(tmp_path / "store.json"),
            "documents": documents, **more}


def test_the_records_index_writes_are_one_entry_per_source_document_with_langchains_hashes(tmp_path):
    first = write("record_manager", plan(tmp_path, DOCUMENTS), tmp_path)
    assert first["result"]["num_added"] == 4
    entries = read(path=tmp_path / "records.db").index_entries
    assert set(entries) == {("policies", source) for source in DOCUMENTS}
    for source, keys in first["keys"].items():
        entry = entries[("policies", source)]
        assert (entry.version, entry.chunks, entry.acl) == (langchain_version(keys), len(keys), None)
        assert first["time_before"] <= entry.indexed_at <= first["time_after"]

    # an edit of one chunk and a deletion (cleanup="full" drops the records of what was not indexed again)
    edited = {"hr/leave.md": ["Leave: twelve days.", "Carry over: five days."], "hr/pay.md": ["Pay: monthly."]}
    second = write("record_manager", plan(tmp_path, edited, also_list=["hr/travel.md"]), tmp_path)
    assert (second["result"]["num_added"], second["result"]["num_skipped"], second["result"]["num_deleted"]) == (
        1, 2, 2)
    assert second["keys"]["hr/travel.md"] == []
    entries = read(path=tmp_path / "records.db").index_entries
    assert set(entries) == {("policies", "hr/leave.md"), ("policies", "hr/pay.md")}
    leave = entries[("policies", "hr/leave.md")]
    assert leave.version == langchain_version(second["keys"]["hr/leave.md"]) != langchain_version(
        first["keys"]["hr/leave.md"])
    assert second["time_before"] <= leave.indexed_at <= second["time_after"]
    pay = entries[("policies", "hr/pay.md")]
    assert pay.version == first["keys"]["hr/pay.md"][0]  # an unchanged chunk keeps its key


def test_a_key_encoder_that_writes_the_documents_version_gives_that_version(tmp_path):
    versions = {"hr/leave.md": "8f2c" * 10, "hr/pay.md": "1a9e" * 10, "hr/travel.md": "77b0" * 10}
    answer = write("record_manager", plan(tmp_path, DOCUMENTS, key_encoder="version", versions=versions), tmp_path)
    entries = read(path=tmp_path / "records.db", version_pattern=r"^(?P<version>[0-9a-f]{40}):").index_entries
    found = {doc_id: entry.version for (_, doc_id), entry in entries.items()}
    assert found == {source: keys[0].split(":")[0] for source, keys in answer["keys"].items()} == versions
    # a key the pattern does not match: the document is refused and keeps its last state, the others are read
    snapshot = read(path=tmp_path / "records.db", version_pattern=r"^(?P<version>8f2c[0-9a-f]{36}):")
    assert set(snapshot.index_entries) == {("policies", "hr/leave.md")}
    assert snapshot.refused == {"bad_record": 2}
    assert snapshot.unread_entries == {("policies", "hr/pay.md"), ("policies", "hr/travel.md")}


def test_only_the_namespace_is_read_and_ids_take_the_prefix_and_the_join_rule(tmp_path):
    write("record_manager", plan(tmp_path, {"./hr//leave.md": ["Leave."]}), tmp_path)
    other = {**plan(tmp_path, {"sales/deck.md": ["Deck."]}), "namespace": "memory/sales",
             "store": str(tmp_path / "other.json")}
    write("record_manager", other, tmp_path)
    entries = read(path=tmp_path / "records.db", id_prefix="corpus/", index=None).index_entries
    assert set(entries) == {(NAMESPACE, "corpus/hr/leave.md")}


def test_a_missing_file_fails_the_sync_and_is_not_created(tmp_path):
    with pytest.raises(SourceError) as failed:
        read(path=tmp_path / "absent.db")
    assert failed.value.reason == "unavailable" and not (tmp_path / "absent.db").exists()
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(SourceError, match="no such table: upsertion_record"):
        read(path=tmp_path / "empty.db")


def test_more_records_than_max_rows_fail_the_sync(indexed):
    path, _ = indexed
    assert len(read(path=path, max_rows=4).index_entries) == 3
    with pytest.raises(SourceError) as failed:
        read(path=path, max_rows=3)
    assert failed.value.reason == "too_large"


def test_documents_beyond_max_items_are_refused_in_the_order_of_their_ids(indexed):
    snapshot = read(path=indexed[0], max_items=2)
    assert set(snapshot.index_entries) == {("policies", "hr/leave.md"), ("policies", "hr/pay.md")}
    assert snapshot.refused == {"too_many": 1} and snapshot.unread_entries == {("policies", "hr/travel.md")}


def test_the_record_manager_on_postgresql_with_the_password_by_reference(indexed, postgres):
    path, answer = indexed
    url = postgres.create_database(f"records_{int(time.time() * 1000)}")
    with sqlite3.connect(path) as lite:
        rows = lite.execute("SELECT uuid, key, namespace, group_id, updated_at FROM upsertion_record").fetchall()
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as connection:
        for statement in answer["postgresql_ddl"]:  # the table as SQLAlchemy creates LangChain's model there
            connection.execute(statement)
        connection.cursor().executemany("INSERT INTO upsertion_record VALUES (%s, %s, %s, %s, %s)", rows)
    entries = read(url=url, password="env:RECORDS_PASSWORD", environ={"RECORDS_PASSWORD": "pw-3b7c1e"}).index_entries
    assert {doc_id: (entry.version, entry.chunks) for (_, doc_id), entry in entries.items()} == {
        source: (langchain_version(keys), len(keys)) for source, keys in answer["keys"].items()}
    assert all(answer["time_before"] <= entry.indexed_at <= answer["time_after"] for entry in entries.values())

    with pytest.raises(SourceError) as unset:
        read(url=url, password="env:RECORDS_PASSWORD")
    assert unset.value.reason == "unavailable" and "RECORDS_PASSWORD" in str(unset.value)
    wrong = url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(SourceError) as failed:
        read(url=wrong, password="env:RECORDS_PASSWORD", environ={"RECORDS_PASSWORD": "pw-3b7c1e"})
    assert failed.value.reason == "unavailable" and "pw-3b7c1e" not in str(failed.value)
