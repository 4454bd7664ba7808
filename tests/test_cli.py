"""The ragmon CLI through click's runner."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragmon.collectors.files import read_dead_letters
from ragmon.monitor.app.cli import EXAMPLE_EVENTS, main
from ragmon.monitor.app.simulate import CORRUPTIONS
from tests.services.harness import free_port


def clean_env(**env) -> dict:
    """The runner's environment: the outer RAGMON_ variables removed, then ``env``."""
    return {**{k: None for k in os.environ if k.startswith("RAGMON_")}, **env}


def run(args, tmp_path: Path, input=None):
    environ = clean_env(RAGMON_DEAD_LETTER__PATH=str(tmp_path / "dead.jsonl"),
                        RAGMON_DATABASE__URL=f"sqlite:///{tmp_path / 'ragmon.db'}")
    return CliRunner().invoke(main, args, env=environ, input=input, catch_exceptions=False)


def test_replay_of_the_bundled_example_counts_every_record(tmp_path):
    summary_file = tmp_path / "summary.json"
    result = run(["replay", str(EXAMPLE_EVENTS), "--json-file", str(summary_file)], tmp_path)
    assert result.exit_code == 1, result.output  # the example breaks records on purpose
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
    result = run(["replay", "-", "--json-file", str(summary_file), "--allow-rejects"], tmp_path, input=data)
    assert result.exit_code == 0, result.output
    summary = json.loads(summary_file.read_text())
    assert summary["accepted"] == {"feedback": 1} and summary["rejected"] == {"unknown_type": 1}
    printed = run(["replay", "-", "-o", "json"], tmp_path, input=data)
    assert printed.exit_code == 1 and json.loads(printed.stdout)["rejected"] == {"unknown_type": 1}


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
    result = CliRunner().invoke(main, ["--config", str(config), "config", "check", "-o", "json"],
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
    done = subprocess.run([sys.executable, "-m", "ragmon", command, "--port", str(free_port())], env=environ,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "WARNING ragmon.monitor.storage.store: waiting for the database: database unavailable" in done.stderr
    assert done.stderr.rstrip().endswith("error: database unavailable: OperationalError")
    assert "Traceback" not in done.stderr


def test_user_errors_are_one_line_and_a_usage_status_never_a_traceback(tmp_path):
    """A file that is not there, a directory for a file, a directory that is not there: status 2,
    the path and the reason, nothing created (every command, in a fresh process)."""
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}}
    cases = [(["replay", "/nonexistent.jsonl"], "does not exist"),
             (["replay", str(tmp_path)], "is a directory"),
             (["events", "check", "/nonexistent.jsonl"], "does not exist"),
             (["rules", "render", "--out", "/nonexistent/dir/x.yml"],
              "/nonexistent/dir/x.yml: No such file or directory"),
             (["samples", "list"], "no ragmon database at ragmon-data/ragmon.db"),
             (["findings", "list"], "no ragmon database at"),
             (["replay", "--bogus", "x"], "No such option")]
    for args, says in cases:
        done = subprocess.run([sys.executable, "-m", "ragmon", *args], env=environ, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert says in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    assert list(tmp_path.iterdir()) == []  # no data directory made on the way


def test_dash_h_is_help_everywhere(tmp_path):
    for args in (["-h"], ["samples", "-h"], ["findings", "list", "-h"], ["events", "check", "-h"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and result.output.startswith("Usage:"), (args, result.output)


@pytest.mark.parametrize("command", ["serve", "scheduler"])
def test_a_port_in_use_has_its_own_status_and_no_banner(tmp_path, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environ = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}}
        done = subprocess.run([sys.executable, "-m", "ragmon", command, "--port", str(port)], env=environ,
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert list(tmp_path.iterdir()) == []  # refused before the store was opened


def test_events_check_validates_without_storing_and_fails_on_a_rejection(tmp_path):
    good = b'{"type":"feedback","trace_id":"t","kind":"copy"}\n'
    bad = good + b'{"type":"trace","trace_id":"x"}\n{"type":"nope"}\n'
    environ = clean_env(RAGMON_DATABASE__URL=f"sqlite:///{tmp_path / 'ragmon.db'}")
    ok = CliRunner().invoke(main, ["events", "check", "-"], input=good, env=environ)
    assert ok.exit_code == 0 and "1 events would be taken (1 feedback), 0 rejected" in ok.stdout
    checked = CliRunner().invoke(main, ["events", "check", "-", "-o", "json"], input=bad, env=environ)
    assert checked.exit_code == 1
    report = json.loads(checked.stdout)
    assert report["accepted"] == {"feedback": 1} and report["rejected"] == {"missing_field": 1, "unknown_type": 1}
    assert [r["line"] for r in report["rejections"]] == [2, 3]
    assert not (tmp_path / "ragmon.db").exists()


def test_json_logs_have_utc_iso_times_and_the_banner_is_a_log_record(tmp_path):
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
               "RAGMON_LOG__FORMAT": "json", "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    process = subprocess.Popen([sys.executable, "-m", "ragmon", "serve", "--port", str(free_port())], env=environ,
                               cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stderr:
            lines.append(json.loads(line))  # every line is JSON: no banner outside the log
            if "serving on" in lines[-1]["message"]:
                break
    finally:
        process.terminate()
        process.wait(30)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"]) for line in lines)


def test_samples_list_says_how_many_of_how_many(tmp_path):
    from ragmon.monitor.labeling.sample_store import NewSample, SampleStore
    from ragmon.monitor.storage.store import make_engine, upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    SampleStore(engine).upsert([NewSample(f"t{i}", "acme", "2026-W48", {"random"}, "dev", f"f{i}", 0.0, {})
                                for i in range(20)])
    listed = run(["samples", "list", "--limit", "5"], tmp_path)
    assert listed.exit_code == 0 and "5 of 20 samples" in listed.stdout
