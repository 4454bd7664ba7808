"""Malformed dead letters (a torn or edited line of the file, a message on the dead-letter topic that
ragmon did not write) are skipped, counted and named by file and line, or by topic, partition and
offset: `ragmon dead-letters list|replay` handle every other letter, never show a traceback, and exit 1."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from ragmon.collectors.files import JsonlDeadLetterSink
from ragmon.collectors.letter_body import LetterBody
from ragmon.collectors.letters import read_letter_files
from ragmon.monitor.app.cli import main
from ragmon.monitor.core.errors import Reason
from ragmon.monitor.core.records import DeadLetter, Privilege, RawRecord
from tests.collectors.kafka_support import new_topic

KEY = base64.b64encode(b"k" * 32).decode()


def trace(trace_id: str) -> dict:
    return {"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme",
            "index": {"name": "hr"}, "query": "hi",
            "retrievals": [{"retriever": "vector", "passages": [{"id": f"p{i}", "score": 0.5} for i in range(3)]}]}


def environment(tmp_path, **more: str) -> dict:
    return {**{k: None for k in os.environ if k.startswith("RAGMON_")},
            "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
            "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
            "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": KEY, **more}


def refuse(tmp_path, env: dict, trace_ids: list[str]) -> None:
    """Dead letters made as they are made in use: records refused by `ragmon replay` (too many passages)."""
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(trace(t)) for t in trace_ids))
    strict = {**env, "RAGMON_LIMITS__MAX_PASSAGES_PER_LIST": "2"}
    assert CliRunner().invoke(main, ["replay", str(events)], env=strict).exit_code == 1


def no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def test_malformed_letters_in_the_file_are_named_by_line_and_the_others_replayed(tmp_path):
    env = environment(tmp_path)
    refuse(tmp_path, env, ["good-1", "good-2", "good-3"])
    path = tmp_path / "dead.jsonl"
    good = [json.loads(line) for line in path.read_text().splitlines()]
    other_key = LetterBody(raw_key=b"o" * 32).fields(b'{"type": "trace"}', Privilege.TRUSTED)["raw_encrypted"]
    bad = {
        "not JSON": "{not json at all",
        "not an object": "[1, 2, 3]",
        "missing field": json.dumps({k: v for k, v in good[0].items() if k != "reason"}),
        "ill-typed field": json.dumps({**good[0], "size": "big"}),
        "bad time": json.dumps({**good[0], "time": "yesterday"}),
        "unknown privilege": json.dumps({**good[0], "privilege": "root"}),
        "bad base64": json.dumps({**good[0], "raw_encrypted": "%%% not base64 %%%"}),
        "truncated raw": json.dumps({**good[0], "raw_encrypted": good[0]["raw_encrypted"][:24]}),
    }
    wrong_tag = json.dumps({**good[0], "time": "2026-01-01T00:00:00.000+00:00", "raw_encrypted": other_key})
    lines = [json.dumps(good[0]), *list(bad.values())[:4], json.dumps(good[1]), *list(bad.values())[4:],
             wrong_tag, json.dumps(good[2]), ""]
    path.write_text("\n".join(lines) + "\n")
    line_of = {problem: 2 + i if i < 4 else 3 + i for i, problem in enumerate(bad)}

    runner = CliRunner()
    listed = runner.invoke(main, ["dead-letters", "list", "-o", "json"], env=env)
    no_traceback(listed)
    assert listed.exit_code == 1, listed.output  # something was wrong: unusable letters
    shown = json.loads(listed.stdout)
    assert [letter["where"] for letter in shown["letters"]] == [f"{path}:{n}" for n in (12, 11, 6, 1)]
    assert shown["letters"][1]["replay"].startswith("raw bytes fail their authentication tag")
    assert [letter["replay"] for letter in shown["letters"][::2]] == ["possible"] * 2
    unusable = {entry["where"]: entry["problem"] for entry in shown["unusable"]}
    assert sorted(unusable) == sorted(f"{path}:{n}" for n in line_of.values()) and shown["unusable_total"] == 8
    problems = {problem: unusable[f"{path}:{line_of[problem]}"] for problem in bad}
    assert problems["not JSON"].startswith("not JSON")
    assert problems["not an object"] == "not a JSON object"
    assert "`reason`" in problems["missing field"] and "`$.size`" in problems["ill-typed field"]
    assert "`time`" in problems["bad time"] and "`privilege`" in problems["unknown privilege"]
    assert "root" not in problems["unknown privilege"]  # a problem names the field, never quotes it
    assert problems["bad base64"] == "`raw_encrypted` is not base64"
    assert problems["truncated raw"].startswith("`raw_encrypted` is too short")
    table = runner.invoke(main, ["dead-letters", "list"], env=env)
    no_traceback(table)
    assert "8 letters unusable" in table.stdout and f"{path}:2: not JSON" in table.stdout

    replayed = runner.invoke(main, ["dead-letters", "replay", "-o", "json"], env=env)
    no_traceback(replayed)
    assert replayed.exit_code == 1, replayed.output
    summary = json.loads(replayed.stdout)
    assert (summary["replayed"], summary["accepted"], summary["rejected_again"]) == (3, 3, 0)
    assert summary["unusable_total"] == 9
    assert {entry["where"]: entry["problem"] for entry in summary["unusable"]}[f"{path}:11"].startswith(
        "raw bytes fail their authentication tag")
    after = json.loads(runner.invoke(main, ["dead-letters", "list", "-o", "json"], env=env).stdout)["letters"]
    assert [letter["replayed"] for letter in after] == ["accepted", None, "accepted", "accepted"]


def send(kafka, topic: str, value: bytes | None, headers: list[tuple[str, bytes]]) -> str:
    """A message on ``topic``'s partition 0 that ragmon did not write; returns where it lies."""
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    try:
        sent = producer.send(topic, value=value, headers=headers, partition=0).get(timeout=60)
    finally:
        producer.close()
    return f"{topic}[0]@{sent.offset}"


