"""The ragmon CLI through click's runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragmon.collectors.files import read_dead_letters
from ragmon.monitor.app.cli import EXAMPLE_EVENTS, main
from ragmon.monitor.app.simulate import CORRUPTIONS


def clean_env(**env) -> dict:
    """The runner's environment: the outer RAGMON_ variables removed, then ``env``."""
    return {**{k: None for k in os.environ if k.startswith("RAGMON_")}, **env}


def run(args, tmp_path: Path, input=None):
    environ = clean_env(RAGMON_DEAD_LETTER__PATH=str(tmp_path / "dead.jsonl"),
                        RAGMON_DATABASE__URL=f"sqlite:///{tmp_path / 'ragmon.db'}")
    return CliRunner().invoke(main, args, env=environ, input=input, catch_exceptions=False)


def test_replay_of_the_bundled_example_counts_every_record(tmp_path):
    summary_file = tmp_path / "summary.json"
    result = run(["replay", str(EXAMPLE_EVENTS), "--json", str(summary_file)], tmp_path)
    assert result.exit_code == 0, result.output
    lines = EXAMPLE_EVENTS.read_bytes().count(b"\n")
    summary = json.loads(summary_file.read_text())
    assert summary["records"] == lines
    assert set(summary["accepted"]) == {"trace", "feedback", "document", "index"}
    assert set(summary["rejected"]) == set(CORRUPTIONS.values())  # the example breaks records every way
    assert "replay summary" in result.output and "records/s" in result.output
    letters = read_dead_letters(tmp_path / "dead.jsonl")
    assert len(letters) == sum(summary["rejected"].values())
    assert all(letter["origin"]["line"] >= 1 for letter in letters)


def test_replay_from_stdin(tmp_path):
    data = b'{"type":"feedback","trace_id":"t","kind":"copy"}\n{"type":"nope"}\n'
    summary_file = tmp_path / "s.json"
    result = run(["replay", "-", "--json", str(summary_file)], tmp_path, input=data)
    assert result.exit_code == 0, result.output
    summary = json.loads(summary_file.read_text())
    assert summary["accepted"] == {"feedback": 1} and summary["rejected"] == {"unknown_type": 1}


def test_replay_stops_with_an_error_when_the_dead_letter_file_cannot_be_written(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    result = CliRunner().invoke(
        main, ["replay", "-", "--retries", "2"], input=b"not json\n",
        env=clean_env(RAGMON_DEAD_LETTER__PATH=str(blocker / "dead.jsonl"),
                      RAGMON_DATABASE__URL=f"sqlite:///{tmp_path / 'ragmon.db'}"),
    )
    assert result.exit_code == 1
    assert "gave up after retries" in result.output


def test_config_check_prints_masked_config(tmp_path):
    config = tmp_path / "ragmon.yaml"
    config.write_text("database:\n  url: postgresql+psycopg://ragmon:hunter2@db/ragmon\n")
    result = CliRunner().invoke(main, ["--config", str(config), "config", "check", "--json"],
                                env=clean_env(RAGMON_DEAD_LETTER__PATH=str(tmp_path / "dead.jsonl")))
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output
    shown = json.loads(result.output[: result.output.rindex("}") + 1])
    assert shown["database"]["url"] == "postgresql+psycopg://ragmon:****@db/ragmon"
    assert shown["dead_letter"]["path"] == str(tmp_path / "dead.jsonl")  # environment wins


def test_config_check_names_the_bad_key(tmp_path):
    config = tmp_path / "ragmon.yaml"
    config.write_text("limits:\n  max_event_bites: 5\n")
    result = run(["--config", str(config), "config", "check"], tmp_path)
    assert result.exit_code == 2
    assert "limits.max_event_bites: unknown key" in result.output


@pytest.mark.parametrize("command", ["serve", "scheduler"])
@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
def test_a_non_loopback_address_without_a_token_is_refused_before_anything_opens(tmp_path, command, host):
    result = run([command, "--host", host], tmp_path)
    assert result.exit_code == 2
    assert "http.token" in result.output and "allow_unauthenticated" in result.output
    assert "serving" not in result.output and "scheduler on" not in result.output
    assert not (tmp_path / "ragmon.db").exists()  # refused before the store was opened


@pytest.mark.parametrize("command", ["serve", "scheduler"])
def test_a_database_out_of_reach_is_waited_for_then_named_without_a_traceback(tmp_path, command):
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
               "RAGMON_DATABASE__URL": "postgresql+psycopg://ragmon@127.0.0.1:9/ragmon",  # the discard port
               "RAGMON_DATABASE__SCHEMA_WAIT_SECONDS": "3", "RAGMON_REDACTION__CALLER_KEY": "k" * 32}
    done = subprocess.run([sys.executable, "-m", "ragmon", command, "--port", "9"], env=environ, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "WARNING ragmon.monitor.storage.store: waiting for the database: database unavailable" in done.stderr
    assert done.stderr.rstrip().endswith("error: database unavailable: OperationalError")
    assert "Traceback" not in done.stderr
