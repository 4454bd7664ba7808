"""Event times: the forms docs/events.md names, read alike by the decoder and the OTLP span reader,
with expected values from outside ragmon: the times git itself prints, and Python's datetime."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import InvalidInput, Reason
from ragmon.monitor.core.times import BadTime, TimeReader

NOW = 1_796_000_000.0  # 2026-11-30T00:53:20Z


def git_commit_time(repo: Path, when: str, zone: str) -> tuple[str, int]:
    """Commit in ``repo`` at ``when`` (git's own date syntax) in ``zone``; return git's ``%ci`` for the
    commit and its ``%ct`` (Unix seconds, git's own arithmetic)."""
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "TZ": zone,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=env)
    shown = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%ci%n%ct"], check=True, env=env,
                           capture_output=True, text=True).stdout.split("\n")
    return shown[0], int(shown[1])


@pytest.mark.parametrize(("when", "zone"), [("2026-12-01T10:00:00", "Europe/Berlin"),
                                            ("2026-07-01T23:30:00", "America/New_York"),
                                            ("2026-03-29T01:59:59", "UTC")])
def test_git_ci_times_read_as_git_counts_them(tmp_path, when, zone):
    ci, ct = git_commit_time(tmp_path / "repo", when, zone)
    assert " +" in ci or " -" in ci  # git's form, a space before the offset
    assert TimeReader().seconds(ci) == ct


def test_iso_with_an_offset_in_every_spelling_rfc_3339_allows():
    expected = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC).timestamp()
    for text in ("2026-12-01T09:00:00Z", "2026-12-01t09:00:00z", "2026-12-01T10:00:00+01:00",
                 "2026-12-01 10:00:00+01:00", "2026-12-01T10:00:00+0100", "2026-12-01T04:00:00-05:00"):
        assert TimeReader().seconds(text) == expected, text
    fraction = TimeReader().seconds("2026-12-01T09:00:00.250Z")
    assert fraction == expected + 0.25


def test_times_without_an_offset_are_refused_unless_a_zone_is_configured():
    with pytest.raises(BadTime, match="events.time_zone"):
        TimeReader().seconds("2026-12-01T10:00:00")
    with pytest.raises(BadTime, match="events.time_zone"):
        TimeReader().seconds("2026-12-01")
    berlin = TimeReader("Europe/Berlin")
    expected = datetime(2026, 12, 1, 10, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
    assert berlin.seconds("2026-12-01T10:00:00") == expected
    # a date alone is its 00:00 in the zone; summer time is the zone's, not a fixed offset
    assert berlin.seconds("2026-07-01") == datetime(2026, 7, 1, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
    assert berlin.seconds("2026-07-01") == datetime(2026, 6, 30, 22, tzinfo=UTC).timestamp()
    # a time with its own offset keeps it whatever the zone
    assert berlin.seconds("2026-07-01T00:00:00Z") == datetime(2026, 7, 1, tzinfo=UTC).timestamp()


def test_numbers_are_seconds_below_1e11_and_milliseconds_from_there():
    reader = TimeReader()
    seconds = datetime(2026, 12, 1, 9, tzinfo=UTC).timestamp()
    assert reader.seconds(int(seconds)) == seconds
    assert reader.seconds(seconds + 0.5) == seconds + 0.5
    assert reader.seconds(int(seconds * 1000) + 250) == seconds + 0.25  # what Date.now() gives
    assert reader.seconds(99_999_999_999) == 99_999_999_999  # the year 5138, in seconds
    assert reader.seconds(100_000_000_000) == 100_000_000  # 1973-03-03, in milliseconds
    for too_large in (1e14, 10**30, float("inf")):
        with pytest.raises(BadTime, match="milliseconds"):
            reader.seconds(too_large)


@pytest.mark.parametrize("text", ["soon", "", "1 Dec 2026", "2026-12-01T25:00:00Z", "12/01/2026"])
def test_other_strings_are_refused_naming_the_accepted_forms_never_the_value(text):
    with pytest.raises(BadTime) as refused:
        TimeReader("UTC").seconds(text)
    message = str(refused.value)
    assert "%ci" in message and "milliseconds" in message and "offset" in message
    assert not text or text not in message


def test_the_decoder_reads_every_event_time_with_the_one_reader():
    berlin = ZoneInfo("Europe/Berlin")
    decoder = Decoder(Limits(), clock=lambda: NOW, times=TimeReader("Europe/Berlin"))
    document = decoder.decode(json.dumps({"type": "document", "doc_id": "d", "version": "1",
                                          "modified_at": "2026-11-20 10:00:00 +0100"}).encode())
    assert document.modified_at == datetime(2026, 11, 20, 9, tzinfo=UTC).timestamp()
    index = decoder.decode(json.dumps({"type": "index", "index": "i", "doc_id": "d", "version": "1",
                                       "indexed_at": 1_795_000_000_123}).encode())
    assert index.indexed_at == 1_795_000_000.123
    trace = decoder.decode(json.dumps({
        "type": "trace", "trace_id": "t", "time": "2026-11-29T10:00:00", "query": "", "index": {"name": "i"},
        "retrievals": [{"retriever": "r", "passages": [{"id": "p", "indexed_at": "2026-11-21",
                                                        "source_modified_at": 1_795_000_000_000}]}]}).encode())
    assert trace.time == datetime(2026, 11, 29, 10, tzinfo=berlin).timestamp()
    passage = trace.retrievals[0].passages[0]
    assert passage.indexed_at == datetime(2026, 11, 21, tzinfo=berlin).timestamp()
    assert passage.source_modified_at == 1_795_000_000.0


def test_a_refused_time_names_its_field_and_the_setting():
    decoder = Decoder(Limits(), clock=lambda: NOW)
    with pytest.raises(InvalidInput) as refused:
        decoder.decode(json.dumps({"type": "document", "doc_id": "d", "version": "1",
                                   "modified_at": "2026-11-20 10:00:00"}).encode())
    assert refused.value.reason is Reason.BAD_TIMESTAMP
    assert refused.value.detail.startswith("`$.modified_at` has no UTC offset")
    assert "events.time_zone" in refused.value.detail