@pytest.mark.integration
def test_topic_letters_keep_their_own_fields_and_malformed_ones_are_named_by_offset(kafka, tmp_path):
    topic = new_topic(kafka, partitions=1, prefix="dlq")
    env = environment(tmp_path, RAGMON_KAFKA__BOOTSTRAP_SERVERS=json.dumps([kafka.bootstrap_servers]),
                      RAGMON_KAFKA__DEAD_LETTER_TOPIC=topic)
    refuse(tmp_path, env, ["good-1", "good-2"])
    headers = [("ragmon.source", b"http"), ("ragmon.reason", b"missing_field"),
               ("ragmon.detail", b"missing required field `$.trace_id`"), ("ragmon.size", b"12")]
    overriding = send(kafka, topic, json.dumps({
        "time": "1999-01-01T00:00:00.000+00:00", "reason": "too_long", "source": "file", "size": 1,
        "privilege": "trusted", "at": {"topic": topic, "partition": 0, "offset": 0}, "raw_hmac": "ab12"}).encode(),
        headers)
    bad = {
        "array": send(kafka, topic, b"[1, 2]", headers),
        "string": send(kafka, topic, b'"a string"', headers),
        "not JSON": send(kafka, topic, b"{not json", headers),
        "ill-typed": send(kafka, topic, b'{"raw_encrypted": 5}', headers),
        "no reason": send(kafka, topic, b"{}", [header for header in headers if header[0] != "ragmon.reason"]),
        "bad size": send(kafka, topic, b"{}", [*headers[:3], ("ragmon.size", b"big")]),
        "huge size": send(kafka, topic, b"{}", [*headers[:3], ("ragmon.size", b"9" * 5000)]),
    }

    runner = CliRunner()
    listed = runner.invoke(main, ["dlq", "list", "-o", "json"], env=env)
    no_traceback(listed)
    assert listed.exit_code == 1, listed.output
    shown = json.loads(listed.stdout)
    [forged] = [letter for letter in shown["letters"] if letter["where"] == overriding]
    # the letter's own fields come from the Kafka record and its headers, never from the body
    assert (forged["reason"], forged["source"], forged["size"], forged["privilege"]) == (
        "missing_field", "http", 12, "ingest")
    assert forged["time"].startswith(time.strftime("%Y-", time.gmtime()))
    assert forged["replay"] == "raw bytes not kept (dead_letter.keep_raw)"
    good = [letter for letter in shown["letters"] if letter["where"] != overriding]
    assert [(letter["reason"], letter["privilege"], letter["replay"]) for letter in good] == [
        ("too_many_passages", "trusted", "possible")] * 2
    unusable = {entry["where"]: entry["problem"] for entry in shown["unusable"]}
    assert sorted(unusable) == sorted(bad.values()) and shown["unusable_total"] == len(bad)
    assert unusable[bad["array"]] == unusable[bad["string"]] == "value is not a JSON object"
    assert unusable[bad["not JSON"]].startswith("value is not JSON")
    assert "`$.raw_encrypted`" in unusable[bad["ill-typed"]]
    assert unusable[bad["no reason"]] == "header `ragmon.reason` missing"
    assert unusable[bad["bad size"]] == unusable[bad["huge size"]] == (
        "header `ragmon.size` is not a whole number of bytes")

    replayed = runner.invoke(main, ["dlq", "replay", "-o", "json"], env=env)
    no_traceback(replayed)
    assert replayed.exit_code == 1, replayed.output
    summary = json.loads(replayed.stdout)
    assert (summary["replayed"], summary["accepted"], summary["rejected_again"]) == (2, 2, 0)
    assert summary["skipped"] == {"raw bytes not kept (dead_letter.keep_raw)": 1}
    assert summary["unusable_total"] == len(bad)
    keys = [json.loads(line)["key"] for line in (tmp_path / "dead.jsonl.replayed").read_text().splitlines()]
    assert keys == [f"{topic}:0:0", f"{topic}:0:1"]


