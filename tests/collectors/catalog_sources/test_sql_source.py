"""The `sql` source on the real PostgreSQL of tests/services, over tables shaped as LangChain's PGVector keeps them
(`langchain_pg_collection`, `langchain_pg_embedding` with its JSONB `cmetadata`), and on SQLite for its bounds.
The pgvector extension is not installable here: the `embedding` column is bytea (the source never reads it)."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.sql import SqlSource
from ragmon.monitor.config.catalog_sources import SqlSourceConfig

# langchain_postgres.vectorstores: CollectionStore and EmbeddingStore, the vector column as bytea
PGVECTOR_TABLES = [
    "CREATE TABLE langchain_pg_collection (uuid UUID PRIMARY KEY, name VARCHAR NOT NULL UNIQUE, cmetadata JSON)",
    "CREATE TABLE langchain_pg_embedding (id VARCHAR PRIMARY KEY, collection_id UUID REFERENCES "
    "langchain_pg_collection (uuid) ON DELETE CASCADE, embedding BYTEA, document VARCHAR, cmetadata JSONB)",
    "CREATE INDEX ix_cmetadata_gin ON langchain_pg_embedding USING gin (cmetadata jsonb_path_ops)",
]
QUERY = """
SELECT e.cmetadata->>'source' AS source, e.cmetadata->>'doc_version' AS doc_version, e.cmetadata->'acl' AS acl,
       (e.cmetadata->>'indexed_at')::timestamptz AS indexed_at
