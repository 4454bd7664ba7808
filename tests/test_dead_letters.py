"""``ragmon dead-letters list|replay``: refused records listed with their reasons and, once the
config is fixed, fed back: accepted, or dead letters again with their new reason, never twice."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from click.testing import CliRunner

from ragmon.collectors.files import read_dead_letters
from ragmon.monitor.app.cli import main
from tests.collectors.kafka_support import new_topic, read_all

KEY = base64.b64encode(b"k" * 32).decode()


def trace(trace_id: str, query: str, passages: int) -> dict:
    return {"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme",
            "index": {"name": "hr"}, "query": query,
            "retrievals": [{"retriever": "vector", "passages": [{"id": f"p{i}", "score": 0.5}
                                                                for i in range(passages)]}]}


def test_letters_are_listed_then_replayed_once_the_config_is_fixed(tmp_path):
    base = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
            "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": KEY}
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in [trace("short", "hi", 3), trace("long", "why " * 10, 3)]))
    runner = CliRunner()
    strict = {**base, "RAGMON_LIMITS__MAX_PASSAGES_PER_LIST": "2"}
    assert runner.invoke(main, ["replay", str(events)], env=strict).exit_code == 1  # both refused
    without_raw = {**strict, "RAGMON_DEAD_LETTER__KEEP_RAW": "false"}
    runner.invoke(main, ["replay", "-"], input=json.dumps(trace("nokeep", "hi", 3)), env=without_raw)

    listed = runner.invoke(main, ["dead-letters", "list", "-o", "json"], env=base)
    assert listed.exit_code == 0, listed.output
    letters = json.loads(listed.stdout)["letters"]
    assert [(letter["reason"], letter["replay"]) for letter in letters] == [
        ("too_many_passages", "raw bytes not kept (dead_letter.keep_raw)"),
        ("too_many_passages", "possible"), ("too_many_passages", "possible")]
    table = runner.invoke(main, ["dlq", "list"], env=base)
    assert "3 of 3 dead letters" in table.stdout and "by reason: too_many_passages 3" in table.stdout

    # fixed: more passages allowed; but now queries are bounded: the long one fails again, differently
    fixed = {**base, "RAGMON_LIMITS__MAX_TEXT_LENGTH": "10"}
    replayed = runner.invoke(main, ["dead-letters", "replay", "-o", "json"], env=fixed)
    assert replayed.exit_code == 1, replayed.output
    assert json.loads(replayed.stdout) == {"replayed": 2, "accepted": 1, "rejected_again": 1,
                                           "skipped": {"raw bytes not kept (dead_letter.keep_raw)": 1},
                                           "granted_catalog": 0, "unusable": [], "unusable_total": 0}
    letters = read_dead_letters(tmp_path / "dead.jsonl")
    assert [letter["reason"] for letter in letters] == ["too_many_passages"] * 3 + ["too_long"]
    assert letters[-1]["origin"]["dead_letter"].endswith(letters[1]["raw_hmac"])

    after = json.loads(runner.invoke(main, ["dead-letters", "list", "-o", "json"], env=fixed).stdout)["letters"]
    assert [(letter["reason"], letter["replayed"]) for letter in after] == [
        ("too_long", None), ("too_many_passages", None), ("too_many_passages", "rejected: too_long"),
        ("too_many_passages", "accepted")]
    again = runner.invoke(main, ["dead-letters", "replay", "--reason", "too_many_passages", "-o", "json"], env=fixed)
    assert again.exit_code == 0
    assert json.loads(again.stdout)["skipped"] == {"replayed already": 2,
                                                   "raw bytes not kept (dead_letter.keep_raw)": 1}
    assert (tmp_path / "dead.jsonl.replayed").stat().st_mode & 0o777 == 0o600
    bad = runner.invoke(main, ["dead-letters", "list", "--since", "yesterday"], env=fixed)
    assert bad.exit_code == 2 and "--since" in bad.output


@pytest.mark.integration
def test_letters_on_the_dead_letter_topic_are_listed_and_replayed(kafka, tmp_path):
    """Scaled mode: the letters `ragmon replay` wrote to the dead-letter topic of a real broker are
    read back whole (no consumer group), replayed once the config is fixed, and the one refused
    again is on the topic again with its new reason."""
    topic = new_topic(kafka, partitions=2, prefix="dlq")
    base = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
            "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": KEY,
            "RAGMON_KAFKA__BOOTSTRAP_SERVERS": json.dumps([kafka.bootstrap_servers]),
            "RAGMON_KAFKA__DEAD_LETTER_TOPIC": topic}
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in [trace("short", "hi", 3), trace("long", "why " * 10, 3)]))
    runner = CliRunner()
    strict = {**base, "RAGMON_LIMITS__MAX_PASSAGES_PER_LIST": "2"}
    first = runner.invoke(main, ["replay", str(events)], env=strict)
    assert first.exit_code == 1, first.output
    assert not (tmp_path / "dead.jsonl").exists()  # with Kafka, the letters went to the topic

    letters = json.loads(runner.invoke(main, ["dlq", "list", "-o", "json"], env=base).stdout)["letters"]
    assert [(letter["reason"], letter["replay"]) for letter in letters] == [("too_many_passages", "possible")] * 2
    assert sorted(letter["origin"]["line"] for letter in letters) == ["1", "2"]

    fixed = {**base, "RAGMON_LIMITS__MAX_TEXT_LENGTH": "10"}
    replayed = runner.invoke(main, ["dead-letters", "replay", "-o", "json"], env=fixed)
    assert replayed.exit_code == 1, replayed.output
    assert json.loads(replayed.stdout) == {"replayed": 2, "accepted": 1, "rejected_again": 1, "skipped": {},
                                           "granted_catalog": 0, "unusable": [], "unusable_total": 0}
    on_topic = [dict(message.headers)["ragmon.reason"].decode() for message in read_all(kafka, topic)]
    assert sorted(on_topic) == ["too_long", "too_many_passages", "too_many_passages"]
    again = runner.invoke(main, ["dead-letters", "replay", "--reason", "too_many_passages", "-o", "json"], env=fixed)
    assert json.loads(again.stdout)["skipped"] == {"replayed already": 2}
