"""The catalog survives a restart, on SQLite and on a real PostgreSQL; a database outage refuses
the batch instead of losing catalog changes."""

from __future__ import annotations

import threading
import uuid

import msgspec
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import text

from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.storage.catalog_store import CatalogPersistence
from ragmon.monitor.storage.store import SchemaOutdated, current_revision, head_revision, make_engine, prepare, upgrade

NOW = 1_796_000_000.0
EVENTS = [
    {"type": "document", "doc_id": "leave", "tenant": "acme", "version": "3", "modified_at": NOW - 500,
     "acl": ["group:hr"]},
    {"type": "index", "index": "policies", "doc_id": "leave", "version": "3", "indexed_at": NOW - 400,
     "embedding_model": "e5@2", "chunks": 14, "acl": ["group:hr", "user:ann"]},
    {"type": "document", "doc_id": "leave", "tenant": "acme", "version": "4", "modified_at": NOW - 300,
     "acl": ["group:hr", "group:staff"]},
]


def runtime_for(url: str, tmp_path):
    settings = load_settings(environ={"RAGMON_DATABASE__URL": url,
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
                                      "RAGMON_REDACTION__CALLER_KEY": "a-test-key-of-some-length"})
    return build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())


def feed(runtime, events) -> None:
    runtime.pipeline.process([RawRecord("file", msgspec.json.encode(e), privilege=Privilege.TRUSTED) for e in events])


def check_restart(url: str, tmp_path) -> None:
    first = runtime_for(url, tmp_path)
    feed(first, EVENTS)
    first.close()
    second = runtime_for(url, tmp_path)
    try:
        document = second.catalog.document("leave")
        assert (document.tenant, document.version, document.acl) == ("acme", "4", ("group:hr", "group:staff"))
        assert document.history == {"3": NOW - 500, "4": NOW - 300}
        assert second.catalog.is_outdated("leave", "3") is True
        # the index entry keeps the ACL its chunks were embedded with, apart from the document's
        assert second.catalog.indexed[("policies", "leave")].acl == ("group:hr", "user:ann")
        health = second.catalog.health(NOW)["policies"]
        assert (health.stale_documents, health.max_staleness_seconds, health.embedding_models) == (1, 300.0, 1)
    finally:
        second.close()


def test_catalog_survives_a_restart_on_sqlite(tmp_path):
    check_restart(f"sqlite:///{tmp_path / 'ragmon.db'}", tmp_path)


@pytest.mark.integration
def test_catalog_survives_a_restart_on_postgresql(postgres, tmp_path):
    url = postgres.create_database(f"catalog_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))  # PostgreSQL is migrated by `ragmon db upgrade`, not at start-up
    check_restart(url, tmp_path)


@pytest.mark.integration
def test_postgresql_with_an_old_schema_refuses_to_start(postgres):
    engine = make_engine(postgres.create_database(f"empty_{uuid.uuid4().hex[:8]}"))
    with pytest.raises(SchemaOutdated, match="ragmon db upgrade"):
        prepare(engine)
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    prepare(engine)
    engine.dispose()


def test_a_database_outage_refuses_the_batch_and_keeps_the_change(tmp_path):
    url = f"sqlite:///{tmp_path / 'db' / 'ragmon.db'}"
    runtime = runtime_for(url, tmp_path)
    feed(runtime, EVENTS[:1])
    runtime.engine.dispose()
    (tmp_path / "db").rename(tmp_path / "away")  # the database is gone: no connection can open it
    try:
        with pytest.raises(Retryable, match="catalog store"):
            feed(runtime, EVENTS[2:])
    finally:
        (tmp_path / "away").rename(tmp_path / "db")
    feed(runtime, [])  # back: the next batch writes what was pending
    runtime.close()
    again = runtime_for(url, tmp_path)
    assert again.catalog.document("leave").version == "4"
    again.close()


def test_what_ragmon_keeps_is_readable_by_its_owner_alone_whatever_the_umask(tmp_path):
    """The store, the dead letters, the caller key and the weekly export: 0600 files in 0700
    directories ragmon creates, even under a permissive umask, and still so after a retention prune."""
    import os
    import stat

    from prometheus_client import CollectorRegistry

    from ragmon.monitor.app.wiring import build_jobs, build_runtime
    from ragmon.monitor.config.settings import load_settings
    from ragmon.monitor.core.records import Privilege, RawRecord

    data = tmp_path / "ragmon-data"
    old = os.umask(0o002)
    try:
        settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{data / 'ragmon.db'}",
                                          "RAGMON_DEAD_LETTER__PATH": str(data / "dead.jsonl"),
                                          "RAGMON_SCHEDULER__BATCH_DIR": str(data / "batches")})
        runtime = build_runtime(settings, registry=CollectorRegistry())
        runtime.pipeline.process([RawRecord("file", b"not json", privilege=Privilege.TRUSTED)])
        jobs = build_jobs(runtime)
        assert jobs.run("weekly-pull") and jobs.run("retention")
        runtime.close()
    finally:
        os.umask(old)
    modes = {path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
             for path in tmp_path.rglob("*")}
    assert modes["ragmon-data"] == 0o700
    for name in ("ragmon-data/ragmon.db", "ragmon-data/dead.jsonl", "ragmon-data/caller.key"):
        assert modes[name] == 0o600, (name, oct(modes[name]))
    assert all(mode == 0o600 for name, mode in modes.items() if name.startswith("ragmon-data/batches/")
               and not (tmp_path / name).is_dir()), modes
    assert all(mode == 0o700 for name, mode in modes.items() if (tmp_path / name).is_dir()), modes
    assert not [name for name, mode in modes.items() if mode & 0o077]  # the SQLite WAL files included


