"""Low-score baselines shared through the database, so that replicas judge as one process.

A replica of a consumer group sees only its partitions' traces, but a retrieval's top score is
judged against the trailing percentile of its (index, retriever) pair over all traffic. Alone, each
replica would start judging only after ``low_score_min_samples`` scores of its own (N replicas
starting together: N times later), and its window of ``low_score_window`` scores would span N
times as long as one process's. So each replica writes the top scores it judged since its last
write (one row per pair, the scores packed as little-endian doubles) and reads the rows the others
wrote since its last read into its own baselines, before it judges a batch: each batch of a backlog
shares what it judged with the next batches of the others, and a quiet stream shares every
``low_score_sync_seconds``. At start-up it reads the newest window of every pair: a restarted or
added replica, and a single process after a restart, judges from its first trace.

A pair still warming (under ``low_score_min_samples`` scores: none is judged low) is shared
within the batch, every ``WARMING_SYNC`` of its scores: replicas starting together on an empty
table would otherwise each warm it on batches of their own, and leave up to a batch per replica
more unjudged than one process does.

Reading goes by the rows' autoincrement id. Two writers may commit out of id order, so each read
also asks again for the ids missing below the highest it has read (for ``HOLE_SECONDS``).
Any replica prunes, every ``PRUNE_SECONDS``: a pair keeps the newest rows that hold a window of
its scores, and no row older than ``KEEP_SECONDS``.

Sharing is best effort: an unavailable database delays it (a warning, the scores kept up to a
window per pair), and never refuses a batch.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import Column, Engine, LargeBinary, Table, bindparam, case, delete, insert, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, SQLModel

from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.rate_limit import TokenBucket
from ragmon.monitor.core.signals.results import TraceSignals
from ragmon.monitor.core.signals.scores import ScoreBaselines

log = logging.getLogger(__name__)

SYNC_SCORES = 100  # scores pending after a batch that are written at once, whatever the interval
WARMING_SYNC = 20  # scores of warming pairs judged between two shares within a batch
HOLE_SECONDS = 30.0  # how long an id missing below the highest read is looked for again
MAX_HOLES = 1000
PRUNE_SECONDS = 600.0
KEEP_SECONDS = 30 * 86400.0

Pair = tuple[str, str]  # (index, retriever)


class ScoreShareRow(SQLModel, table=True):
    __tablename__ = "score_share"
    id: int | None = Field(default=None, primary_key=True)
    index_name: str = Field(max_length=256)
    retriever: str = Field(max_length=256)
    replica: str = Field(max_length=64)  # who wrote it: a replica skips its own rows when reading
    n: int  # how many scores ``scores`` packs
    scores: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    recorded_at: float


_TABLE: Table = ScoreShareRow.__table__  # type: ignore[assignment]
_C = _TABLE.c


def pack(scores: list[float]) -> bytes:
    return struct.pack(f"<{len(scores)}d", *scores)


def unpack(data: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(data) // 8}d", data)


def replica_name() -> str:
    """This process among the replicas: host, process id and a random part (a restarted process
    with the same pid is another writer)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class ScoreShare:
    """The ``score_share`` table: write a replica's scores, read the others'."""

    def __init__(self, engine: Engine, replica: str, window: int, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self.replica = replica
        self._window = window
        self._clock = clock
        self._highest = 0  # the highest id read
        self._holes: dict[int, float] = {}  # ids below it not read yet, and when they were first missed

    def write(self, scores: Mapping[Pair, list[float]]) -> None:
        """One row per pair, in pair order. Raises ``SQLAlchemyError``."""
        now = self._clock()
        rows = [{"index_name": index, "retriever": retriever, "replica": self.replica, "n": len(values),
                 "scores": pack(values), "recorded_at": now}
                for (index, retriever), values in sorted(scores.items()) if values]
        if rows:
            with self._engine.begin() as connection:
                connection.execute(insert(_TABLE), rows)

    def newest(self) -> Iterable[tuple[Pair, tuple[float, ...]]]:
        """The newest window of scores of every pair, every writer's, oldest first (a start-up's
        read); later reads (:meth:`since`) go on from there."""
        with self._engine.connect() as connection:
            oldest = self._oldest_kept(connection)
            if not oldest:
                return []
            rows = connection.execute(
                select(_C.id, _C.index_name, _C.retriever, _C.scores).where(_C.id >= min(oldest.values()))
                .order_by(_C.id)).all()
        self._highest = max([self._highest, *(row.id for row in rows)])
        return [((row.index_name, row.retriever), unpack(row.scores)) for row in rows
                if row.id >= oldest.get((row.index_name, row.retriever), row.id + 1)]

    def since(self) -> list[tuple[Pair, tuple[float, ...]]]:
        """The rows other replicas wrote since the last read, in id order: those above the highest
        id read, and those in the holes earlier reads left below it (ids taken by writers that had
        not committed yet; a hole older than ``HOLE_SECONDS`` is given up: its writer rolled back).
        This replica's own rows are read as ids only."""
        now = self._clock()
        wanted = _C.id > self._highest
        if self._holes:
            wanted = or_(wanted, _C.id.in_(sorted(self._holes)))
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(_C.id, _C.replica, _C.index_name, _C.retriever,
                       case((_C.replica != self.replica, _C.scores), else_=None).label("scores"))
                .where(wanted).order_by(_C.id)).all()
        self._note_holes({row.id for row in rows}, now)
        return [((row.index_name, row.retriever), unpack(row.scores)) for row in rows if row.replica != self.replica]

    def _note_holes(self, read: set[int], now: float) -> None:
        """Move the highest id on; remember the ids missing among those read (at most
        ``MAX_HOLES``, the newest) and forget the holes read or too old."""
        for row_id in read:
            self._holes.pop(row_id, None)
        if read:
            top = max(read)
            start = max(self._highest + 1 if self._highest else min(read), top - MAX_HOLES)
            self._holes.update((i, now) for i in range(start, top) if i not in read)
            self._highest = max(self._highest, top)
        self._holes = {i: t for i, t in self._holes.items() if now - t < HOLE_SECONDS}
        if len(self._holes) > MAX_HOLES:
            self._holes = dict(sorted(self._holes.items())[-MAX_HOLES:])

    def prune(self) -> int:
        """Delete the rows no baseline needs any more; returns how many went."""
        with self._engine.begin() as connection:
            oldest = self._oldest_kept(connection)
            cuts = [{"i": index, "r": retriever, "cut": cut} for (index, retriever), cut in sorted(oldest.items())]
            deleted = 0
            if cuts:
                statement = delete(_TABLE).where(_C.index_name == bindparam("i"), _C.retriever == bindparam("r"),
                                                 _C.id < bindparam("cut"))
                deleted += connection.execute(statement, cuts).rowcount or 0
            deleted += connection.execute(delete(_TABLE).where(_C.recorded_at < self._clock() - KEEP_SECONDS)
                                          ).rowcount or 0
        return deleted

    def _oldest_kept(self, connection) -> dict[Pair, int]:
        """Per pair, the id of its oldest row among the newest that hold a window of scores."""
        held: dict[Pair, int] = defaultdict(int)
        oldest: dict[Pair, int] = {}
        for row in connection.execute(select(_C.id, _C.index_name, _C.retriever, _C.n).order_by(_C.id.desc())):
            pair = (row.index_name, row.retriever)
            if held[pair] < self._window:
                held[pair] += row.n
                oldest[pair] = row.id
        return oldest


