"""Conversation samples: a sample of a chat turn carries the earlier turns of its conversation,
redacted, ordered, bounded by turns and bytes, whichever replica read them; a leak, a rephrase or
negative feedback samples the conversation once (docs/sampling.md, "Conversation samples")."""

from __future__ import annotations

import gc
import json
import sqlite3
import time
from collections import Counter

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from sqlalchemy import event as sql_event
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.conversation import CUT, MAX_TEXT_CHARS, bounded_history, clip, searched_of
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.labeling.turn_store import ConversationTurn
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url

KEY = "conversation-test-key-0123456789"


@pytest.fixture(params=BOTH)
def database_url(request, tmp_path):
    return migrated_url(request, tmp_path, "conv")


def replica(tmp_path, url: str, name: str, **env: str):
    """A pipeline of its own on the shared database, as a replica runs one."""
    environ = {"RAGMON_DATABASE__URL": url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / f"dead-{name}.jsonl"),
               "RAGMON_REDACTION__CALLER_KEY": KEY, "RAGMON_SAMPLING__WEEKLY_CAP": "1000",
               "RAGMON_SAMPLING__RATES": '{"random": 1.0}', **env}
    return build_runtime(load_settings(environ=environ), registry=CollectorRegistry())


def feed(runtime, *events: dict) -> None:
    for event in events:  # one batch each: as turns reach a replica, one request at a time
        runtime.pipeline.process([RawRecord("file", msgspec.json.encode(event), privilege=Privilege.TRUSTED)])


def turn(trace_id: str, n: int | None, message: str, *, conversation: str | None = "chat-1", at: float = 0,
         searched: str | None = None, answer: str = "From the handbook.", acl: tuple[str, ...] = ("*",)) -> dict:
    event = {"type": "trace", "trace_id": trace_id, "time": time.time() - 3600 + at, "tenant": "acme",
             "query": message, "index": {"name": "policies"}, "caller": {"id": "u-7", "groups": ["staff"]},
             "retrievals": [{"retriever": "vector", "passages": [
                 {"id": f"{trace_id}-p", "text": "Leave carries over.", "acl": list(acl)}],
                 **({"query": searched} if searched is not None else {})}],
             "answer": {"text": answer, "citations": []}}
    if conversation is not None:
        event["conversation_id"] = conversation
    if n is not None:
        event["turn"] = n
    return event


def samples(url: str) -> dict:
    return {s.trace_id: s for s in SampleStore(make_engine(url)).find()}


def test_a_replica_samples_a_turn_with_the_earlier_turns_another_replica_read(tmp_path, database_url):
    """Turns 1 and 2 read by one replica (2 before 1, and stamped earlier: the turn numbers order
    them), turn 3 by another: its sample carries both, in turn order, redacted, with what each
    searched; a first turn and a trace without a conversation carry none."""
    first, second = replica(tmp_path, database_url, "a"), replica(tmp_path, database_url, "b")
    feed(first, turn("t2", 2, "And for contractors? Ask jane.doe@example.com", at=5,
                     searched="leave policy for contractors", answer="Call +44 20 7946 0958 for that."),
         turn("t1", 1, "What is the leave policy?", at=10, answer="20 days a year."),
         turn("solo", None, "Where is the form?", conversation=None))
    feed(second, turn("t3", 3, "And for interns?", at=30, searched="leave policy for interns"))
    first.close()
    second.close()
    stored = samples(database_url)
    history = stored["t3"].payload["history"]
    assert [(h["turn"], h["trace_id"], h["message"], h["searched"], h["answer"]) for h in history] == [
        (1, "t1", "What is the leave policy?", [], "20 days a year."),
        (2, "t2", "And for contractors? Ask [EMAIL]", ["leave policy for contractors"], "Call [PHONE] for that.")]
    assert history[0]["time"] > history[1]["time"]
    assert stored["t1"].payload["history"] == []
    assert "history" not in stored["solo"].payload
    assert stored["t2"].payload["history"] == []  # stored before turn 1 arrived: a sample is not rewritten
    with make_engine(database_url).connect() as connection:  # nothing unredacted is kept
        rows = [dict(r._mapping) for r in connection.execute(select(ConversationTurn))]
    assert sorted(r["trace_id"] for r in rows) == ["t1", "t2", "t3"]
    text = json.dumps(rows)
    assert "jane.doe@example.com" not in text and "7946" not in text and "chat-1" not in text and "u-7" not in text


