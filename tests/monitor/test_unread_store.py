"""The unread-traces store on SQLite and PostgreSQL: a trace stored once whatever the retries,
filters by scope, tenant (several stored forms at once), what was missing and time, paging, the
scheduler's retention, and the view's parameters checked and tenants scoped."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from sqlalchemy.exc import SQLAlchemyError

from ragmon.collectors.unread.names import ShownNames
from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.findings_view import StoredIds
from ragmon.monitor.app.jobs import RETENTION
from ragmon.monitor.app.unread_view import unread_page, unread_query
from ragmon.monitor.app.wiring import build_jobs, build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.findings.query import QueryError
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from ragmon.monitor.storage.store import make_engine
from ragmon.monitor.storage.unread_store import UnreadQuery, UnreadStore
from tests.databases import BOTH, migrated_url

NOW = 1_796_000_000.0
REDACTOR = Redactor(RedactionConfig(caller_key=SecretStr("k" * 32)))
PRIVATE = "tenant-of-erin@example.com"


def row(trace_id: str, scope: str = "s1", tenant: str = "acme", missing: str = "retrieval", time: float = NOW,
        recorded_at: float = NOW) -> dict:
    return {"key": f"{trace_id}-{missing}", "trace_id": trace_id, "time": time, "recorded_at": recorded_at,
            "tenant": tenant, "scope": scope, "missing": missing, "dialect": "genai", "lacked": "words", "spans": 2,
            "digest": {"spans": 2, "groups": [{"name": "n", "keys": ["k"]}]}}


@pytest.fixture(params=BOTH)
def store(request, tmp_path) -> UnreadStore:
    return UnreadStore(make_engine(migrated_url(request, tmp_path, "unread")))


def test_rows_are_stored_once_filtered_paged_and_pruned(store):
    rows = [row("t1"), row("t2", scope="s2", tenant=""), row("t3", missing="caller", time=NOW + 60),
            row("t4", tenant="globex", recorded_at=NOW - 30 * 86400)]
    store.add(rows)
    store.add(rows[:2])  # a retried batch
    assert [r.trace_id for r in store.find(UnreadQuery())] == ["t4", "t3", "t2", "t1"]
    assert [r.trace_id for r in store.find(UnreadQuery(scope="s2"))] == ["t2"]
    assert [r.trace_id for r in store.find(UnreadQuery(scope=("s2", "s9")))] == ["t2"]
    assert [r.trace_id for r in store.find(UnreadQuery(tenant=("acme", "globex")))] == ["t4", "t3", "t1"]
    assert [r.trace_id for r in store.find(UnreadQuery(missing="caller"))] == ["t3"]
    assert [r.trace_id for r in store.find(UnreadQuery(since=NOW + 1))] == ["t3"]
    first = store.find(UnreadQuery(limit=2))
    assert [r.trace_id for r in store.find(UnreadQuery(cursor=first[-1].id))] == ["t2", "t1"]
    assert store.find(UnreadQuery(scope="s1"))[-1].digest == {"spans": 2, "groups": [{"name": "n", "keys": ["k"]}]}
    assert store.count(2) == (2, True) and store.count(10) == (4, False)
    assert store.prune(NOW - 86400) == 1
    assert [r.trace_id for r in store.find(UnreadQuery())] == ["t3", "t2", "t1"]


def test_a_database_outage_is_retryable(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'missing-table.db'}")  # never migrated
    with pytest.raises(Retryable):
        UnreadStore(engine).add([row("t1")])
    with pytest.raises(SQLAlchemyError):
        UnreadStore(engine).find(UnreadQuery())


def test_a_tenant_reader_sees_its_tenants_rows_only_and_rows_naming_no_tenant_need_every_tenant(store):
    shown = REDACTOR.shown_id(PRIVATE)
    store.add([row("t1"), row("t2", tenant=""), row("t3", tenant=shown), row("t4", tenant="globex")])
    ids, names = StoredIds(REDACTOR), ShownNames(REDACTOR.shown_id)

    def page(params: dict, tenants: list[str] | None = None) -> list[str]:
        scope = None if tenants is None else ids.scope(tenants)
        return [r["trace_id"] for r in unread_page(store, params, NOW, ids, names, tenants=scope)["unread"]]

    assert page({}) == ["t4", "t3", "t2", "t1"]
    assert page({}, ["acme"]) == ["t1"]
    assert page({}, [PRIVATE]) == ["t3"]  # configured by its raw name, stored by its shown id
    assert page({"tenant": PRIVATE}) == page({"tenant": shown}) == ["t3"]
    assert page({"tenant": "globex"}, ["acme"]) == []
    assert page({"scope": "s1", "missing": "retrieval", "limit": "1"}) == ["t4"]
    for params, named in (({"bogus": "1"}, "bogus"), ({"missing": "answer"}, "missing"), ({"limit": "0"}, "limit"),
                          ({"limit": "١٢"}, "limit"), ({"since": "nan"}, "since"), ({"cursor": "9" * 30}, "cursor"),
                          ({"scope": "a\x00b"}, "scope")):
        with pytest.raises(QueryError, match=f"^{named}:"):
            page(params)
    assert unread_query({"since": "2h"}, NOW).since == NOW - 7200


def test_the_retention_job_deletes_digests_older_than_their_retention(tmp_path):
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
                                      "RAGMON_OTLP__UNREAD_RETENTION_DAYS": "3"})
    runtime = build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())
    runtime.unread.add([row("old", recorded_at=NOW - 4 * 86400), row("new", recorded_at=NOW - 2 * 86400)])
    assert build_jobs(runtime).run(RETENTION)
    assert [r.trace_id for r in runtime.unread.find(UnreadQuery())] == ["new"]
    assert metric_sum(runtime.registry, "ragmon_retention_deleted_total", kind="unread_traces") == 1
    runtime.close()
