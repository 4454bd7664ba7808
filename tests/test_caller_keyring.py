"""The caller key as a keyring (``redaction.caller_key`` and ``redaction.previous_caller_keys``):
new pseudonyms and keyed shown ids under the newest key; look-ups by an id (trace show, findings
and samples by tenant, erasure) match the rows stored under any key of the ring; rows say which
key made them. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import time

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from pydantic import SecretStr, ValidationError
from sqlalchemy import text

from ragmon.collectors.unread.names import ShownNames
from ragmon.monitor.app.cli import main
from ragmon.monitor.app.findings_view import StoredIds
from ragmon.monitor.app.unread_view import unread_page
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.keyring import key_id
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from ragmon.monitor.storage.store import make_engine, upgrade
from ragmon.monitor.storage.unread_store import UnreadStore
from tests.databases import BOTH, migrated_url

OLD_KEY, NEW_KEY = "caller-key-of-2025-0123456789", "caller-key-of-2026-9876543210"
ALICE, BOB = "u-alice-7", "u-bob-3"
TENANT = "team-jane.doe@example.com"  # a tenant named after a person: stored by a keyed shown id
CONVERSATION = "conv-alice-1"


def redactor(newest: str, *previous: str) -> Redactor:
    return Redactor(RedactionConfig(caller_key=SecretStr(newest),
                                    previous_caller_keys=[SecretStr(key) for key in previous]))


def test_new_pseudonyms_are_made_under_the_newest_key_and_looked_up_under_every_key():
    old, rotated = redactor(OLD_KEY), redactor(NEW_KEY, OLD_KEY)
    only_new = redactor(NEW_KEY)
    assert rotated.pseudonymize_caller(ALICE) == only_new.pseudonymize_caller(ALICE) != old.pseudonymize_caller(ALICE)
    assert rotated.caller_candidates(ALICE) == (only_new.pseudonymize_caller(ALICE), old.pseudonymize_caller(ALICE))
    assert rotated.conversation_candidates(CONVERSATION) == (
        only_new.pseudonymize_conversation(CONVERSATION), old.pseudonymize_conversation(CONVERSATION))
    assert rotated.pseudonymize_conversation(CONVERSATION) == only_new.pseudonymize_conversation(CONVERSATION)
    assert rotated.shown_id(TENANT) == only_new.shown_id(TENANT) != old.shown_id(TENANT)
    assert rotated.shown_candidates(TENANT) == (only_new.shown_id(TENANT), old.shown_id(TENANT))
    assert rotated.shown_candidates("acme") == ("acme",)  # shown as it is: no key involved
    # a user: principal of an event is pseudonymised under the newest key too
    assert rotated.principal("user:" + ALICE) == "user:" + only_new.pseudonymize_caller(ALICE)
    assert (rotated.key_id, rotated.key_ids) == (key_id(NEW_KEY), (key_id(NEW_KEY), key_id(OLD_KEY)))
    assert redactor(NEW_KEY, NEW_KEY, OLD_KEY).key_ids == rotated.key_ids  # a key named twice is tried once


def test_a_previous_key_too_short_is_refused_naming_it():
    with pytest.raises(ValidationError, match=r"previous_caller_keys\n.*\[1\]: must be at least 16 characters"):
        RedactionConfig(caller_key=SecretStr(NEW_KEY), previous_caller_keys=[SecretStr(OLD_KEY), SecretStr("short")])


@pytest.fixture(params=BOTH)
def database_url(request, tmp_path):
    return migrated_url(request, tmp_path, "keyring")


def trace(trace_id: str, caller: str, now: float, conversation: str | None = None) -> dict:
    """An abstained answer (a finding) that every sample stratum takes."""
    passage = {"id": f"{trace_id}-p", "doc_id": "handbook", "text": "Leave carries over.", "acl": ["*"],
               "indexed_at": now - 3600, "source_modified_at": now - 7200}
    event = {"type": "trace", "trace_id": trace_id, "time": now - 600, "tenant": TENANT,
             "query": f"Question {trace_id}?", "index": {"name": "policies"},
             "caller": {"id": caller, "groups": ["staff"]},
             "retrievals": [{"retriever": "vector", "passages": [{**passage, "score": 0.9}]}], "context": [passage],
             "answer": {"text": "I could not find this.", "abstained": True, "citations": []}}
    if conversation:
        event["conversation_id"] = conversation
    return event


def serve(env: dict[str, str], traces: list[dict]) -> None:
    """What ``ragmon serve`` configured by ``env`` stores of ``traces``."""
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    runtime.pipeline.process([RawRecord("file", msgspec.json.encode(t), privilege=Privilege.TRUSTED) for t in traces])
    runtime.close()


def test_rows_stored_before_a_rotation_are_matched_through_the_previous_key(tmp_path, database_url):
    now = time.time()
    base = {"RAGMON_DATABASE__URL": database_url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_SAMPLING__RATES__RANDOM": "1.0", "RAGMON_SAMPLING__WEEKLY_CAP": "1000"}
    before = {**base, "RAGMON_REDACTION__CALLER_KEY": OLD_KEY}
    rotated = {**base, "RAGMON_REDACTION__CALLER_KEY": NEW_KEY,
               "RAGMON_REDACTION__PREVIOUS_CALLER_KEYS": json.dumps([OLD_KEY])}
    forgotten = {**base, "RAGMON_REDACTION__CALLER_KEY": NEW_KEY}  # the old key dropped too early
    # a trace id holding an address: stored by a keyed shown id too
    serve(before, [trace("old-jane.doe@example.com", ALICE, now, CONVERSATION), trace("old-2", BOB, now)])
    serve(rotated, [trace("new-jane.doe@example.com", ALICE, now, CONVERSATION), trace("new-2", BOB, now)])

    def cli(env: dict[str, str], *args: str, code: int = 0) -> str:
        result = CliRunner().invoke(main, list(args), env=env)
        assert result.exit_code == code, result.output
        return result.output

    engine = make_engine(database_url)
    with engine.connect() as connection:
        made_by = dict(connection.execute(text(
            "SELECT caller_key_id, count(*) FROM sample GROUP BY caller_key_id")).all())
        findings_by = dict(connection.execute(text(
            "SELECT caller_key_id, count(*) FROM finding GROUP BY caller_key_id")).all())
    assert made_by == {key_id(OLD_KEY): 2, key_id(NEW_KEY): 2}
    assert findings_by == {key_id(OLD_KEY): 2, key_id(NEW_KEY): 2}
    engine.dispose()

    # by the raw trace id, a row under either key; without the previous key the old one is lost
    for trace_id in ("old-jane.doe@example.com", "new-jane.doe@example.com"):
        view = json.loads(cli(rotated, "trace", "show", trace_id, "-o", "json"))
        assert view["sample"] is not None and len(view["findings"]) == 1, trace_id
    cli(forgotten, "trace", "show", "old-jane.doe@example.com", "-o", "json", code=1)
    # by the raw tenant: the tenant's rows of both keys
    listed = json.loads(cli(rotated, "findings", "list", "--tenant", TENANT, "-o", "json"))["findings"]
    assert len(listed) == 4
    assert len(json.loads(cli(forgotten, "findings", "list", "--tenant", TENANT, "-o", "json"))["findings"]) == 2
    samples = [json.loads(line) for line in cli(rotated, "samples", "list", "--tenant", TENANT, "-o", "json")
               .splitlines()]
    assert len(samples) == 4

    # erasure: alice's rows under both keys, and only hers
    assert json.loads(cli(forgotten, "erase", "--caller", ALICE, "--dry-run", "-o", "json"))["samples"] == 1
    erased = json.loads(cli(rotated, "erase", "--caller", ALICE, "-o", "json"))
    assert (erased["samples"], erased["findings"]) == (2, 2)
    left = [json.loads(line)["trace_id"] for line in cli(rotated, "samples", "list", "-o", "json").splitlines()]
    assert sorted(left) == ["new-2", "old-2"]


def test_a_conversation_is_erased_under_every_key(tmp_path, database_url):
    now = time.time()
    base = {"RAGMON_DATABASE__URL": database_url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_SAMPLING__RATES__RANDOM": "1.0", "RAGMON_SAMPLING__WEEKLY_CAP": "1000"}
    serve({**base, "RAGMON_REDACTION__CALLER_KEY": OLD_KEY}, [trace("c-1", ALICE, now, CONVERSATION)])
    rotated = {**base, "RAGMON_REDACTION__CALLER_KEY": NEW_KEY,
               "RAGMON_REDACTION__PREVIOUS_CALLER_KEYS": json.dumps([OLD_KEY])}
    serve(rotated, [trace("c-2", ALICE, now, CONVERSATION), trace("c-3", ALICE, now)])
    result = CliRunner().invoke(main, ["erase", "--conversation", CONVERSATION, "-o", "json"], env=rotated)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["samples"] == 2  # c-3 had no conversation: it stays


def test_a_restore_needs_every_key_the_backup_s_rows_may_have_been_made_with(tmp_path):
    from tests.test_backup import feed, install

    runner = CliRunner()
    old_env = {**install(tmp_path / "old", f"sqlite:///{tmp_path / 'old' / 'ragmon.db'}", NEW_KEY),
               "RAGMON_REDACTION__PREVIOUS_CALLER_KEYS": json.dumps([OLD_KEY])}
    (tmp_path / "old").mkdir()
    feed(old_env, tmp_path / "old")
    backup = tmp_path / "ragmon.tar.gz"
    assert runner.invoke(main, ["backup", str(backup)], env=old_env).exit_code == 0

    def restore(name: str, newest: str, *previous: str) -> str:
        env = {**install(tmp_path / name, f"sqlite:///{tmp_path / name / 'ragmon.db'}", newest),
               "RAGMON_REDACTION__PREVIOUS_CALLER_KEYS": json.dumps(previous)}
        result = runner.invoke(main, ["restore", str(backup)], env=env)
        return f"{result.exit_code} {result.output}"

    without_old = restore("lacking", NEW_KEY)
    assert without_old.startswith("2 ") and "redaction.previous_caller_keys" in without_old and "[0]" in without_old
    assert not (tmp_path / "lacking").exists()
    # rotated again since the backup: its keys among the previous ones
    assert restore("rotated", "caller-key-of-2027-5555555555", NEW_KEY, OLD_KEY).startswith("0 ")


def test_unread_traces_are_found_by_tenant_and_scope_under_a_previous_key(tmp_path):
    scope = "scope-of-jane.doe@example.com"  # an instrumentation scope named after a person: keyed
    old, rotated = redactor(OLD_KEY), redactor(NEW_KEY, OLD_KEY)
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    store = UnreadStore(engine)

    def unread_row(trace_id: str, by: Redactor) -> dict:
        return {"key": trace_id, "trace_id": trace_id, "time": 1.0, "recorded_at": 1.0,
                "tenant": by.shown_id(TENANT), "scope": ShownNames(by.shown_id).name(scope), "missing": "caller",
                "dialect": "", "lacked": "words", "spans": 1, "digest": {}}

    store.add([unread_row("before", old), unread_row("after", rotated)])
    ids, names = StoredIds(rotated), ShownNames(rotated.shown_id)
    for params in ({"tenant": TENANT}, {"scope": scope}):
        found = [r["trace_id"] for r in unread_page(store, params, 2.0, ids, names)["unread"]]
        assert sorted(found) == ["after", "before"], params
    only_new = StoredIds(redactor(NEW_KEY))
    assert [r["trace_id"] for r in unread_page(store, {"scope": scope}, 2.0, only_new, names)["unread"]] == ["after"]