def test_the_history_keeps_the_newest_turns_within_its_bounds_and_the_table_its_own(tmp_path, database_url):
    runtime = replica(tmp_path, database_url, "a", RAGMON_SAMPLING__HISTORY_TURNS="2")
    feed(runtime, *(turn(f"t{n:02d}", n, f"Question number {n} about leave?", at=n) for n in range(1, 12)))
    runtime.close()
    stored = samples(database_url)
    assert [h["turn"] for h in stored["t11"].payload["history"]] == [9, 10]
    assert [h["turn"] for h in stored["t02"].payload["history"]] == [1]
    with make_engine(database_url).connect() as connection:  # the newest 4 x history_turns per conversation
        kept = sorted(connection.execute(select(ConversationTurn.turn)).scalars())
    assert kept == list(range(4, 12))


def test_a_batch_of_turns_reads_no_table_whole(tmp_path):
    """Every statement a batch of several conversations' turns issues finds its rows through an
    index (SQLite's own query plan for it). A row-value ``(tenant, conversation) IN (...)`` of more
    than one pair is answered by scanning the whole index: each flush read every turn stored, and
    a replay slowed as the table grew."""
    url = f"sqlite:///{tmp_path / 'ragmon.db'}"
    runtime = replica(tmp_path, url, "a")
    issued: list[tuple[str, object]] = []

    def remember(connection, cursor, statement, parameters, context, executemany):
        if not executemany and statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
            issued.append((statement, parameters))

    sql_event.listen(Engine, "before_cursor_execute", remember)
    try:
        for n in (1, 2, 3):
            runtime.pipeline.process([RawRecord("file", msgspec.json.encode(
                turn(f"t{c}-{n}", n, f"Question {n} of chat {c}?", conversation=f"chat-{c}", at=n)),
                privilege=Privilege.TRUSTED) for c in range(5)])
    finally:
        sql_event.remove(Engine, "before_cursor_execute", remember)
        runtime.close()
    assert any("conversation_turn" in statement for statement, _ in issued)
    database = sqlite3.connect(tmp_path / "ragmon.db")
    scans = {}
    for statement, parameters in issued:
        plan = [row[3] for row in database.execute("EXPLAIN QUERY PLAN " + statement, parameters)]
        # the served-documents digest counts its rows when it prunes, once a minute, bounded by its cap
        scans |= {step: statement for step in plan if step.startswith("SCAN ") and "CONSTANT" not in step
                  and not step.startswith("SCAN served_document")}
    assert scans == {}


def test_a_flush_leaves_no_reference_cycle_behind(tmp_path):
    """What a flush writes and asks the store (turns, samples, claims) is freed as soon as the flush
    ends, by reference counting. `ragmon serve` leaves cycles to the collector's rare full
    collections (``settle_start_up_objects``), and a statement built per flush kept its values (the
    batch's conversation pseudonyms, trace ids, fingerprints) in cycles among its clause objects:
    about 20 MB of them waited in memory after 100,000 simulated traces."""
    runtime = replica(tmp_path, f"sqlite:///{tmp_path / 'ragmon.db'}", "a")

    def flush(n: int) -> None:  # five conversations' turn n: turns stored, samples admitted, claims kept
        runtime.pipeline.process([RawRecord("file", msgspec.json.encode(
            turn(f"t{c}-{n}", n, f"Question {n} of chat {c}?", conversation=f"chat-{c}", at=n)),
            privilege=Privilege.TRUSTED) for c in range(5)])

    try:
        flush(1)  # the first flush builds what lives as long as the process
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept to be looked at
        for n in (2, 3, 4):
            flush(n)
        gc.collect()
        left = Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    try:
        with runtime.engine.connect() as connection:
            turns = connection.execute(select(func.count()).select_from(ConversationTurn)).scalar_one()
        assert turns == 20 and runtime.samples.count() > 0
    finally:
        runtime.close()
    assert left == Counter()


