"""JSONL source and dead-letter file; the JSONL source also runs the Source contract."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag

from ragmon.collectors.files import JsonlDeadLetterSink, JsonlSource, SourceStopped, read_dead_letters
from ragmon.collectors.letter_body import LetterBody, decrypt_raw
from ragmon.monitor.core.errors import Reason, Retryable
from ragmon.monitor.core.pipeline import BatchResult, Processor
from ragmon.monitor.core.records import DeadLetter, Privilege, RawRecord
from ragmon.monitor.core.retry import RetryPolicy
from tests.collectors.contract import (  # noqa: F401  (the contract tests run here)
    SourceHarness,
    test_a_refused_batch_is_retried_and_nothing_is_lost,
    test_invalid_input_is_dead_lettered_then_acknowledged,
    test_nothing_is_acknowledged_while_processing_is_refused,
    test_records_are_acknowledged_only_after_process_returned,
)


class JsonlHarness(SourceHarness):
    def __init__(self) -> None:
        self.committed = 0

    def run(self, payloads: Sequence[bytes], process: Processor) -> None:
        stream = io.BytesIO(b"".join(p + b"\n" for p in payloads))
        source = JsonlSource(
            stream, process, batch_size=self.batch_size, retry=RetryPolicy(attempts=4),
            on_commit=self._commit, sleep=lambda _: None,
        )
        source.start()
        assert source.wait(timeout=10)
        assert source.shutdown(timeout=1)
        assert source.error is None or isinstance(source.error, SourceStopped)

    def _commit(self, line: int, _read: int) -> None:
        self.committed = line

    def acknowledged(self) -> int:
        return self.committed


@pytest.fixture
def source_harness() -> SourceHarness:
    return JsonlHarness()


def collect(stream: bytes, **options) -> tuple[list[RawRecord], list[int]]:
    batches: list[RawRecord] = []
    commits: list[int] = []

    def process(batch):
        batches.extend(batch)
        return BatchResult(accepted=len(batch))

    JsonlSource(io.BytesIO(stream), process, path="in.jsonl", on_commit=lambda line, _: commits.append(line),
                **options).run()
    return batches, commits


def test_lines_become_records_with_their_line_numbers_and_blank_lines_are_skipped():
    records, commits = collect(b'{"a":1}\r\n\n  \n{"b":2}\n{"c":3}', batch_size=2)
    assert [r.data for r in records] == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert [r.origin for r in records] == [{"path": "in.jsonl", "line": n} for n in (1, 4, 5)]
    assert commits == [4, 5]


def test_an_over_long_line_keeps_only_its_head_and_its_real_size():
    big = b'{"q":"' + b"x" * 5000 + b'"}'
    records, _ = collect(big + b"\n" + b'{"ok":1}\n', max_record_bytes=1000, keep_bytes=100)
    assert len(records[0].data) == 100 and records[0].size == len(big) + 1
    assert records[1].data == b'{"ok":1}' and records[1].size is None


def test_a_source_gives_up_after_its_retries_and_says_where_to_resume():
    def refuse(batch):
        raise Retryable("db down")

    source = JsonlSource(io.BytesIO(b"{}\n{}\n"), refuse, retry=RetryPolicy(attempts=3), sleep=lambda _: None)
    with pytest.raises(SourceStopped) as caught:
        source.run()
    assert caught.value.position == 0 and "db down" in str(caught.value)


KEY, RAW_KEY = b"dead-letter-hash-key", bytes(range(32))


def test_dead_letter_file_keeps_reason_detail_origin_and_raw_bytes(tmp_path: Path):
    body = LetterBody(hash_key=KEY, redact=lambda text: text.replace("not", "[X]"), raw_key=RAW_KEY, max_bytes=8,
                      max_text_bytes=8)
    sink = JsonlDeadLetterSink(tmp_path / "dlq" / "dead.jsonl", max_raw_bytes=8, clock=lambda: 1_796_000_000.0,
                               body=body)
    sink.write([DeadLetter(RawRecord("file", b"\xffnot json at all", {"path": "x", "line": 3},
                                     privilege=Privilege.TRUSTED),
                           Reason.MALFORMED_JSON, "bad")])
    sink.write([DeadLetter(RawRecord("file", b"head", {"line": 9}, size=10_000), Reason.TOO_LARGE, "big")])
    sink.shutdown()
    first, second = read_dead_letters(tmp_path / "dlq" / "dead.jsonl")
    assert first["reason"] == "malformed_json" and first["origin"] == {"path": "x", "line": 3}
    assert first["text"] == "\ufffd[X] jso"  # the kept bytes, decoded, through the redactor
    assert first["raw_hmac"] == hmac.new(KEY, b"\xffnot json at all", hashlib.sha256).hexdigest()  # of all bytes
    assert first["privilege"] == "trusted"  # a file replayed by the operator
    assert decrypt_raw(RAW_KEY, first["raw_encrypted"], Privilege.TRUSTED) == (b"\xffnot jso", Privilege.TRUSTED)
    assert "\xffnot" not in base64.b64decode(first["raw_encrypted"]).decode("latin-1")
    with pytest.raises(InvalidTag):
        decrypt_raw(bytes(32), first["raw_encrypted"], Privilege.TRUSTED)
    assert first["truncated"] is True and first["size"] == 16
    assert first["time"] == "2026-11-30T00:53:20.000+00:00"
    assert second["size"] == 10_000 and second["truncated"] is True


def test_under_a_flood_only_so_many_letters_a_second_get_a_redacted_text():
    clock = [0.0]
    body = LetterBody(hash_key=KEY, redact=str.upper, texts_per_second=2, clock=lambda: clock[0])
    first = [body.fields(f"junk {i}".encode(), Privilege.INGEST) for i in range(25)]
    assert [f.get("text") for f in first[:20]] == [f"JUNK {i}" for i in range(20)]  # a burst of ten seconds' worth
    assert all(f.get("text_omitted") is True and "text" not in f and f["raw_hmac"] for f in first[20:])
    clock[0] = 1.0  # a second later: two more
    assert [("text" in body.fields(b"later", Privilege.INGEST)) for _ in range(3)] == [True, True, False]


def test_without_a_body_policy_a_letter_keeps_no_bytes_at_all(tmp_path: Path):
    sink = JsonlDeadLetterSink(tmp_path / "dead.jsonl", max_raw_bytes=100)
    sink.write([DeadLetter(RawRecord("http", b'{"query": "mail bob@example.com"}', {}), Reason.MISSING_FIELD, "x")])
    sink.shutdown()
    [letter] = read_dead_letters(tmp_path / "dead.jsonl")
    assert letter["raw_sha256"] == hashlib.sha256(b'{"query": "mail bob@example.com"}').hexdigest()
    assert "bob" not in (tmp_path / "dead.jsonl").read_text()


def test_the_dead_letter_file_rotates_and_counts_what_the_oldest_file_took_away(tmp_path: Path):
    dropped: list[int] = []
    path = tmp_path / "dead.jsonl"
    sink = JsonlDeadLetterSink(path, max_raw_bytes=100, max_file_bytes=2000, keep_files=2, on_dropped=dropped.append,
                               body=LetterBody(redact=str, max_bytes=100))
    for batch in range(12):  # about 350 bytes a letter, two letters a batch: a file holds two or three batches
        sink.write([DeadLetter(RawRecord("http", b"x" * 100, {"item": batch * 2 + i}), Reason.MALFORMED_JSON, "bad")
                    for i in range(2)])
    sink.shutdown()
    # and the lock a rewriting process (retention, erasure) takes with the writer
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dead.jsonl.lock", "dead.jsonl", "dead.jsonl.1",
                                                         "dead.jsonl.2"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    kept = [letter["origin"]["item"] for letter in read_dead_letters(path)]
    assert kept == list(range(24 - len(kept), 24))  # the newest, oldest first, none twice
    assert sum(dropped) == 24 - len(kept) > 0  # what was deleted is counted, letter by letter
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in tmp_path.iterdir())


def test_a_full_disk_raises_retryable(tmp_path: Path):
    sink = JsonlDeadLetterSink(Path("/dev/full"), max_raw_bytes=100)
    with pytest.raises(Retryable, match="/dev/full"):
        sink.write([DeadLetter(RawRecord("file", b"x", {}, privilege=Privilege.TRUSTED), Reason.MALFORMED_JSON, "bad")])


FILL_UNTIL_FULL = """
import resource, signal, sys
from pathlib import Path
from ragmon.collectors.files import JsonlDeadLetterSink
from ragmon.monitor.core.errors import Reason, Retryable
from ragmon.monitor.core.records import DeadLetter, Privilege, RawRecord
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a short write instead of death
resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500))
sink = JsonlDeadLetterSink(Path(sys.argv[1]), max_raw_bytes=1000)
for i in range(100):
    try:
        letter = DeadLetter(RawRecord("file", b"y" * (37 * i % 200), {"line": i}), Reason.MALFORMED_JSON, "bad")
        sink.write([letter, letter])
    except Retryable:
        print(i)
        break
"""


def test_a_write_cut_short_leaves_no_partial_batch(tmp_path: Path):
    import subprocess
    import sys

    path = tmp_path / "dead.jsonl"
    done = subprocess.run([sys.executable, "-c", FILL_UNTIL_FULL, str(path)], capture_output=True, text=True,
                          check=True)
    stored = int(done.stdout)
    assert 0 < stored < 100, "the size limit should have been hit"
    assert path.read_bytes().endswith(b"\n")
    # whole batches only: each batch of two letters is all there, or not at all
    assert [r["origin"]["line"] for r in read_dead_letters(path)] == [i for i in range(stored) for _ in (0, 1)]


def test_an_unwritable_directory_raises_retryable(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    sink = JsonlDeadLetterSink(blocker / "dead.jsonl", max_raw_bytes=100)
    with pytest.raises(Retryable):
        sink.write([DeadLetter(RawRecord("file", b"x", {}, privilege=Privilege.TRUSTED), Reason.MALFORMED_JSON, "bad")])
