"""The dead-letter encryption key rotated: new letters are encrypted under the new key, letters
written before stay readable and replayable through `dead_letter.previous_encryption_keys`."""

from __future__ import annotations

import base64
import json
import os

from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from tests.test_dead_letters import trace

OLD, NEW = base64.b64encode(b"o" * 32).decode(), base64.b64encode(b"n" * 16).decode()


def test_letters_of_the_old_key_stay_readable_and_new_ones_take_the_new_key(tmp_path):
    base = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
            "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"), "RAGMON_DEAD_LETTER__KEEP_RAW": "true"}
    strict = {"RAGMON_LIMITS__MAX_PASSAGES_PER_LIST": "2"}
    before = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": OLD}
    rotated = {**base, "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": NEW,
               "RAGMON_DEAD_LETTER__PREVIOUS_ENCRYPTION_KEYS": json.dumps([OLD])}
    runner = CliRunner()
    for env, trace_id in ((before, "old"), (rotated, "new")):
        refused = runner.invoke(main, ["replay", "-"], input=json.dumps(trace(trace_id, "hi", 3)),
                                env={**env, **strict})
        assert refused.exit_code == 1, refused.output

    def replayable(env: dict) -> list[str]:
        listed = runner.invoke(main, ["dead-letters", "list", "-o", "json"], env=env)
        assert listed.exit_code == 0, listed.output
        return [letter["replay"].split(":")[0] for letter in json.loads(listed.stdout)["letters"]]  # newest first

    assert replayable(rotated) == ["possible", "possible"]
    unreadable = "raw bytes fail their authentication tag"
    assert replayable({**rotated, "RAGMON_DEAD_LETTER__PREVIOUS_ENCRYPTION_KEYS": "[]"}) == ["possible", unreadable]
    assert replayable(before) == [unreadable, "possible"]  # the new letter was encrypted under the new key only

    replayed = runner.invoke(main, ["dead-letters", "replay", "-o", "json"], env=rotated)
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["accepted"] == 2


def test_a_previous_key_that_is_no_aes_key_is_refused_naming_it(tmp_path):
    env = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
           "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": NEW,
           "RAGMON_DEAD_LETTER__PREVIOUS_ENCRYPTION_KEYS": json.dumps([OLD, "c2hvcnQ="])}
    checked = CliRunner().invoke(main, ["config", "check"], env=env)
    assert checked.exit_code == 2 and "previous_encryption_keys[1]" in checked.output
    assert "c2hvcnQ=" not in checked.output
