"""The configuration of the index-entry sources kept in SQL and JSON: where they read, and what is refused with a
message naming the setting (and never quoting a password)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragmon.monitor.config.catalog_sources import DocstoreSourceConfig, RecordManagerSourceConfig, SqlSourceConfig


def problems(model, **options) -> str:
    with pytest.raises(ValidationError) as refused:
        model(**options)
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in refused.value.errors())


def test_a_record_manager_reads_a_sqlite_file_or_a_url_without_a_password():
    base = {"name": "rm", "kind": "record_manager", "namespace": "chroma/policies"}
    assert RecordManagerSourceConfig(**base, path="/var/rm.db").index is None
    assert RecordManagerSourceConfig(**base, url="postgresql+psycopg://ragmon@db:5432/rag",
                                     password="env:RM_PASSWORD").password == "env:RM_PASSWORD"
    assert "set path (a SQLite file) or url, one of them" in problems(RecordManagerSourceConfig, **base)
    assert "one of them" in problems(RecordManagerSourceConfig, **base, path="/var/rm.db", url="sqlite:///x.db")
    said = problems(RecordManagerSourceConfig, **base, url="postgresql+psycopg://ragmon:hunter2-x@db/rag")
    assert "holds a password; give it by reference in password" in said and "hunter2-x" not in said
    assert "not a reference to a secret" in problems(RecordManagerSourceConfig, **base, url="postgresql://u@db/rag",
                                                     password="hunter2-x")
    assert "a SQLite file takes none" in problems(RecordManagerSourceConfig, **base, path="/var/rm.db",
                                                  password="env:X")
    assert "needs a named group `version`" in problems(RecordManagerSourceConfig, **base, path="/var/rm.db",
                                                       version_pattern="^([0-9a-f]+):")
    assert "not a valid regular expression" in problems(RecordManagerSourceConfig, **base, path="/var/rm.db",
                                                        version_pattern="(?P<version>")


def test_a_sql_source_names_its_index_once():
    base = {"name": "pg", "kind": "sql", "url": "postgresql+psycopg://ragmon@db/rag", "query": "SELECT 1"}
    assert SqlSourceConfig(**base, index="policies").columns.doc_id == "doc_id"
    assert SqlSourceConfig(**base, columns={"index": "collection"}).index is None
    assert "set index or columns.index, one of them" in problems(SqlSourceConfig, **base)
    assert "one of them" in problems(SqlSourceConfig, **base, index="policies", columns={"index": "collection"})
    assert "unknown time zone" in problems(SqlSourceConfig, **base, index="policies", time_zone="Mars/Olympus")
    assert "columns.doc_column" in problems(SqlSourceConfig, **base, index="policies", columns={"doc_column": "x"})


def test_a_docstore_source_needs_its_path_and_index():
    config = DocstoreSourceConfig(name="li", kind="llamaindex_docstore", path="/srv/storage", index="policies")
    assert (config.namespace, config.doc_id_key, config.version_key, config.acl_key) == (
        "docstore", "file_path", None, "acl")
    assert "index" in problems(DocstoreSourceConfig, name="li", kind="llamaindex_docstore", path="/srv/storage")
