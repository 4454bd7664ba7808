"""`ragmon erase`: one person's samples, findings, regression cases, weekly batch cases and dead
letters go, matched through the keyed pseudonym; everyone else's stay; a dry run deletes nothing;
the ids are never printed or logged. On SQLite and on PostgreSQL."""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.findings.query import FindingQuery
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.labeling.turn_store import ConversationTurn
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url

ALICE, BOB, CAROL = "u-alice-7", "u-bob-3", "u-carol-5"
CONVERSATION = "conv-carol-1"
QUESTIONS = {"a1": "Does leave carry over?", "a2": "Who approves travel?", "a3": "When is payday?",
             "b1": "How do I book a room?", "b2": "Where is the parking?", "c1": "Can I work abroad?",
             "c2": "What is the dress code?"}  # one stratum place per question: all different


@pytest.fixture(params=BOTH)
def database_url(request, tmp_path):
    return migrated_url(request, tmp_path, "erase")


def trace(trace_id: str, caller: str, now: float, conversation: str | None = None) -> dict:
    """An abstained answer (a finding) that every sample stratum takes."""
    # judged for access (its ACL) and freshness (its times): no not_judged finding beside the abstention
    passage = {"id": f"{trace_id}-p", "doc_id": "handbook", "text": "Leave carries over.", "acl": ["*"],
               "indexed_at": now - 3600, "source_modified_at": now - 7200}
    event = {"type": "trace", "trace_id": trace_id, "time": now - 600, "tenant": "acme",
             "query": QUESTIONS[trace_id], "index": {"name": "policies"}, "caller": {"id": caller, "groups": ["staff"]},
             "retrievals": [{"retriever": "vector", "passages": [{**passage, "score": 0.9}]}], "context": [passage],
             "answer": {"text": "I could not find this.", "abstained": True, "citations": []}}
    if conversation:
        event["conversation_id"] = conversation
    return event


def refused(caller: str, now: float) -> bytes:
    """A trace ragmon refuses (no query), naming ``caller``: a dead letter."""
    return json.dumps({"type": "trace", "trace_id": f"bad-{caller}", "time": now, "tenant": "acme",
                       "index": {"name": "policies"}, "caller": {"id": caller}}).encode()


