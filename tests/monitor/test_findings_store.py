"""The findings sink and store: redacted rows with shown ids, stored once whatever the retries, a
rate limit per signal that counts what it drops, paging, retention, bounded reasons beside the
whole principal lists; on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Caller, DocumentEvent, FeedbackEvent, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.findings.query import QueryError, parse_since, query_from
from ragmon.monitor.findings.sink import FindingsSink
from ragmon.monitor.findings.store import FindingQuery, FindingsStore
from ragmon.monitor.findings.wording import MAX_FULL_LISTS_BYTES, MAX_REASON_CHARS, Wording
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from ragmon.monitor.storage.store import make_engine, upgrade
from tests.databases import BOTH, migrated_url

NOW = 1_796_000_000.0
EMAIL = "carol.danvers@example.com"


@pytest.fixture(params=BOTH)
def store(request, tmp_path) -> FindingsStore:
    return FindingsStore(make_engine(migrated_url(request, tmp_path, "findings")))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def leaking_traces(n: int, start: int = 0) -> list[Observation]:
    """Traces whose only passage comes from a document whose id holds an email address, which the
    catalog keeps from the caller (one caller each: no rephrases)."""
    catalog = Catalog()
    catalog.apply(DocumentEvent(doc_id=f"notes-{EMAIL}", version="v1", modified_at=NOW, tenant="acme",
                                acl=["group:payroll"]))
    engine = SignalEngine(SignalsConfig(), catalog)
    observations = []
    for i in range(start, start + n):
        passage = Passage(f"p{i}", doc_id=f"notes-{EMAIL}", doc_version="v1", score=0.5)
        event = TraceEvent(trace_id=f"t{i}", time=NOW + i, query="q", index=IndexRef("hr"), tenant="acme",
                           caller=Caller(f"user-{i}", ["staff"]), retrievals=[Retrieval("vector", [passage])],
                           context=[])
        observations.append(Observation(event, "http", NOW, engine.observe(event)))
    return observations


def sink_for(store: FindingsStore, clock: Clock, rate: float = 100.0, counted: list | None = None) -> FindingsSink:
    redactor = Redactor(RedactionConfig(caller_key=SecretStr("k" * 32)))
    return FindingsSink(store, redactor, rate, clock, count=lambda *args: counted.append(args) if counted is not None
                        else None, monotonic=clock)


def test_rows_are_redacted_and_stored_once_whatever_the_retries(store):
    clock, counted = Clock(), []
    sink = sink_for(store, clock, counted=counted)
    batch = leaking_traces(3)
    for _ in range(2):  # a batch refused after the sink took it is consumed again on its retry
        for observation in batch:
            sink.consume(observation)
    assert sink.flush(5)
    for observation in batch:  # and a Kafka redelivery after a crash
        sink.consume(observation)
    assert sink.flush(5)
    rows = store.find(FindingQuery())
    assert [row.trace_id for row in rows] == ["t2", "t1", "t0"]  # newest first
    row = rows[0]
    assert row.signal == "permission_violation" and row.stage == "candidates"
    assert EMAIL not in row.documents[0][0] and "[EMAIL]" in row.documents[0][0]
    assert row.caller.startswith("caller:") and "user-2" not in row.reason
    assert row.reason.startswith("catalog ACL [group:payroll] excludes the caller [group:staff, tenant:acme, "
                                 "user:caller:")
    assert ("permission_violation", "stored", 3) in counted


def test_a_flood_of_one_signal_is_cut_by_its_rate_and_counted(store):
    clock, counted = Clock(), []
    sink = sink_for(store, clock, rate=2.0, counted=counted)  # a burst of 20, then 2 a second
    for observation in leaking_traces(25):
        sink.consume(observation)
    assert sink.flush(5)
    assert len(store.find(FindingQuery(limit=100))) == 20
    assert ("permission_violation", "rate_limited", 5) in counted
    clock.now += 1.0
    for observation in leaking_traces(5, start=100):
        sink.consume(observation)
    assert sink.flush(5)
    assert len(store.find(FindingQuery(limit=100))) == 22
    # another signal has its own bucket
    feedback = FeedbackEvent(trace_id="t0", kind="escalation", time=NOW + 5)
    from ragmon.monitor.core.signals.results import FeedbackSignals
    sink.consume(Observation(feedback, "http", NOW, FeedbackSignals(None, "escalation", None)))
    assert sink.flush(5)
    assert [r.signal for r in store.find(FindingQuery(trace_id="t0"))] == ["negative_feedback", "permission_violation"]


def test_pages_filters_and_retention(store):
    clock = Clock()
    sink = sink_for(store, clock)
    for observation in leaking_traces(5):
        sink.consume(observation)
    sink.flush(5)
    clock.now += 86400
    for observation in leaking_traces(2, start=10):
        sink.consume(observation)
    sink.flush(5)
    first = store.find(FindingQuery(limit=4))
    rest = store.find(FindingQuery(limit=4, cursor=first[-1].id))
    assert [r.trace_id for r in first + rest] == ["t11", "t10", "t4", "t3", "t2", "t1", "t0"]
    assert [r.trace_id for r in store.find(FindingQuery(since=NOW + 10))] == ["t11", "t10"]
    assert store.find(FindingQuery(tenant="globex")) == [] and store.find(FindingQuery(signal="low_score")) == []
    # several stored forms of one id: any of them
    assert [r.trace_id for r in store.find(FindingQuery(trace_id=("t11", "t3", "gone")))] == ["t11", "t3"]
    assert store.find(FindingQuery(tenant=("globex", "initech"))) == []
    # counted up to a bound, and whether there are more
    assert store.count(10) == (7, False) and store.count(5) == (5, True) and store.count(5, "t3") == (1, False)
    assert store.prune(before=NOW + 3600) == 5
    assert [r.trace_id for r in store.find(FindingQuery())] == ["t11", "t10"]


def test_query_parameters_are_checked_by_name():
    assert parse_since("24h", NOW) == NOW - 86400 and parse_since("30m", NOW) == NOW - 1800
    assert parse_since("2026-12-01T00:00:00Z", NOW) == parse_since("2026-12-01T00:00:00", NOW) == 1_796_083_200.0
    assert query_from({"signal": "low_score", "limit": "5", "since": "7d"}, NOW) == FindingQuery(
        signal="low_score", limit=5, since=NOW - 7 * 86400)
    for params, named in (({"signal": "leak"}, "signal"), ({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"),
                          ({"since": "yesterday"}, "since"), ({"cursor": "1.5"}, "cursor"), ({"tenat": "a"}, "tenat")):
        with pytest.raises(QueryError, match=f"^{named}: "):
            query_from(params, NOW)


def _leak(trace_id: str, groups: list[str], tenant: str = "acme") -> Observation:
    """A trace whose context holds a passage its own ACL keeps from the caller."""
    catalog = Catalog()
    passage = Passage("board#1", doc_id="board", score=0.5, acl=["group:board"])
    event = TraceEvent(trace_id=trace_id, time=NOW, query="q", index=IndexRef("hr"), tenant=tenant,
                       caller=Caller("u-1", groups), retrievals=[Retrieval("vector", [passage])], context=[passage])
    return Observation(event, "http", NOW, SignalEngine(SignalsConfig(), catalog).observe(event))


def test_ids_are_stored_as_shown_ids_under_a_keyed_row_key(store):
    trace_id, tenant = f"t-{EMAIL}", "ops@example.org"
    keys = []
    for caller_key in ("k" * 32, "j" * 32):
        redactor = Redactor(RedactionConfig(caller_key=SecretStr(caller_key)))
        sink = FindingsSink(store, redactor, 100.0, Clock(), monotonic=Clock())
        sink.consume(_leak(trace_id, ["staff"], tenant))
        sink.flush(5)
        rows = store.find(FindingQuery(trace_id=redactor.shown_id(trace_id), signal="permission_violation"))
        assert len(rows) == 2 and {r.stage for r in rows} == {"candidates", "context"}
        for row in rows:
            assert row.trace_id.startswith("[EMAIL]~k") and row.tenant == redactor.shown_id(tenant)
            assert row.passage_ids == ["board#1"] and EMAIL not in row.key
        keys.append({row.key for row in rows})
    # the key is made of shown ids: under another caller key the same trace gives other keys (a
    # plain hash of the raw id would give the same, and a guessed address could be checked against it)
    assert not keys[0] & keys[1]


def test_a_long_list_is_cut_in_the_reason_and_kept_whole_apart(store):
    groups = [f"team-{i:03d}-" + "platform-engineering-" * 9 for i in range(400)]
    sink = sink_for(store, Clock())
    sink.consume(_leak("many-groups", groups))
    sink.flush(5)
    rows = store.find(FindingQuery(signal="permission_violation"))
    assert len(rows) == 2
    for row in rows:
        assert len(row.reason) <= MAX_REASON_CHARS
        assert row.reason.startswith("passage ACL [group:board] excludes the caller [group:team-000-")
        assert row.reason.endswith(" … and 397 more]")
        with pytest.raises(SQLAlchemyError):  # a page of rows never loads the whole lists
            _ = row.principals
    lists = store.principals(row.id for row in rows)
    assert set(lists) == {row.id for row in rows}
    for kept in lists.values():
        assert kept["acl"] == {"values": ["group:board"], "omitted": 0}
        assert kept["caller"]["omitted"] == 0 and len(kept["caller"]["values"]) == 402
        assert sorted(p for p in kept["caller"]["values"] if p.startswith("group:")) == [f"group:{g}" for g in groups]


def test_the_whole_lists_are_bounded_too():
    huge = {"acl": [f"group:acl-{i:03d}-" + "x" * 245 for i in range(500)],
            "caller": [f"group:caller-{i:03d}-" + "y" * 245 for i in range(500)]}
    kept = Wording.full_lists(huge)
    assert len(json.dumps(kept).encode()) <= MAX_FULL_LISTS_BYTES
    assert kept["acl"] == {"values": huge["acl"], "omitted": 0}  # 131 KB: whole
    assert 0 < kept["caller"]["omitted"] < 500
    assert kept["caller"]["values"] == huge["caller"][:500 - kept["caller"]["omitted"]]


@pytest.mark.parametrize("database", BOTH)
def test_rows_stored_before_migration_0009_keep_their_reasons(database, request, tmp_path):
    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database(f"findings_old_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    upgrade(engine, "0008")
    with engine.begin() as connection:
        connection.execute(text(
            "insert into finding (key, trace_id, time, recorded_at, tenant, index_name, caller, signal, stage, "
            "passage_ids, documents, reason) values ('k1', 't1', 1.0, 1.0, 'acme', 'hr', '', 'low_score', null, "
            "'[]', '[]', 'top score 0.1 of retriever vector is below its limit')"))
    upgrade(engine)
    old = FindingsStore(engine)
    [row] = old.find(FindingQuery())
    assert row.reason == "top score 0.1 of retriever vector is below its limit"
    assert old.principals([row.id]) == {row.id: {}}
    engine.dispose()
