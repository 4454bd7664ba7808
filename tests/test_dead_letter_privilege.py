"""A dead letter keeps the privilege its request had, and `ragmon dead-letters replay` never grants
more: a catalog event an ingest client forged stays refused on replay, against a real `ragmon serve`,
unless the operator grants the catalog right explicitly."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import httpx

from ragmon.collectors.files import JsonlDeadLetterSink, read_dead_letters
from ragmon.collectors.letters import file_letter
from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.memory import MemoryDeadLetters
from ragmon.monitor.core.pipeline import Pipeline, Stages
from ragmon.monitor.core.records import Privilege, RawRecord
from tests.ragmon_process import RagmonServer, scraped

KEY = base64.b64encode(b"k" * 32).decode()
INGEST = {"authorization": "Bearer ingest-secret"}
CATALOG = {"authorization": "Bearer catalog-secret"}
ENV = {"RAGMON_HTTP__TOKEN": "ingest-secret", "RAGMON_HTTP__CATALOG_TOKEN": "catalog-secret",
       "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": KEY}


def document(version: str, acl: list[str]) -> dict:
    return {"type": "document", "doc_id": "payroll", "version": version, "modified_at": time.time() - 100,
            "tenant": "acme", "acl": acl}


def leak(trace_id: str) -> dict:
    """A staff member served a passage of the payroll document, which only HR may read."""
    return {"type": "trace", "trace_id": trace_id, "time": time.time() - 10, "query": "q", "tenant": "acme",
            "index": {"name": "policies"}, "caller": {"id": "u-1", "groups": ["staff"]},
            "answer": {"text": "yes", "citations": []}, "context": [{"id": "payroll#1", "doc_id": "payroll"}]}


def post(server: RagmonServer, events: list[dict], headers: dict) -> dict:
    answer = httpx.post(f"{server.url}/v1/events", json=events, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def leaks_counted(server: RagmonServer, trace_id: str) -> float:
    """The permission violations at context counted for the leak ``trace_id`` (posted alone)."""
    before = scraped(server.url, "ragmon_permission_violations_total", stage="context")
    assert post(server, [leak(trace_id)], INGEST)["accepted"] == 1
    return scraped(server.url, "ragmon_permission_violations_total", stage="context") - before


def dead_letters(server: RagmonServer, *args: str) -> subprocess.CompletedProcess:
    """`ragmon dead-letters ARGS` run as an operator runs it, beside the server's store and files."""
    return subprocess.run([sys.executable, "-m", "ragmon", "dead-letters", *args], env=server.env,
                          capture_output=True, text=True, timeout=120)


def test_a_forged_catalog_event_stays_refused_on_replay_unless_the_catalog_right_is_granted(tmp_path):
    with RagmonServer(tmp_path, **ENV) as server:
        assert post(server, [document("1", ["group:hr"])], CATALOG)["accepted"] == 1
        forged = post(server, [document("2", ["*"])], INGEST)  # only the ingest token: everyone may read it
        assert [rejection["reason"] for rejection in forged["rejections"]] == ["not_permitted"]
    [letter] = read_dead_letters(tmp_path / "dead.jsonl")
    assert (letter["reason"], letter["privilege"]) == ("not_permitted", "ingest")

    replay = dead_letters(server, "replay", "-o", "json")
    assert replay.returncode == 1, replay.stdout + replay.stderr  # refused again
    assert "Traceback" not in replay.stderr
    summary = json.loads(replay.stdout)
    assert (summary["replayed"], summary["accepted"], summary["rejected_again"]) == (1, 0, 1)
    assert summary["granted_catalog"] == 0
    again = read_dead_letters(tmp_path / "dead.jsonl")[-1]
    assert (again["reason"], again["privilege"]) == ("not_permitted", "ingest")  # still the sender's privilege

    with RagmonServer(tmp_path, **ENV) as restarted:  # the catalog as the store holds it
        assert leaks_counted(restarted, "leak-after-replay") == 1

    granted = dead_letters(server, "replay", "--grant-catalog")
    assert granted.returncode == 0, granted.stdout + granted.stderr
    assert "--grant-catalog: 1 letters replayed with the catalog right, which their senders lacked" in granted.stdout
    assert "1 letters replayed: 1 accepted" in granted.stdout
    notes = [json.loads(line) for line in (tmp_path / "dead.jsonl.replayed").read_text().splitlines()]
    assert [(note["outcome"], note.get("granted")) for note in notes] == [
        ("rejected: not_permitted", None), ("accepted", "catalog")]

    with RagmonServer(tmp_path, **ENV) as restarted:  # the operator's grant did change the catalog
        assert leaks_counted(restarted, "leak-after-grant") == 0


NOW = 1_796_000_000.0