def _replica(engine, events) -> CatalogPersistence:
    """One replica's catalog, having read ``events``, with its persistence holding them all."""
    catalog = Catalog()
    sink = CatalogPersistence(engine, catalog)
    for event in events:
        catalog.apply(event)
        sink.consume(Observation(event, "kafka", NOW))
    return sink


def _catalog_events(n_docs: int, versions: int) -> list:
    events = []
    for v in range(1, versions + 1):
        for d in range(n_docs):
            events.append(DocumentEvent(doc_id=f"doc-{d:04d}", version=str(v), modified_at=NOW - 10_000 + v * 100,
                                        tenant="acme", acl=[f"group:g{v}"]))
            events.append(IndexEvent(index="policies", doc_id=f"doc-{d:04d}", version=str(v),
                                     indexed_at=NOW - 10_000 + v * 100 + 5, embedding_model="e5"))
    return events


@pytest.mark.integration
def test_replicas_writing_the_same_catalog_neither_deadlock_nor_move_rows_back(postgres):
    """Four replicas on one PostgreSQL flush the same 2,000 documents at once, each having read
    the catalog topic to a different point, in shuffled order: no deadlock, no duplicate key, and
    every row ends at the furthest state any replica had (the writes sort their keys: the order
    the replicas read or hold them in does not matter). Then a replica level with the rows
    writes them again: no row is rewritten (its xmin stays)."""
    url = postgres.create_database(f"replicas_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))
    engines = [make_engine(url) for _ in range(4)]
    events = _catalog_events(2000, 3)
    per_version = len(events) // 3
    sinks = [_replica(engine, events[: per_version * (1 + i % 3)]) for i, engine in enumerate(engines)]
    errors: list[BaseException] = []

    def flush(sink) -> None:
        try:
            for _ in range(3):  # again and again, overlapping the others
                sink._documents |= {e.doc_id for e in events if isinstance(e, DocumentEvent)}
                sink._indexed |= {(e.index, e.doc_id) for e in events if isinstance(e, IndexEvent)}
                sink.flush(timeout=30)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=flush, args=(sink,)) for sink in sinks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with engines[0].connect() as connection:
        rows = connection.execute(text("select version, acl::text, history_size from catalog_document")).fetchall()
        indexed = connection.execute(text("select version from catalog_indexed")).fetchall()
        assert len(rows) == 2000 and {tuple(r) for r in rows} == {("3", '["group:g3"]', 3)}
        assert len(indexed) == 2000 and {r[0] for r in indexed} == {"3"}
        before = dict(connection.execute(text("select doc_id, xmin::text from catalog_document")).fetchall())
    level = _replica(engines[1], events)
    level.flush(timeout=30)
    behind = _replica(engines[2], events[:per_version])
    behind.flush(timeout=30)
    with engines[0].connect() as connection:
        after = dict(connection.execute(text("select doc_id, xmin::text from catalog_document")).fetchall())
        assert after == before
        assert connection.execute(text("select distinct version from catalog_document")).scalar_one() == "3"
    for engine in engines:
        engine.dispose()
    log = postgres.log_path.read_text(errors="replace")
    assert "deadlock detected" not in log and "duplicate key" not in log


def test_the_history_size_migration_counts_what_rows_already_hold(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(engine, "0002")
    with engine.begin() as connection:
        connection.execute(text("insert into catalog_document (doc_id, tenant, version, modified_at, acl, deleted, "
                                "history) values ('d', 'acme', '2', 1.0, null, 0, '{\"1\": 0.5, \"2\": 1.0}')"))
    upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text("select history_size from catalog_document")).scalar_one() == 2
    engine.dispose()


def test_ragmon_replay_of_index_events_keeps_each_entrys_acl(tmp_path):
    """`ragmon replay` of index events writes the index's ACL of each entry to the store, where a
    later process loads it; an entry without one stays unknown (None), not "nobody"."""
    import json

    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main
    from ragmon.monitor.storage.catalog_store import load_catalog

    events = [{"type": "index", "index": "policies", "doc_id": "leave", "version": "3", "indexed_at": NOW - 400,
               "acl": "group:hr, group:staff"},
              {"type": "index", "index": "policies", "doc_id": "memo", "version": "1", "indexed_at": NOW - 400},
              {"type": "index", "index": "policies", "doc_id": "board", "version": "1", "indexed_at": NOW - 400,
               "acl": []}]
    (tmp_path / "index.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    url = f"sqlite:///{tmp_path / 'ragmon.db'}"
    env = {"RAGMON_DATABASE__URL": url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "d.jsonl")}
    replayed = CliRunner().invoke(main, ["replay", str(tmp_path / "index.jsonl")], env=env)
    assert replayed.exit_code == 0, replayed.output
    load_catalog(make_engine(url), catalog := Catalog())
    assert {doc_id: entry.acl for (_, doc_id), entry in catalog.indexed.items()} == {
        "leave": ("group:hr", "group:staff"), "memo": None, "board": ()}