FROM langchain_pg_embedding e JOIN langchain_pg_collection c ON c.uuid = e.collection_id
WHERE c.name = :collection
"""
COLUMNS = {"doc_id": "source", "version": "doc_version"}
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
# (collection, source, version, acl, indexed_at) per chunk, as an indexer writes the chunks' metadata
CHUNKS = [
    ("policies", "hr/leave.md", "v1", ["group:staff"], "2026-11-02T09:00:00Z"),
    ("policies", "hr/leave.md", "v1", ["group:staff"], "2026-11-02T09:00:00Z"),
    ("policies", "hr/pay.md", "v3", ["group:payroll", "user:u-7"], "2026-11-02T10:00:00+01:00"),
    # re-indexed chunk by chunk: one chunk of the new version written, one of the old left so far
    ("policies", "hr/travel.md", "v1", ["group:staff"], "2026-11-01T08:00:00Z"),
    ("policies", "hr/travel.md", "v2", "group:staff, group:sales", "2026-11-03T08:00:00Z"),
    ("sales", "sales/deck.md", "v9", ["group:sales"], "2026-11-02T09:00:00Z"),
]


@pytest.fixture(scope="module")
def pgvector(postgres):
    url = postgres.create_database(f"pgvector_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as connection:
        for statement in PGVECTOR_TABLES:
            connection.execute(statement)
        collections = {name: uuid.uuid4() for name in {chunk[0] for chunk in CHUNKS}}
        for name, key in collections.items():
            connection.execute("INSERT INTO langchain_pg_collection VALUES (%s, %s, NULL)", (key, name))
        for collection, source, version, acl, indexed_at in CHUNKS:
            metadata = {"source": source, "doc_version": version, "acl": acl, "indexed_at": indexed_at}
            connection.execute("INSERT INTO langchain_pg_embedding VALUES (%s, %s, %s, %s, %s)",
                               (str(uuid.uuid4()), collections[collection], b"\x00" * 32, "chunk text",
                                json.dumps(metadata)))
    return url


def read(environ=None, **options):
    options = {"name": "pgvector", "kind": "sql", **options}
    return SqlSource(SqlSourceConfig(**options), SourceContext(time.time, environ or {})).read()


@pytest.mark.integration
def test_a_pgvector_collection_read_by_its_jsonb_metadata_folds_chunks_into_documents(pgvector):
    snapshot = read(url=pgvector, query=QUERY, parameters={"collection": "policies"}, columns=COLUMNS,
                    index="policies")
    entries = snapshot.index_entries
    found = {doc_id: (e.version, e.chunks, e.acl, e.indexed_at) for (index, doc_id), e in entries.items()}
    assert found == {
        "hr/leave.md": ("v1", 2, ["group:staff"], T0.timestamp()),
        "hr/pay.md": ("v3", 1, ["group:payroll", "user:u-7"], T0.timestamp()),
        # its old chunk is still served: the old version, and whoever either chunk admits
        "hr/travel.md": ("v1", 2, ["group:sales", "group:staff"], datetime(2026, 11, 1, 8, tzinfo=UTC).timestamp()),
    }
    assert {index for index, _ in entries} == {"policies"} and not snapshot.refused


@pytest.mark.integration
def test_the_index_from_a_column_and_times_as_text(pgvector):
    query = ("SELECT c.name AS collection, e.cmetadata->>'source' AS source, e.cmetadata->>'doc_version' AS "
             "doc_version, e.cmetadata->>'indexed_at' AS indexed_at FROM langchain_pg_embedding e "
             "JOIN langchain_pg_collection c ON c.uuid = e.collection_id")
    entries = read(url=pgvector, query=query, columns={**COLUMNS, "acl": None, "index": "collection"}).index_entries
    assert set(entries) == {("policies", "hr/leave.md"), ("policies", "hr/pay.md"), ("policies", "hr/travel.md"),
                            ("sales", "sales/deck.md")}
    assert entries[("policies", "hr/pay.md")].indexed_at == T0.timestamp()
    assert all(entry.acl is None for entry in entries.values())


@pytest.mark.integration
def test_a_row_that_cannot_be_read_leaves_its_document_as_it_was(pgvector):
    query = QUERY.replace("e.cmetadata->>'doc_version'",
                          "CASE WHEN e.cmetadata->>'doc_version' = 'v2' THEN NULL ELSE e.cmetadata->>'doc_version' END")
    snapshot = read(url=pgvector, query=query, parameters={"collection": "policies"}, columns=COLUMNS,
                    index="policies")
    assert set(snapshot.index_entries) == {("policies", "hr/leave.md"), ("policies", "hr/pay.md")}
    assert snapshot.refused == {"bad_record": 1} and snapshot.unread_entries == {("policies", "hr/travel.md")}
    naive = QUERY.replace("::timestamptz", "::timestamptz AT TIME ZONE 'UTC'")
    assert read(url=pgvector, query=naive, parameters={"collection": "sales"}, columns=COLUMNS,
                index="policies").refused == {"bad_record": 1}
    zoned = read(url=pgvector, query=naive, parameters={"collection": "sales"}, columns=COLUMNS, index="policies",
                 time_zone="UTC").index_entries
    assert [entry.indexed_at for entry in zoned.values()] == [T0.timestamp()]


@pytest.mark.integration
def test_the_query_runs_read_only_within_its_time_and_rows(pgvector):
    with pytest.raises(SourceError) as writing:
        read(url=pgvector, query="DELETE FROM langchain_pg_embedding RETURNING id AS doc_id", index="policies")
    assert writing.value.reason == "bad_format" and "ReadOnlySqlTransaction" in str(writing.value)
    assert len(read(url=pgvector, query=QUERY, parameters={"collection": "policies"}, columns=COLUMNS,
                    index="policies").index_entries) == 3
    started = time.monotonic()
    with pytest.raises(SourceError) as slow:
        read(url=pgvector, query=f"SELECT pg_sleep(20), * FROM ({QUERY}) AS q", parameters={"collection": "sales"},
             columns=COLUMNS, index="policies", timeout_seconds=0.5)
    assert slow.value.reason == "timeout" and time.monotonic() - started < 10
    with pytest.raises(SourceError) as many:
        read(url=pgvector, query=QUERY, parameters={"collection": "policies"}, columns=COLUMNS, index="policies",
             max_rows=4)
    assert many.value.reason == "too_large"
    with pytest.raises(SourceError, match=r"no column 'doc_version' \(columns.version\)"):
        read(url=pgvector, query=QUERY.replace("AS doc_version", "AS v"), parameters={"collection": "policies"},
             columns=COLUMNS, index="policies")


def test_sqlite_read_only_and_interrupted_at_its_deadline(tmp_path):
    path = tmp_path / "chunks.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE chunks (doc_id TEXT, version TEXT, acl TEXT, indexed_at REAL)")
        connection.execute("INSERT INTO chunks VALUES ('a.md', '1', '[\"group:x\"]', 1780000000)")
    entries = read(path=path, query="SELECT * FROM chunks", index="i").index_entries
    assert [(e.doc_id, e.version, e.acl, e.indexed_at) for e in entries.values()] == [
        ("a.md", "1", ["group:x"], 1780000000.0)]
    with pytest.raises(SourceError) as writing:
        read(path=path, query="DELETE FROM chunks RETURNING *", index="i")
    assert "readonly" in str(writing.value).replace("-", "").lower()
    endless = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
               "SELECT 'a' AS doc_id, '1' AS version, NULL AS acl, max(x) AS indexed_at FROM n")
    started = time.monotonic()
    with pytest.raises(SourceError) as slow:
        read(path=path, query=endless, index="i", timeout_seconds=0.3)
    assert slow.value.reason == "timeout" and time.monotonic() - started < 5