def test_a_person_is_erased_from_every_store_and_nobody_else(tmp_path, database_url, caplog):
    now = time.time()
    batches, dataset = tmp_path / "batches", tmp_path / "regression" / "cases.jsonl"
    env = {"RAGMON_DATABASE__URL": database_url, "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_REDACTION__CALLER_KEY": "erasure-test-key-0123456789",
           "RAGMON_DEAD_LETTER__KEEP_RAW": "true",
           "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": base64.b64encode(b"k" * 32).decode(),
           "RAGMON_SAMPLING__RATES__RANDOM": "1.0", "RAGMON_SAMPLING__WEEKLY_CAP": "1000",
           "RAGMON_SCHEDULER__BATCH_DIR": str(batches), "RAGMON_REGRESSION__CASES": str(dataset)}
    traces = [trace("a1", ALICE, now, "conv-alice"), trace("a2", ALICE, now, "conv-alice"), trace("a3", ALICE, now),
              trace("b1", BOB, now), trace("b2", BOB, now), trace("c1", CAROL, now, CONVERSATION),
              trace("c2", CAROL, now)]
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    records = [RawRecord("file", msgspec.json.encode(t), privilege=Privilege.TRUSTED) for t in traces]
    records += [RawRecord("file", refused(ALICE, now)), RawRecord("file", refused(BOB, now))]
    runtime.pipeline.process(records)
    runtime.close()

    engine = make_engine(database_url)
    samples, findings = SampleStore(engine), FindingsStore(engine)
    week = samples.find()[0].week
    assert sorted(s.trace_id for s in samples.find()) == ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.output

    cli("samples", "pull", "--week", week, "--out", str(batches / week))
    filled = tmp_path / "filled.jsonl"
    filled.write_text("".join(json.dumps({**json.loads(line), "expected": "abstain"}) + "\n"
                              for line in (batches / week / "cases.jsonl").read_text().splitlines()))
    cli("labels", "import", str(filled))

    def turns() -> list[str]:
        with engine.connect() as connection:
            return sorted(connection.execute(select(ConversationTurn.trace_id)).scalars())

    def state() -> dict:
        letters = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
        batch = batches / week
        return {
            "samples": sorted(s.trace_id for s in samples.find()),
            "findings": sorted({f.trace_id for f in findings.find(FindingQuery(limit=1000))}),
            "regression": [json.loads(line)["id"] for line in dataset.read_text().splitlines()],
            "batch cases": [json.loads(line)["id"] for line in (batch / "cases.jsonl").read_text().splitlines()],
            "batch tasks": sorted(t["data"]["case_id"] for t in json.loads((batch / "tasks.json").read_text())),
            "letters": len(letters),
            "letters naming alice": sum(ALICE in letter["text"] for letter in letters),
            "turns": turns(),
        }

    before = state()
    assert before["findings"] == before["samples"] == ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]
    assert (before["letters"], before["letters naming alice"]) == (2, 1)
    assert before["turns"] == ["a1", "a2", "c1"]  # the turns of the traces with a conversation

    dry = json.loads(cli("erase", "--caller", ALICE, "--dry-run", "-o", "json"))
    assert dry == {"dry_run": True, "samples": 3, "conversation_turns": 2, "findings": 3, "regression_cases": 3,
                   "batch_cases": 3, "dead_letters": 1, "dead_letter_topic_untouched": False}
    assert state() == before

    with caplog.at_level(logging.INFO):
        printed = cli("erase", "--caller", ALICE)
    assert "deleted 3 samples" in printed and "deleted 1 dead letters" in printed
    assert ALICE not in printed and ALICE not in caplog.text
    others = ["b1", "b2", "c1", "c2"]
    assert state() == {"samples": others, "findings": others, "regression": others, "batch cases": others,
                       "batch tasks": others, "letters": 1, "letters naming alice": 0, "turns": ["c1"]}

    # by conversation: carol's other trace stays
    erased = json.loads(cli("erase", "--conversation", CONVERSATION, "-o", "json"))
    assert (erased["samples"], erased["conversation_turns"]) == (1, 1)
    assert state()["turns"] == []
    assert state()["samples"] == state()["regression"] == ["b1", "b2", "c2"]
    # erased twice: nothing left to erase
    assert json.loads(cli("erase", "--caller", ALICE, "-o", "json"))["samples"] == 0


def test_a_letter_whose_text_was_left_out_is_found_by_its_encrypted_bytes(tmp_path):
    """Beyond `dead_letter.texts_per_second` a letter keeps no text; with `keep_raw` its raw bytes,
    decrypted with the configured key, still name the person."""
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_REDACTION__CALLER_KEY": "erasure-test-key-0123456789", "RAGMON_DEAD_LETTER__KEEP_RAW": "true",
           "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": base64.b64encode(b"k" * 32).decode()}
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    runtime.pipeline.process([RawRecord("file", refused(ALICE, time.time())), RawRecord("file", refused(BOB, 0))])
    runtime.close()
    path = Path(env["RAGMON_DEAD_LETTER__PATH"])
    letters = [json.loads(line) for line in path.read_text().splitlines()]
    for letter in letters:  # as a letter beyond the text rate is written
        letter.pop("text")
        letter["text_omitted"] = True
    path.write_text("".join(json.dumps(letter) + "\n" for letter in letters))
    result = CliRunner().invoke(main, ["erase", "--caller", ALICE, "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["dead_letters"] == 1
    [left] = [json.loads(line) for line in path.read_text().splitlines()]
    assert left["raw_hmac"] == letters[1]["raw_hmac"]


def test_erase_needs_someone_to_erase(tmp_path):
    result = CliRunner().invoke(main, ["erase"], env={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'x.db'}"})
    assert result.exit_code == 2 and "--caller, --conversation or both" in result.output