def catalog_event(modified_at: object) -> bytes:
    return json.dumps({"type": "document", "doc_id": "payroll", "version": "2", "modified_at": modified_at,
                       "tenant": "acme", "acl": ["*"]}).encode()


FORGED = catalog_event(NOW - 100)


def test_a_record_writes_the_catalog_by_its_senders_privilege_or_an_operators_grant():
    applied = []
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [], MemoryDeadLetters(), clock=lambda: NOW,
                        stages=Stages(update_catalog=applied.append))
    result = pipeline.process([RawRecord("http", FORGED, privilege=privilege) for privilege in Privilege])
    assert [rejection.reason for rejection in result.rejections] == ["not_permitted"]  # ingest alone
    assert len(applied) == 2  # catalog, trusted
    pipeline.process([RawRecord("file", FORGED, privilege=Privilege.INGEST, catalog_granted=True)])
    assert len(applied) == 3


def test_a_letter_records_its_senders_privilege_never_a_grant(tmp_path):
    sink = JsonlDeadLetterSink(tmp_path / "dead.jsonl", max_raw_bytes=100)
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [], sink, clock=lambda: NOW)
    undated = catalog_event("yesterday")  # refused bad_timestamp, before any privilege is asked
    pipeline.process([RawRecord("http", FORGED, {"item": 0}, privilege=Privilege.INGEST),
                      RawRecord("file", undated, {"dead_letter": "k"}, privilege=Privilege.INGEST,
                                catalog_granted=True),
                      RawRecord("file", undated, {"line": 3}, privilege=Privilege.TRUSTED)])
    sink.shutdown()
    assert [(letter["reason"], letter["privilege"]) for letter in read_dead_letters(tmp_path / "dead.jsonl")] == [
        ("not_permitted", "ingest"), ("bad_timestamp", "ingest"), ("bad_timestamp", "trusted")]


def test_a_letter_written_before_privileges_were_recorded_counts_as_the_least():
    line = json.dumps({"time": "2026-11-29T22:44:34.411+00:00", "source": "file", "reason": "too_long",
                       "detail": "d", "origin": {"line": 1}, "size": 3, "truncated": False}).encode()
    assert file_letter(line, "dead.jsonl:1").privilege is Privilege.INGEST


def test_a_letter_whose_privilege_was_raised_does_not_open(tmp_path):
    """The privilege is sealed with the raw bytes: an ``ingest`` letter edited (in the file, or
    re-produced to the topic with another header) to claim ``trusted`` fails its tag and is not
    replayed; a letter sealed before privileges were recorded opens with the least privilege, whatever
    it claims, so a forged catalog event in it stays refused."""
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from ragmon.collectors.letter_body import LetterBody, UnreadableRaw, open_raw

    raw_key = b"k" * 32
    sealed = LetterBody(raw_key=raw_key).fields(FORGED, Privilege.INGEST)["raw_encrypted"]
    assert open_raw(raw_key, sealed, Privilege.INGEST) == (FORGED, Privilege.INGEST)
    for raised in (Privilege.CATALOG, Privilege.TRUSTED):
        try:
            open_raw(raw_key, sealed, raised)
        except UnreadableRaw as error:
            assert "authentication tag" in str(error)
        else:
            raise AssertionError(f"a letter raised to {raised} opened")

    nonce = os.urandom(12)  # as letters were sealed before they recorded a privilege
    old = base64.b64encode(nonce + AESGCM(raw_key).encrypt(nonce, FORGED, b"ragmon dead letter v1")).decode()
    assert open_raw(raw_key, old, Privilege.TRUSTED) == (FORGED, Privilege.INGEST)


def test_replay_of_an_edited_letter_applies_nothing(tmp_path):
    """End to end: the forged catalog event's letter, its privilege edited to ``trusted`` in the
    file, is named unusable by ``dead-letters replay`` and the catalog keeps the document's ACL."""
    with RagmonServer(tmp_path, **ENV) as server:
        assert post(server, [document("1", ["group:hr"])], CATALOG)["accepted"] == 1
        post(server, [document("2", ["*"])], INGEST)
    path = tmp_path / "dead.jsonl"
    [letter] = read_dead_letters(path)
    path.write_text(json.dumps({**letter, "privilege": "trusted"}) + "\n")
    replay = dead_letters(server, "replay", "-o", "json")
    assert replay.returncode == 1 and "Traceback" not in replay.stderr, replay.stdout + replay.stderr
    summary = json.loads(replay.stdout)
    assert (summary["replayed"], summary["unusable_total"]) == (0, 1)
    assert "authentication tag" in summary["unusable"][0]["problem"]
    with RagmonServer(tmp_path, **ENV) as restarted:
        assert leaks_counted(restarted, "leak-after-edited-replay") == 1