def test_a_line_torn_by_a_crash_costs_itself_alone(tmp_path):
    """A process killed mid-write leaves a line without its end; the next letter written is still
    a line of its own, so only the torn letter is unusable."""
    path = tmp_path / "dead.jsonl"
    path.write_text('{"time": "2026-11-29T22:44:34.411+00:00", "source": "ht')  # no newline: torn
    sink = JsonlDeadLetterSink(path, max_raw_bytes=100)
    sink.write([DeadLetter(RawRecord("http", b"{}", {"item": 0}, privilege=Privilege.INGEST),
                           Reason.MISSING_FIELD, "missing required field `$.type`")])
    sink.shutdown()
    read = read_letter_files(path)
    assert [(letter.where, letter.reason, letter.privilege) for letter in read.letters] == [
        (f"{path}:2", "missing_field", Privilege.INGEST)]
    assert [entry.where for entry in read.unusable] == [f"{path}:1"]


def test_a_topic_record_from_year_ten_thousand_is_named_not_a_traceback():
    """A producer sets any timestamp it likes (a broker may allow it); one no calendar ragmon reads
    can show makes the letter unusable, named by where it lies."""
    from types import SimpleNamespace

    from ragmon.collectors.kafka_dead_letter_reader import _take
    from ragmon.collectors.letters import LettersRead

    headers = [("ragmon.source", b"http"), ("ragmon.reason", b"missing_field"), ("ragmon.detail", b"d"),
               ("ragmon.size", b"2")]
    read = LettersRead()
    for offset, timestamp in ((7, 253_402_300_800_000), (8, 1_700_000_000_000)):
        _take(SimpleNamespace(topic="dlq", partition=0, offset=offset, timestamp=timestamp, headers=headers,
                              value=b"{}"), 1000, read)
    assert [(u.where, u.problem) for u in read.unusable] == [
        ("dlq[0]@7", "record timestamp is not a time ragmon can show")]
    assert [letter.key for letter in read.letters] == ["dlq:0:8"]
