"""Files for embedded mode: a JSONL source (file or stdin) and a JSONL dead-letter sink."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import msgspec

from ragmon.collectors.background import BackgroundSource
from ragmon.collectors.letter_body import LetterBody
from ragmon.collectors.letters import StoredLetter, dead_letter_files
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.core.records import DeadLetter, Privilege, RawRecord
from ragmon.monitor.core.retry import GaveUp, RetryPolicy, until_accepted

log = logging.getLogger(__name__)
UNTIL_STOPPED = RetryPolicy()  # retry a refused batch until the source is stopped
_APPEND_AND_READ = os.O_RDWR | os.O_APPEND | os.O_CREAT  # read: to see whether the file ends a line


class SourceStopped(Exception):
    """A source gave up on a batch after its retries; ``position`` is where to resume."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class JsonlSource(BackgroundSource):
    """Reads one record per line from a binary stream and feeds batches to ``process``.

    Acknowledgement is ``on_commit(line, bytes_read)``, called after ``process`` returned for a
    batch whose last line is ``line``; ``committed_line`` holds the same. Blank lines are skipped.
    A line longer than ``max_record_bytes`` is not held in memory: its head is kept and its real
    size travels with it, so the pipeline dead-letters it as too large.
    """

    def __init__(
        self,
        stream: BinaryIO,
        process: Processor,
        *,
        path: str = "-",
        source: str = "file",
        batch_size: int = 500,
        max_record_bytes: int = 1024 * 1024,
        keep_bytes: int = 65536,
        retry: RetryPolicy = UNTIL_STOPPED,
        on_commit: Callable[[int, int], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self._stream = stream
        self._process = process
        self._path = path
        self._source = source
        self._batch_size = batch_size
        self._max_record_bytes = max_record_bytes
        self._keep_bytes = min(keep_bytes, max_record_bytes + 1)
        self._retry = retry
        self._on_commit = on_commit
        self._sleep = sleep
        self._bytes_read = 0
        self.committed_line = 0
        self.thread_name = f"jsonl-source:{path}"

    def run(self) -> None:
        """Read to the end of the stream (or until shut down). Raises :class:`SourceStopped`."""
        batch: list[RawRecord] = []
        line_no = 0
        while not self._stop.is_set():
            record = self._next_record(line_no)
            if record is None:
                break
            line_no = record.origin["line"]
            if record.data.strip():
                batch.append(record)
            if len(batch) >= self._batch_size:
                self._deliver(batch, line_no)
                batch = []
        if batch or line_no > self.committed_line:
            self._deliver(batch, line_no)

    def _next_record(self, previous_line: int) -> RawRecord | None:
        line = self._stream.readline(self._max_record_bytes + 1)
        if not line:
            return None
        self._bytes_read += len(line)
        number = previous_line + 1
        origin = {"path": self._path, "line": number}
        if len(line) <= self._max_record_bytes or line.endswith(b"\n"):
            return RawRecord(self._source, line.rstrip(b"\r\n"), origin, privilege=Privilege.TRUSTED)
        # An over-long line: keep its head, skip the rest without holding it.
        size = len(line)
        head = line[: self._keep_bytes]
        while not line.endswith(b"\n"):
            line = self._stream.readline(self._max_record_bytes + 1)
            if not line:
                break
            size += len(line)
            self._bytes_read += len(line)
        return RawRecord(self._source, head, origin, size=size, privilege=Privilege.TRUSTED)

    def _deliver(self, batch: list[RawRecord], last_line: int) -> None:
        def wait(delay: float) -> bool:
            if self._stop.is_set():
                return False
            self._sleep(delay)
            return True

        try:
            if batch:
                until_accepted(lambda: self._process(batch), self._retry, wait,
                               lambda error, delay: log.warning("batch refused (%s); retrying in %.1f s", error, delay))
        except GaveUp as gave_up:
            raise SourceStopped(
                f"{self._path}: gave up after retries ({gave_up.last}); lines up to "
                f"{self.committed_line} are processed",
                self.committed_line,
            ) from gave_up.last
        self.committed_line = last_line
        if self._on_commit is not None:
            self._on_commit(last_line, self._bytes_read)


class JsonlDeadLetterSink:
    """Appends each rejected record as one JSON line (:class:`StoredLetter`): time, source, reason,
    detail, origin, size, the sender's privilege, and what ``body`` keeps of the bytes
    (:class:`LetterBody`: a keyed hash, the redacted text, the raw bytes encrypted; at most
    ``max_raw_bytes`` of them, ``truncated`` says if cut).
    Without ``body``, a plain hash alone.

    A batch's letters are appended in one write and synced before ``write`` returns. A failure
    (disk full, directory gone) leaves no partial batch behind: the file is cut back to where the
    batch started and :class:`Retryable` is raised, so the source pauses and retries instead of
    losing anything, and a retried batch is not written twice. A file that does not end a line (a
    process killed mid-write) gets its line ended before the next batch.

    The file is bounded: once a batch would take it past ``max_file_bytes`` it is rotated
    (``dead-letters.jsonl`` becomes ``.1``, ``.1`` becomes ``.2`` ...); of ``keep_files`` rotated
    files the oldest is deleted, and its letters are reported to ``on_dropped`` (a metric), so a
    flood of junk costs bounded disk and says how much it cost.
    """

    def __init__(self, path: Path, max_raw_bytes: int, clock: Callable[[], float] = time.time, *,
                 max_file_bytes: int = 64 * 1024 * 1024, keep_files: int = 4,
                 on_dropped: Callable[[int], None] | None = None, body: LetterBody | None = None) -> None:
        self.path = path
        self._body = body or LetterBody(max_bytes=max_raw_bytes)
        self._max_raw_bytes = max_raw_bytes
        self._clock = clock
        self._max_file_bytes = max_file_bytes
        self._keep_files = keep_files
        self._on_dropped = on_dropped or (lambda n: None)
        self._encoder = msgspec.json.Encoder()
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._lock_fd: int | None = None

    def files(self) -> list[Path]:
        """The dead-letter files, newest first: the current one, then the rotated ones."""
        return dead_letter_files(self.path)

    def write(self, letters: Sequence[DeadLetter]) -> None:
        stamp = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds")
        data = b"".join(self._line(letter, stamp) for letter in letters)
        with self._exclusive():
            self._append(data)

    @contextlib.contextmanager
    def _exclusive(self):
        """The file to this thread alone, and to this process alone: another process (``ragmon
        erase``, a scheduler's retention) rewrites it under the same ``flock``, and once it has
        swapped a rewritten file in, the descriptor held here is reopened on it, so no letter is
        appended to a file that is no longer there."""
        with self._lock:
            if self._lock_fd is None:
                lock = self.path.with_name(f".{self.path.name}.lock")
                try:
                    self._lock_fd = open_private(lock, os.O_RDWR | os.O_CREAT)
                except OSError as error:
                    raise Retryable(f"dead-letter file {self.path}: {error.strerror}") from error
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                if self._fd is not None and _replaced(self.path, self._fd):
                    os.close(self._fd)
                    self._fd = None
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _line(self, letter: DeadLetter, stamp: str) -> bytes:
        record = letter.record
        size = len(record.data) if record.size is None else record.size
        return self._encoder.encode(StoredLetter(
            time=stamp, source=record.source, reason=letter.reason.value, detail=letter.detail,
            origin=record.origin, size=size, truncated=min(len(record.data), self._max_raw_bytes) < size,
            privilege=record.privilege.value, **self._body.fields(record.data, record.privilege),
        )) + b"\n"

    def prune(self, before: float) -> int:
        """Delete the dead letters written before ``before`` (Unix seconds), in every file; returns
        how many. Each file is rewritten beside itself and swapped in atomically, under the write lock."""
        cutoff = datetime.fromtimestamp(before, UTC).isoformat(timespec="milliseconds")
        decode = msgspec.json.Decoder(_Stamp).decode
        # ISO 8601 UTC stamps of one format compare as text
        with self._exclusive():
            return sum(self._drop_lines(path, lambda line: decode(line).time < cutoff) for path in self.files())

    def erase(self, matches: Callable[[StoredLetter], bool], dry_run: bool = False) -> int:
        """Erasure: delete the letters ``matches`` picks, in every file; returns how many (would go)."""
        decode = msgspec.json.Decoder(StoredLetter).decode
        with self._exclusive():
            return sum(self._drop_lines(path, lambda line: matches(decode(line)), dry_run) for path in self.files())

    def rewrite(self, change: Callable[[StoredLetter], StoredLetter | None], dry_run: bool = False) -> int:
        """Replace each letter by what ``change`` makes of it (None: left as it is), in every file;
        returns how many were (or would be) replaced. ``ragmon keys rotate`` re-seals with it."""
        decode = msgspec.json.Decoder(StoredLetter).decode

        def changed(line: bytes) -> bytes | None:
            letter = change(decode(line))
            return None if letter is None else msgspec.json.encode(letter) + b"\n"

        with self._exclusive():
            return sum(self._drop_lines(path, lambda line: False, dry_run, changed) for path in self.files())

    def _drop_lines(self, path: Path, drop: Callable[[bytes], bool], dry_run: bool = False,
                    change: Callable[[bytes], bytes | None] = lambda line: None) -> int:
        """Rewrite one file without the lines ``drop`` picks and with the lines ``change`` makes
        anew (None: kept as they are), beside itself, swapped in atomically; under
        :meth:`_exclusive`. Returns how many lines were dropped or changed."""
        temporary = path.with_name(path.name + ".prune")
        dropped = 0
        with path.open("rb") as source, os.fdopen(open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                                  "wb") as kept:
            for line in source:  # streamed: the file may be large
                try:
                    gone = bool(line.strip()) and drop(line)
                    anew = None if gone or not line.strip() else change(line)
                except msgspec.DecodeError:
                    gone, anew = False, None  # a line we cannot read (a torn write, an edit) is kept, not lost
                if gone or anew is not None:
                    dropped += 1
                if not gone:
                    kept.write(line if anew is None else anew)
            kept.flush()
            os.fsync(kept.fileno())
        if dropped and not dry_run:
            os.replace(temporary, path)
            if path == self.path and self._fd is not None:  # the old descriptor points at the replaced file
                os.close(self._fd)
                self._fd = None
        else:
            temporary.unlink()
        return dropped

    def shutdown(self) -> None:
        with self._lock:
            for fd in (self._fd, self._lock_fd):
                if fd is not None:
                    os.close(fd)
            self._fd = self._lock_fd = None

    def _append(self, data: bytes) -> None:
        end: int | None = None
        try:
            if self._fd is None:
                self._fd = open_private(self.path, _APPEND_AND_READ)
            end = os.lseek(self._fd, 0, os.SEEK_END)
            if end and end + len(data) > self._max_file_bytes:
                self._rotate()
                end = 0
            if end and os.pread(self._fd, 1, end - 1) != b"\n":
                # a line torn by a crash (or an edit) ends the file: the batch starts a line of its
                # own, so the torn letter costs itself alone, not the first letter of this batch too
                data = b"\n" + data
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                if written <= 0:
                    raise OSError(errno.ENOSPC, "short write")
                view = view[written:]
            os.fsync(self._fd)
            return
        except OSError as error:
            failure = error
        if end is not None and self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)  # drop the partly written batch
        raise Retryable(f"dead-letter file {self.path}: {failure.strerror}") from failure


    def _rotate(self) -> None:
        """Under the write lock: the current file becomes ``.1`` (and so on); the oldest beyond
        ``keep_files`` is deleted and its letters reported as dropped."""
        os.close(self._fd)
        self._fd = None
        names = [self.path, *(self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self._keep_files + 1))]
        if names[-1].exists():
            with names[-1].open("rb") as oldest:
                dropped = sum(chunk.count(b"\n") for chunk in iter(lambda: oldest.read(1 << 20), b""))
            names[-1].unlink()
            self._on_dropped(dropped)
        for older, newer in zip(reversed(names[1:]), reversed(names[:-1]), strict=True):
            if newer.exists():
                os.replace(newer, older)
        self._fd = open_private(self.path, _APPEND_AND_READ)


class _Stamp(msgspec.Struct):
    time: str


def _replaced(path: Path, fd: int) -> bool:
    """Whether the file ``fd`` was opened on is no longer the one at ``path`` (swapped or removed)."""
    try:
        return os.stat(path).st_ino != os.fstat(fd).st_ino
    except FileNotFoundError:
        return True


def read_dead_letters(path: Path) -> list[dict]:
    """Read back the dead letters at ``path`` and in its rotated files, oldest first (for tests
    and tools)."""
    decoder = msgspec.json.Decoder(StoredLetter)
    letters = []
    for file in reversed(dead_letter_files(path)):
        with file.open("rb") as handle:
            letters.extend(msgspec.structs.asdict(decoder.decode(line)) for line in handle if line.strip())
    return letters