def test_bounded_history_drops_the_oldest_turns_first():
    turns = [{"turn": n, "message": "x" * 500} for n in range(1, 6)]
    assert bounded_history(turns, 3, 100_000) == turns[2:]
    size = len(json.dumps(turns[0]).encode()) + 1
    assert bounded_history(turns, 5, 2 * size + 1) == turns[3:]  # two fit in the bytes, three do not
    assert bounded_history(turns, 5, 2 * size) == turns[4:]
    assert bounded_history(turns, 0, 100_000) == []


def test_texts_are_cut_after_redaction_and_searches_other_than_the_message_kept_once():
    assert clip("a" * MAX_TEXT_CHARS) == "a" * MAX_TEXT_CHARS
    long = clip("a" * (MAX_TEXT_CHARS + 5))
    assert len(long) == MAX_TEXT_CHARS and long.endswith(CUT)
    assert searched_of("q", ["q", None, "r", "s", "r"]) == ["r", "s"]


def test_a_leaking_conversation_is_sampled_once_with_its_turns(tmp_path, database_url):
    """Turns 2 and 3 leak: each is a leak sample of its own, and one of them holds the conversation's
    one place, with the turns before it; negative feedback on another conversation's turn samples
    that conversation too."""
    runtime = replica(tmp_path, database_url, "a", RAGMON_SAMPLING__RATES='{"random": 0.0}')
    feed(runtime, turn("c1", 1, "What is the payroll date?", at=1),
         turn("c2", 2, "And the salary bands?", at=2, acl=("group:finance",)),
         turn("c3", 3, "And the bonus table?", at=3, acl=("group:finance",)),
         turn("d1", 1, "Where is the office?", conversation="chat-2", at=4),
         {"type": "feedback", "trace_id": "d1", "kind": "thumb", "value": "down"})
    runtime.close()
    stored = samples(database_url)
    assert {t: sorted(s.strata) for t, s in stored.items() if t != "d1"} == {
        **{t: ["permission_violation"] for t in ("c2", "c3")},
        min(("c2", "c3"), key=lambda t: stored[t].rank): ["conversation", "permission_violation"]}
    whole = next(s for s in stored.values() if "conversation" in s.strata and s.trace_id != "d1")
    assert [h["trace_id"] for h in whole.payload["history"]] == ["c1", "c2"][:int(whole.trace_id[1]) - 1]
    assert sorted(stored["d1"].strata) == ["conversation", "negative_feedback"]


def test_retention_deletes_the_turns_recorded_before_it(tmp_path, database_url):
    runtime = replica(tmp_path, database_url, "a")
    feed(runtime, turn("t1", 1, "What is the leave policy?"))
    runtime.close()
    store = SampleStore(make_engine(database_url))
    assert store.delete_turns_before(time.time() - 60) == 0
    assert store.delete_turns_before(time.time() + 1) == 1
    with make_engine(database_url).connect() as connection:
        assert connection.execute(select(func.count()).select_from(ConversationTurn)).scalar_one() == 0


def test_samples_list_shows_each_samples_turn_and_earlier_turns(tmp_path, database_url):
    runtime = replica(tmp_path, database_url, "a")
    feed(runtime, turn("t1", 1, "What is the leave policy?", at=1), turn("t2", 2, "And for contractors?", at=2),
         turn("solo", None, "Where is the form?", conversation=None))
    runtime.close()
    env = {"RAGMON_DATABASE__URL": database_url, "RAGMON_REDACTION__CALLER_KEY": KEY, "COLUMNS": "200"}
    listed = CliRunner().invoke(main, ["samples", "list", "-o", "json"], env=env)
    rows = {row["trace_id"]: row["payload"] for row in map(json.loads, listed.output.splitlines())}
    assert [h["message"] for h in rows["t2"]["history"]] == ["What is the leave policy?"]
    assert rows["t1"]["history"] == [] and "history" not in rows["solo"]
    table = CliRunner().invoke(main, ["samples", "list"], env=env)
    assert table.exit_code == 0, table.output
    cells = {line.split("│")[3].strip(): [c.strip() for c in line.split("│")[7:9]]
             for line in table.output.splitlines() if line.count("│") >= 9 and "trace id" not in line}
    assert cells == {"t1": ["1", "0"], "t2": ["2", "1"], "solo": ["", ""]}
