"""The labeling queue: samples stored idempotently by trace id (SQLModel, migrations 0002 and 0004).

A sample's ``trace_id`` and ``tenant`` are shown ids (``Redactor.shown_id``), as its redacted trace
holds them: the key its findings name the trace by, distinct for two ids that redact alike.

Status moves ``queued -> exported -> labeled``, or to ``discarded``. :meth:`SampleStore.admit` is
where the weekly quota is decided (``monitor/labeling/quota.py``): against the stored samples of
each tenant-week, under a lock on that tenant-week (a PostgreSQL advisory lock), so replicas
sharing the database decide as one process would. A queued sample can lose a stratum to a
lower-ranked trace (and is deleted when it has none left); everything else is fixed when it is
first stored, so replays and retries change nothing.

A sample of a chat turn carries the earlier turns of its conversation (``payload["history"]``),
read from the turn table (``monitor/labeling/turn_store.py``) when the sample is first stored:
the turns every replica wrote by then (docs/sampling.md, "Conversation samples").
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    Column,
    Engine,
    Index,
    String,
    bindparam,
    cast,
    delete,
    func,
    insert,
    or_,
    text,
    type_coerce,
    update,
)
from sqlalchemy import select as core_select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, col, select

from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.labeling import turn_store
from ragmon.monitor.labeling.quota import LEAK, Claim, WeekState
from ragmon.monitor.labeling.sampling import DropReason
from ragmon.monitor.storage.upsert import conflict_statement

Status = Literal["queued", "exported", "labeled", "discarded"]
STATUSES: tuple[str, ...] = ("queued", "exported", "labeled", "discarded")


class Sample(SQLModel, table=True):
    __tablename__ = "sample"
    trace_id: str = Field(primary_key=True, max_length=256)
    tenant: str = Field(max_length=256)
    week: str = Field(max_length=8)
    strata: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    status: str = Field(default="queued", max_length=16)
    split: str = Field(max_length=16)
    fingerprint: str = Field(max_length=64)
    trace_time: float
    created_at: float
    updated_at: float
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    rank: float = 0.0  # quota.rank_of the trace: lower keeps a place (samples stored before 0004 have 0)
    # the id of the caller key its keyed ids were made with (keyring.key_id); "" before 0014
    caller_key_id: str = Field(default="", sa_column=Column(String(16), nullable=False, server_default=""))


class SampleClaim(SQLModel, table=True):
    """The lowest-ranked trace offered for a stratum this tenant-week with a question fingerprint,
    holding a place or not."""

    __tablename__ = "sample_claim"
    # a batch looks its fingerprints up in its tenant-week; the key's order (stratum before
    # fingerprint) would make that a scan of every claim of the week (migration 0007)
    __table_args__ = (Index("ix_sample_claim_fingerprint", "tenant", "week", "fingerprint"),)
    tenant: str = Field(primary_key=True, max_length=256)
    week: str = Field(primary_key=True, max_length=8)
    stratum: str = Field(primary_key=True, max_length=32)
    fingerprint: str = Field(primary_key=True, max_length=64)
    trace_id: str = Field(max_length=256)
    rank: float
    updated_at: float
    # the id of the caller key its keyed ids were made with (keyring.key_id); "" before 0014
    caller_key_id: str = Field(default="", sa_column=Column(String(16), nullable=False, server_default=""))


# What every admission asks, built once with its values bound when executed: a statement built per
# batch keeps its values (the batch's trace ids, fingerprints) in reference cycles among its clause
# objects, which only the garbage collector's rare full collections free.
_TABLE = Sample.__table__  # type: ignore[attr-defined]
_SAMPLE = _TABLE.c
_CLAIM = SampleClaim.__table__.c  # type: ignore[attr-defined]
_STORED_WEEKS = core_select(_SAMPLE.trace_id, _SAMPLE.tenant, _SAMPLE.week).where(
    _SAMPLE.trace_id.in_(bindparam("trace_ids", expanding=True)))
_CLAIMS = core_select(_CLAIM.stratum, _CLAIM.fingerprint, _CLAIM.trace_id, _CLAIM.rank).where(
    _CLAIM.tenant == bindparam("tenant"), _CLAIM.week == bindparam("week"),
    _CLAIM.fingerprint.in_(bindparam("fingerprints", expanding=True)))
_RESTRATIFIED = update(_TABLE).where(_SAMPLE.trace_id == bindparam("wanted")).values(
    strata=bindparam("new_strata", type_=_SAMPLE.strata.type), updated_at=bindparam("now"))
_DISPLACED = delete(_TABLE).where(_SAMPLE.trace_id.in_(bindparam("trace_ids", expanding=True)))


@dataclass
class NewSample:
    """A sample decided by the sampler, not yet stored. ``payload`` is the redacted trace, or a
    function that makes it (see :meth:`redacted`). ``conversation``: the pseudonym of the trace's
    conversation, whose earlier turns the stored sample carries, and ``turn`` its number;
    ``claim_keys``: the quota claim key of strata not claimed by the question fingerprint
    (``WeekState.offer``)."""

    trace_id: str
    tenant: str
    week: str
    strata: set[str]
    split: str
    fingerprint: str
    trace_time: float
    payload: dict[str, Any] | Callable[[], dict[str, Any]]
    rank: float = 0.0
    conversation: str | None = None
    turn: int | None = None
    claim_keys: dict[str, str] = field(default_factory=dict)

    def redacted(self) -> dict[str, Any]:
        """The redacted trace. A function in ``payload`` is called here, when the store keeps the
        sample: the weekly quota refuses most offers once a week fills up, and redacting a trace
        costs more than deciding its place."""
        if callable(self.payload):
            self.payload = self.payload()
        return self.payload


@dataclass(frozen=True, slots=True)
class Tally:
    """How many samples share a week, a tenant (None when not counted per tenant), a status and a
    set of strata (see :meth:`SampleStore.tallies`)."""

    week: str
    tenant: str | None
    status: str
    strata: tuple[str, ...]
    samples: int


@dataclass
class Admission:
    """What :meth:`SampleStore.admit` decided: trace ids stored for the first time, (tenant,
    stratum) places newly taken, and the reasons of the places refused or given up (``displaced``),
    one per place. Places held = places taken - places displaced."""

    created: list[str] = field(default_factory=list)
    sampled: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _by_trace(samples: Sequence[NewSample]) -> dict[str, NewSample]:
    """One sample per trace id, copied: the first one's fields, the union of every one's strata."""
    merged: dict[str, NewSample] = {}
    for sample in samples:
        known = merged.get(sample.trace_id)
        if known is None:
            merged[sample.trace_id] = NewSample(**{**sample.__dict__, "strata": set(sample.strata),
                                                    "claim_keys": dict(sample.claim_keys)})
        else:
            known.strata |= sample.strata
            known.claim_keys = {**sample.claim_keys, **known.claim_keys}
    return merged


class SampleStore:
    def __init__(self, engine: Engine, clock=time.time, key_id: str = "", *, history_turns: int = 8,
                 history_bytes: int = 16_384) -> None:
        """``key_id``: the id of the caller key the samples' keyed ids are made with
        (``Redactor.key_id``), stored with each sample, claim and turn this store writes;
        ``history_turns``, ``history_bytes``: the bounds of a sample's earlier turns (and the
        table keeps ``4 * history_turns`` turns per conversation)."""
        self._engine = engine
        self._clock = clock
        self._key_id = key_id
        self._history_turns = history_turns
        self._history_bytes = history_bytes
        self._admitting = threading.Lock()  # one admission at a time in this process (SQLite's one writer)

    def admit(self, samples: Sequence[NewSample], cap: Callable[[str], int], total_cap: int | None = None,
              turns: Sequence[dict[str, Any]] = ()) -> Admission:
        """Decide the weekly quota for ``samples`` (their strata are those the rates selected) and
        store what it admits, in one transaction. ``cap`` gives a stratum's cap per tenant-week;
        ``total_cap`` bounds a week's samples across tenants, in arrival order. Tenant-weeks are
        locked in sorted order, so concurrent replicas never deadlock on them. ``turns``: the
        redacted summaries of the batch's chat turns (``conversation.turn_of``), stored first in
        the same transaction, so a sample of a later turn of the batch carries them. Raises
        :class:`Retryable` when the database is unavailable."""
        turns = turns if self._history_turns else ()
        if not samples and not turns:
            return Admission()
        merged = _by_trace(samples)
        admission = Admission()
        try:
            with self._admitting, Session(self._engine) as session:
                turn_store.add_turns(session.connection(), turns, 4 * self._history_turns, self._clock(), self._key_id)
                # a trace already stored stays in its tenant-week (a trace id sent again with another
                # tenant or time, or two ids that redact alike)
                for trace_id, tenant, week in session.connection().execute(_STORED_WEEKS,
                                                                           {"trace_ids": list(merged)}):
                    merged[trace_id].tenant, merged[trace_id].week = tenant, week
                groups: dict[tuple[str, str], dict[str, NewSample]] = {}
                for trace_id, sample in merged.items():
                    groups.setdefault((sample.tenant, sample.week), {})[trace_id] = sample
                totals: dict[str, int] = {}
                for (tenant, week), group in sorted(groups.items()):
                    self._lock_week(session, tenant, week)
                    if week not in totals:
                        totals[week] = session.exec(select(func.count()).select_from(Sample)
                                                    .where(Sample.week == week)).one()
                    self._admit_week(session, tenant, week, group, cap, total_cap, totals, admission)
                session.commit()
        except SQLAlchemyError as error:
            raise Retryable(f"sample store: {type(error).__name__}") from error
        return admission

    @staticmethod
    def _lock_week(session: Session, tenant: str, week: str) -> None:
        """Hold the tenant-week until the transaction ends (PostgreSQL; SQLite has one writer)."""
        if session.get_bind().dialect.name == "postgresql":
            digest = hashlib.blake2b(f"ragmon.sample\x00{tenant}\x00{week}".encode(), digest_size=8).digest()
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                            {"key": int.from_bytes(digest, "big", signed=True)})

    def _admit_week(self, session: Session, tenant: str, week: str, group: dict[str, NewSample],
                    cap: Callable[[str], int], total_cap: int | None, totals: dict[str, int],
                    admission: Admission) -> None:
        now = self._clock()
        rows = _week_rows(session, tenant, week)
        fingerprints = sorted({s.fingerprint for s in group.values()}
                              | {key for s in group.values() for key in s.claim_keys.values()})
        state = WeekState(strata={t: set(strata) for t, (strata, _, _) in rows.items()},
                          ranks={t: rank for t, (_, _, rank) in rows.items()},
                          fixed={t for t, (_, status, _) in rows.items() if status != "queued"},
                          claims={(stratum, fingerprint): Claim(trace_id, rank)
                                  for stratum, fingerprint, trace_id, rank in session.connection().execute(
                                      _CLAIMS, {"tenant": tenant, "week": week, "fingerprints": fingerprints})})
        for trace_id, sample in group.items():
            if trace_id not in state.strata and total_cap is not None and totals[week] >= total_cap:
                admission.dropped += [DropReason.WEEKLY_TOTAL_CAP.value] * len(sample.strata - {LEAK})
                sample.strata &= {LEAK}  # a leak is never refused for room: it is what the queue is for
                if not sample.strata:
                    continue
            outcome = state.offer(trace_id, sample.fingerprint, sample.rank, sample.strata, cap, sample.claim_keys)
            admission.sampled += [(tenant, stratum) for stratum in sorted(outcome.admitted)]
            admission.dropped += [reason.value for _, reason in outcome.refused]
            admission.dropped += [DropReason.DISPLACED.value] * len(outcome.displaced)
            if outcome.admitted and trace_id not in rows:
                totals[week] += 1
        created = []
        histories = self._histories(session, tenant, [group[t] for t in state.strata if t not in rows])
        for trace_id, strata in state.strata.items():
            row = rows.get(trace_id)
            if row is None:
                sample = group[trace_id]
                payload = sample.redacted()
                if trace_id in histories:
                    payload = {**payload, "history": histories[trace_id]}
                created.append({
                    "trace_id": trace_id, "tenant": tenant, "week": week, "strata": sorted(strata),
                    "status": "queued", "split": sample.split, "fingerprint": sample.fingerprint,
                    "trace_time": sample.trace_time, "created_at": now, "updated_at": now,
                    "payload": payload, "rank": sample.rank, "caller_key_id": self._key_id})
                admission.created.append(trace_id)
            elif row[0] != strata:
                session.execute(_RESTRATIFIED, {"wanted": trace_id, "new_strata": sorted(strata), "now": now})
        if created:  # one bulk insert: no ORM object and unit of work per sample
            session.execute(insert(Sample), created)
        gone = sorted(rows.keys() - state.strata.keys())
        if gone:
            session.execute(_DISPLACED, {"trace_ids": gone})
        claims = []
        for stratum, fingerprint in sorted(state.changed_claims):
            claim = state.claims[stratum, fingerprint]
            claims.append({"tenant": tenant, "week": week, "stratum": stratum, "fingerprint": fingerprint,
                           "trace_id": claim.trace_id, "rank": claim.rank, "updated_at": now,
                           "caller_key_id": self._key_id})
        _store_claims(session, claims)

    def _histories(self, session: Session, tenant: str, new: Sequence[NewSample]) -> dict[str, list[dict[str, Any]]]:
        """The earlier turns of the conversations of the tenant-week's new samples that have one."""
        if not self._history_turns:
            return {}
        return turn_store.histories(session, tenant, [(s.trace_id, s.conversation, s.turn, s.trace_time)
                                                      for s in new if s.conversation is not None],
                                    self._history_turns, self._history_bytes)

    def delete_turns_before(self, before: float) -> int:
        """Retention: delete the conversation turns kept since before ``before``; returns how many."""
        return turn_store.delete_turns_before(self._engine, before)

    def erase_turns(self, callers: Sequence[str], conversations: Sequence[str], *, dry_run: bool = False) -> int:
        """Erasure: the conversation turns of the pseudonyms ``callers`` or ``conversations``
        (``turn_store.erase_turns``); returns how many (would) go."""
        return turn_store.erase_turns(self._engine, callers, conversations, dry_run=dry_run)

    def upsert(self, samples: Sequence[NewSample]) -> list[str]:
        """Store new samples and add strata to known ones; return the trace ids stored for the
        first time. Raises :class:`Retryable` when the database is unavailable."""
        if not samples:
            return []
        now = self._clock()
        merged = _by_trace(samples)
        try:
            with Session(self._engine) as session:
                existing = {s.trace_id: s for s in session.exec(
                    select(Sample).where(col(Sample.trace_id).in_(list(merged))))}
                created = []
                for trace_id, sample in merged.items():
                    row = existing.get(trace_id)
                    if row is None:
                        session.add(Sample(
                            trace_id=trace_id, tenant=sample.tenant, week=sample.week, strata=sorted(sample.strata),
                            status="queued", split=sample.split, fingerprint=sample.fingerprint,
                            trace_time=sample.trace_time, created_at=now, updated_at=now, payload=sample.redacted(),
                            caller_key_id=self._key_id))
                        created.append(trace_id)
                    elif not sample.strata <= set(row.strata):
                        row.strata = sorted(set(row.strata) | sample.strata)
                        row.updated_at = now
                        session.add(row)
                session.commit()
                return created
        except SQLAlchemyError as error:
            raise Retryable(f"sample store: {type(error).__name__}") from error

    def batch(self, week: str, tenant: str | Sequence[str] | None = None) -> list[Sample]:
        """The week's batch: every sample of the week (and tenant) not discarded, in a stable
        order, so pulling the same week again gives the same batch."""
        return [s for s in self.find(week=week, tenant=tenant) if s.status != "discarded"]

    def mark_exported(self, trace_ids: Sequence[str]) -> int:
        """Queued samples among ``trace_ids`` become exported; returns how many changed."""
        now = self._clock()
        with Session(self._engine) as session:
            rows = list(session.exec(select(Sample).where(col(Sample.trace_id).in_(list(trace_ids)),
                                                          Sample.status == "queued")))
            for row in rows:
                row.status = "exported"
                row.updated_at = now
                session.add(row)
            session.commit()
        return len(rows)

    def mark_labeled(self, trace_ids: Sequence[str]) -> int:
        """Samples among ``trace_ids`` become labeled (from any status: a reviewed label wins);
        returns how many changed. Ids the store does not hold are ignored."""
        now = self._clock()
        changed = 0
        with Session(self._engine) as session:
            for start in range(0, len(trace_ids), 500):
                chunk = list(trace_ids[start:start + 500])
                rows = session.exec(select(Sample).where(col(Sample.trace_id).in_(chunk), Sample.status != "labeled"))
                for row in rows:
                    row.status = "labeled"
                    row.updated_at = now
                    session.add(row)
                    changed += 1
            session.commit()
        return changed

    def payloads(self, trace_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored (redacted) traces of ``trace_ids`` that the store holds."""
        out: dict[str, dict[str, Any]] = {}
        with Session(self._engine) as session:
            for start in range(0, len(trace_ids), 500):
                chunk = list(trace_ids[start:start + 500])
                for row in session.exec(select(Sample).where(col(Sample.trace_id).in_(chunk))):
                    out[row.trace_id] = row.payload
        return out

    def delete_unlabeled_before(self, before: float) -> int:
        """Retention: delete queued and discarded samples stored before ``before``; returns how
        many. Labeled samples stay (the regression set points at them), and so do exported ones:
        their labels may still come back, and the eval reads their traces."""
        with Session(self._engine) as session:
            result = session.exec(delete(Sample).where(col(Sample.status).in_(("queued", "discarded")),
                                                       Sample.created_at < before))
            session.exec(delete(SampleClaim).where(SampleClaim.updated_at < before))
            session.commit()
            return result.rowcount or 0

    def erase(self, callers: Sequence[str], conversations: Sequence[str], *, dry_run: bool = False) -> list[str]:
        """Erasure: delete the samples of one person, whatever their status: those whose trace's
        caller has one of the pseudonyms ``callers`` or whose conversation has one of
        ``conversations`` (a person's pseudonyms under every caller key), and the quota claims
        naming them. Returns their trace ids (what was, or with ``dry_run`` would be, deleted), so
        the regression set and the batches can drop them too."""
        matches = []
        if callers:
            matches.append(Sample.payload["caller"]["id"].as_string().in_(tuple(callers)))
        if conversations:
            matches.append(Sample.payload["conversation_id"].as_string().in_(tuple(conversations)))
        if not matches:
            return []
        with Session(self._engine) as session:
            trace_ids = sorted(session.exec(select(Sample.trace_id).where(or_(*matches))))
            if trace_ids and not dry_run:
                for start in range(0, len(trace_ids), 500):
                    chunk = trace_ids[start:start + 500]
                    session.exec(delete(Sample).where(col(Sample.trace_id).in_(chunk)))
                    session.exec(delete(SampleClaim).where(col(SampleClaim.trace_id).in_(chunk)))
                session.commit()
        return trace_ids

    def find_one(self, trace_id: str) -> Sample | None:
        """The sample of ``trace_id``, if one is stored."""
        with Session(self._engine) as session:
            return session.get(Sample, trace_id)

    def counts_by_status(self) -> dict[str, int]:
        with Session(self._engine) as session:
            rows = session.exec(select(Sample.status, func.count()).group_by(Sample.status)).all()
        return {status: n for status, n in rows}

    def find(self, *, week: str | None = None, tenant: str | Sequence[str] | None = None, status: str | None = None,
             limit: int | None = None) -> list[Sample]:
        """Samples in a stable order (week, tenant, trace id)."""
        query = _where(select(Sample), week, tenant, status).order_by(Sample.week, Sample.tenant, Sample.trace_id)
        if limit is not None:
            query = query.limit(limit)
        with Session(self._engine) as session:
            return list(session.exec(query))

    def count(self, *, week: str | None = None, tenant: str | Sequence[str] | None = None,
              status: str | None = None) -> int:
        """How many samples :meth:`find` would give without a limit."""
        with Session(self._engine) as session:
            return session.exec(_where(select(func.count()).select_from(Sample), week, tenant, status)).one()

    def tallies(self, *, week: str | None = None, status: str | None = None, per_tenant: bool = True
                ) -> list[Tally]:
        """The samples counted by week, tenant (unless not ``per_tenant``), status and strata, in one
        GROUP BY that reads no payload: what ``samples stats`` and the status page show. A set of
        strata is grouped as stored (its JSON text, strata sorted), read back as a sorted tuple."""
        table = Sample.__table__.c  # type: ignore[attr-defined]
        strata = cast(table.strata, String)  # PostgreSQL cannot group a json column, its text it can
        keys = [table.week, *([table.tenant] if per_tenant else []), table.status, strata]
        query = _where(core_select(*keys, func.count()).group_by(*keys), week, None, status)
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return [Tally(row[0], row[1] if per_tenant else None, row[-3], tuple(json.loads(row[-2])), row[-1])
                for row in rows]

    def latest_weeks(self, n: int = 2) -> list[str]:
        with Session(self._engine) as session:
            weeks = session.exec(select(Sample.week).distinct().order_by(col(Sample.week).desc()).limit(n)).all()
        return list(weeks)


_STRATA_AS_STORED = type_coerce(Sample.__table__.c.strata, String)  # type: ignore[attr-defined]


def _week_rows(session: Session, tenant: str, week: str) -> dict[str, tuple[frozenset[str], str, float]]:
    """The tenant-week's samples, ``trace id -> (strata, status, rank)``, read without the ORM.

    Every batch reads its tenant-weeks whole, since the quota is decided against them (and another
    replica may have changed them), so a week of thousands of samples is read again and again:
    through the ORM, with its JSON decoded row by row, that was most of the time a batch spent
    storing samples. The strata of a week take a handful of distinct values, each decoded once."""
    table = Sample.__table__.c  # type: ignore[attr-defined]
    decoded: dict[Any, frozenset[str]] = {}
    rows: dict[str, tuple[frozenset[str], str, float]] = {}
    for trace_id, stored, status, rank in session.connection().execute(
            core_select(table.trace_id, _STRATA_AS_STORED, table.status, table.rank)
            .where(table.tenant == tenant, table.week == week)).all():  # fetched at once, not row by row
        # SQLite hands the JSON text over; PostgreSQL's drivers decode json columns themselves
        key = stored if isinstance(stored, str) else tuple(stored)
        strata = decoded.get(key)
        if strata is None:
            strata = decoded[key] = frozenset(json.loads(stored) if isinstance(stored, str) else stored)
        rows[trace_id] = (strata, status, rank)
    return rows


def _where(query: Any, week: str | None, tenant: str | Sequence[str] | None, status: str | None) -> Any:
    """``query`` narrowed to the given week, tenant (or any of several stored values of one
    tenant: its shown id under each caller key) and status."""
    for column, value in ((Sample.week, week), (Sample.tenant, tenant), (Sample.status, status)):
        if isinstance(value, str):
            query = query.where(column == value)
        elif value is not None:
            query = query.where(column.in_(tuple(value)))
    return query


_CLAIM_KEY = ("tenant", "week", "stratum", "fingerprint")


def _store_claims(session: Session, claims: list[dict[str, Any]]) -> None:
    """Insert or replace the claims (in key order) in one executemany of a statement compiled once,
    instead of a select and a write per claim. The tenant-week is held by the caller
    (``_lock_week``), so the replaced claim is the one this transaction read."""
    if not claims:
        return
    connection = session.connection()
    connection.execute(conflict_statement(connection, SampleClaim.__table__, "claims", lambda insert: (  # type: ignore[attr-defined]
        insert.on_conflict_do_update(index_elements=list(_CLAIM_KEY), set_={
            name: insert.excluded[name] for name in ("trace_id", "rank", "updated_at", "caller_key_id")}))),
        claims)
