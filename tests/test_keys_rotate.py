"""`ragmon keys rotate`: dead letters sealed under a previous encryption key are sealed again under the
current one (a dry run changes nothing), after which the previous key can go; stored rows are
counted per caller key, a previous caller key being droppable only once no row needs it (rows of
before key ids count for every key). Counts only: no id is printed. Rows on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from ragmon.collectors.letter_body import open_raw
from ragmon.collectors.letters import privilege_named
from ragmon.monitor.app.cli import main
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url
from tests.test_caller_keyring import ALICE, BOB, NEW_KEY, OLD_KEY, serve, trace

CAROL = "u-carol-5"
OLD_AES, NEW_AES = base64.b64encode(b"o" * 32).decode(), base64.b64encode(b"n" * 32).decode()


def cli(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def refused(caller: str, n: int) -> dict:
    """A trace ragmon refuses (no query), naming ``caller``: a dead letter."""
    return {"type": "trace", "trace_id": f"bad-{n}", "time": time.time(), "tenant": "acme",
            "index": {"name": "policies"}, "caller": {"id": caller}}


def test_dead_letters_are_resealed_under_the_newest_key_and_the_previous_one_can_go(tmp_path):
    letters = tmp_path / "dead.jsonl"
    base = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}", "RAGMON_DEAD_LETTER__PATH": str(letters),
            "RAGMON_REDACTION__CALLER_KEY": NEW_KEY, "RAGMON_DEAD_LETTER__KEEP_RAW": "true"}
    before = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": OLD_AES}
    rotated = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": NEW_AES,
               "RAGMON_DEAD_LETTER__PREVIOUS_ENCRYPTION_KEYS": json.dumps([OLD_AES])}
    serve(before, [refused(ALICE, 1), refused(BOB, 2)])
    serve(rotated, [refused(ALICE, 3)])  # written under the new key already
    written = letters.read_bytes()

    def opened_under_the_new_key_only() -> list[bytes]:
        opened = []
        for line in letters.read_text().splitlines():
            letter = json.loads(line)
            opened.append(open_raw(base64.b64decode(NEW_AES), letter["raw_encrypted"],
                                   privilege_named(letter.get("privilege"), "privilege"))[0])
        return opened

    dry = json.loads(cli(rotated, "keys", "rotate", "--dry-run", "-o", "json"))
    assert dry["letters"] == {"resealed": 2, "unopened": 0, "topic_untouched": False}
    assert letters.read_bytes() == written
    printed = cli(rotated, "keys", "rotate")
    assert "dead letters: re-sealed 2 under dead_letter.encryption_key" in printed
    assert "no letter in the files needs dead_letter.previous_encryption_keys any more" in printed
    assert ALICE not in printed and BOB not in printed
    raw = opened_under_the_new_key_only()
    assert [json.loads(r)["trace_id"] for r in raw] == ["bad-1", "bad-2", "bad-3"]
    # the previous key dropped: every letter is still read, replayed and erased by its bytes
    after = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": NEW_AES}
    assert json.loads(cli(after, "keys", "rotate", "-o", "json"))["letters"]["resealed"] == 0
    assert json.loads(cli(after, "erase", "--caller", ALICE, "-o", "json"))["dead_letters"] == 2
    # a letter under a key nobody holds any more is counted and left as it is
    stranger = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": OLD_AES}
    assert json.loads(cli(stranger, "keys", "rotate", "-o", "json"))["letters"] == {
        "resealed": 0, "unopened": 1, "topic_untouched": False}
    assert len(letters.read_text().splitlines()) == 1


@pytest.fixture(params=BOTH)
def database_url(request, tmp_path):
    return migrated_url(request, tmp_path, "rotate")


def test_a_previous_caller_key_is_droppable_once_no_stored_row_needs_it(tmp_path, database_url):
    now = time.time()
    base = {"RAGMON_DATABASE__URL": database_url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_SAMPLING__RATES__RANDOM": "1.0", "RAGMON_SAMPLING__WEEKLY_CAP": "1000"}
    serve({**base, "RAGMON_REDACTION__CALLER_KEY": OLD_KEY}, [trace("k-1", ALICE, now, "chat-a"),
                                                                trace("k-2", BOB, now)])
    rotated = {**base, "RAGMON_REDACTION__CALLER_KEY": NEW_KEY,
               "RAGMON_REDACTION__PREVIOUS_CALLER_KEYS": json.dumps([OLD_KEY])}
    serve(rotated, [trace("k-3", ALICE, now, "chat-a")])

    report = json.loads(cli(rotated, "keys", "rotate", "-o", "json"))
    newest, previous = report["caller_keys"]
    assert newest["setting"] == "redaction.caller_key"
    assert previous["setting"] == "redaction.previous_caller_keys[0]"
    # each trace: a sample, its claims, one finding
    assert (newest["by_table"]["sample"], newest["by_table"]["finding"]) == (1, 1)
    assert (previous["by_table"]["sample"], previous["by_table"]["finding"]) == (2, 2)
    # the chat turns kept for samples' histories, by the key that made their pseudonyms
    assert (newest["by_table"]["conversation_turn"], previous["by_table"]["conversation_turn"]) == (1, 1)
    assert report["droppable"] == [] and report["unrecorded"]["rows"] == 0 and report["foreign"]["rows"] == 0
    printed = cli(rotated, "keys", "rotate")
    assert "redaction.previous_caller_keys[0]: still needed" in printed
    assert ALICE not in printed and "caller:" not in printed and "k-1" not in printed

    # the old key's rows gone (erased, or aged out)
    cli(rotated, "erase", "--caller", ALICE)
    cli(rotated, "erase", "--caller", BOB)
    serve(rotated, [trace("k-5", CAROL, now)])
    report = json.loads(cli(rotated, "keys", "rotate", "-o", "json"))
    assert previous_rows(report) == 0 and report["droppable"] == ["redaction.previous_caller_keys[0]"]
    assert "redaction.previous_caller_keys[0]: no stored row needs it: drop it from the configuration" in cli(
        rotated, "keys", "rotate")
    # but a row of before key ids (code older than 0014) may have been made by any key: it stays
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE finding SET caller_key_id = '' WHERE trace_id = 'k-5'"))
    report = json.loads(cli(rotated, "keys", "rotate", "-o", "json"))
    assert (previous_rows(report), report["unrecorded"]["by_table"], report["droppable"]) == (0, {"finding": 1}, [])
    assert "redaction.previous_caller_keys[0]: still needed" in cli(rotated, "keys", "rotate")

    # a key dropped too early: its rows are said to be no longer matched
    serve(rotated, [trace("k-4", BOB, now)])
    report = json.loads(cli({**base, "RAGMON_REDACTION__CALLER_KEY": "caller-key-of-2027-5555555555"},
                            "keys", "rotate", "-o", "json"))
    assert report["foreign"]["by_table"]["sample"] == 2  # k-4 and k-5, both made under NEW_KEY
    engine.dispose()


def previous_rows(report: dict) -> int:
    return report["caller_keys"][1]["rows"]


def test_keys_rotate_on_an_install_with_nothing_stored(tmp_path):
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(Path(tmp_path) / "dead.jsonl"), "RAGMON_REDACTION__CALLER_KEY": NEW_KEY}
    serve(env, [])
    printed = cli(env, "keys", "rotate", "--dry-run")
    assert "raw bytes are not kept (dead_letter.keep_raw): nothing to re-seal" in printed
    assert "redaction.caller_key: 0 rows" in printed