class BaselineSharing:
    """Shares the low-score baselines with the other replicas. As a sink it collects the top
    scores the baselines took (those of pairs without a configured threshold) and writes them:
    after a batch that left ``SYNC_SCORES`` scores or more pending (a backlog is judged in batches
    of hundreds), else once ``interval`` seconds have passed (small batches share a round trip).
    Before each batch, :meth:`prepare` reads the others' scores into ``baselines``. Sees a batch
    once it is durable (not a durable sink): a refused and retried batch is shared once. The
    scores of warming pairs come earlier, through :meth:`share_warming` (which it makes the
    baselines' ``on_warming``), and are shared within the batch (a refused batch's too)."""

    name = "score_share"
    durable = False

    def __init__(self, share: ScoreShare, baselines: ScoreBaselines, thresholds: Mapping[str, Mapping[str, float]],
                 window: int, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._share = share
        self._baselines = baselines
        self._thresholds = thresholds
        self._window = window
        self._interval = interval
        self._clock = clock
        self._pending: dict[Pair, list[float]] = defaultdict(list)
        self._warming = 0  # scores of warming pairs taken since the last share within a batch
        self._next_write = self._next_read = 0.0
        self._read_due = False  # this replica wrote since its last read
        self._next_prune = clock() + PRUNE_SECONDS * (0.5 + secrets.randbelow(1000) / 1000)  # replicas apart
        self._warnings = TokenBucket(1 / 60, 1, clock)  # one a minute
        self._reachable = True  # the last call to the database succeeded
        baselines.on_warming = self.share_warming

    def start(self) -> None:
        """Take the newest window of every pair into the baselines (before any trace is judged).
        An unavailable database leaves them empty, with a warning."""
        try:
            taken = self._take(self._share.newest())
            if taken:
                log.info("low-score baselines: %d scores taken from the database", taken)
        except SQLAlchemyError as error:
            self._warn(error)

    def consume(self, observation: Observation) -> None:
        signals = observation.signals
        if not isinstance(signals, TraceSignals):
            return
        configured = self._thresholds.get(signals.index, {})
        for finding in signals.retrievals:
            score = finding.top_score
            # what the baselines took: a score of a pair without a configured threshold (not NaN),
            # but for a warming pair's (share_warming took those)
            if score is not None and finding.retriever not in configured and score == score and not finding.warming:
                self._hold((signals.index, finding.retriever), score)

    def share_warming(self, pair: Pair, score: float) -> None:
        """A score just judged while ``pair`` was warming (``ScoreBaselines.on_warming``): every
        ``WARMING_SYNC`` of them, write what is pending and read the others' scores, in the midst
        of a batch; not while the database is unreachable (``flush`` tries again at its pace: a
        batch does not wait for a connection timeout every few traces)."""
        self._hold(pair, score)
        self._warming += 1
        if self._warming < WARMING_SYNC or not self._reachable:
            return
        self._warming = 0
        try:
            self._write()
            self._read()
        except SQLAlchemyError as error:
            self._warn(error)

    def _hold(self, pair: Pair, score: float) -> None:
        pending = self._pending[pair]
        pending.append(score)
        if len(pending) > 2 * self._window:  # the database away a long time: the newest window
            del pending[:-self._window]

    def _write(self) -> None:
        if self._pending:
            self._share.write(self._pending)
            self._pending.clear()
            self._read_due = True

    def _read(self) -> None:
        self._take(self._share.since())

    def _take(self, rows: Iterable[tuple[Pair, tuple[float, ...]]]) -> int:
        """Scores read from the database into the baselines; returns how many."""
        taken = 0
        for pair, scores in rows:
            for score in scores:
                self._baselines.observe(pair, score)
            taken += len(scores)
        return taken

    def prepare(self) -> None:
        """Before a batch (``Stages.prepare``): read the other replicas' new scores into the
        baselines, when this replica wrote since its last read (it is busy: every batch reads) or
        ``interval`` seconds have passed (a replica that was idle, or just given partitions, judges
        its first batch with what the others judged meanwhile)."""
        now = self._clock()
        if not self._read_due and now < self._next_read:
            return
        self._read_due, self._next_read = False, now + self._interval
        try:
            self._read()
            self._reachable = True
        except SQLAlchemyError as error:
            self._warn(error)

    def flush(self, timeout: float) -> bool:
        now = self._clock()
        held = sum(len(scores) for scores in self._pending.values())  # a list per pair: a few
        if now < self._next_write and held < SYNC_SCORES:
            return True
        self._next_write = now + self._interval
        try:
            self._write()
            if now >= self._next_prune:
                self._next_prune = now + PRUNE_SECONDS
                self._share.prune()
            self._reachable = True
        except SQLAlchemyError as error:
            self._warn(error)
        return True

    def shutdown(self) -> None:
        if self._pending:
            try:
                self._share.write(self._pending)
            except SQLAlchemyError as error:
                self._warn(error)

    def _warn(self, error: SQLAlchemyError) -> None:
        self._reachable = False
        if self._warnings.take():
            log.warning("low-score baselines not shared: %s (kept, tried again)", type(error).__name__)
