"""The labeling queue: samples stored idempotently by trace id (SQLModel, migration 0002).

Status moves ``queued -> exported -> labeled``, or to ``discarded``. A sample's strata only grow
(a trace sampled for one reason can gain another later, e.g. negative feedback); everything else
is fixed when it is first stored, so replays and retries change nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import JSON, Column, Engine, func
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, col, select

from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.labeling.sampling import SeedRow

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


@dataclass
class NewSample:
    """A sample decided by the sampler, not yet stored. ``payload`` is the redacted trace."""

    trace_id: str
    tenant: str
    week: str
    strata: set[str]
    split: str
    fingerprint: str
    trace_time: float
    payload: dict[str, Any]


class SampleStore:
    def __init__(self, engine: Engine, clock=time.time) -> None:
        self._engine = engine
        self._clock = clock

    def upsert(self, samples: Sequence[NewSample]) -> list[str]:
        """Store new samples and add strata to known ones; return the trace ids stored for the
        first time. Raises :class:`Retryable` when the database is unavailable."""
        if not samples:
            return []
        now = self._clock()
        merged: dict[str, NewSample] = {}
        for sample in samples:
            known = merged.get(sample.trace_id)
            if known is None:
                merged[sample.trace_id] = NewSample(**{**sample.__dict__, "strata": set(sample.strata)})
            else:
                known.strata |= sample.strata
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
                            trace_time=sample.trace_time, created_at=now, updated_at=now, payload=sample.payload))
                        created.append(trace_id)
                    elif not sample.strata <= set(row.strata):
                        row.strata = sorted(set(row.strata) | sample.strata)
                        row.updated_at = now
                        session.add(row)
                session.commit()
                return created
        except SQLAlchemyError as error:
            raise Retryable(f"sample store: {type(error).__name__}") from error

    def batch(self, week: str, tenant: str | None = None) -> list[Sample]:
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
        from sqlalchemy import delete

        with Session(self._engine) as session:
            result = session.exec(delete(Sample).where(col(Sample.status).in_(("queued", "discarded")),
                                                       Sample.created_at < before))
            session.commit()
            return result.rowcount or 0

    def counts_by_status(self) -> dict[str, int]:
        with Session(self._engine) as session:
            rows = session.exec(select(Sample.status, func.count()).group_by(Sample.status)).all()
        return {status: n for status, n in rows}

    def find(self, *, week: str | None = None, tenant: str | None = None, status: str | None = None,
             limit: int | None = None) -> list[Sample]:
        """Samples in a stable order (week, tenant, trace id)."""
        query = select(Sample)
        if week is not None:
            query = query.where(Sample.week == week)
        if tenant is not None:
            query = query.where(Sample.tenant == tenant)
        if status is not None:
            query = query.where(Sample.status == status)
        query = query.order_by(Sample.week, Sample.tenant, Sample.trace_id)
        if limit is not None:
            query = query.limit(limit)
        with Session(self._engine) as session:
            return list(session.exec(query))

    def seed_rows(self, weeks: Iterable[str]) -> list[SeedRow]:
        """What the weekly quota must know of ``weeks`` at start-up."""
        with Session(self._engine) as session:
            rows = session.exec(select(Sample).where(col(Sample.week).in_(list(weeks))))
            return [SeedRow(r.tenant, r.week, r.fingerprint, r.trace_id, tuple(r.strata)) for r in rows]

    def latest_weeks(self, n: int = 2) -> list[str]:
        with Session(self._engine) as session:
            weeks = session.exec(select(Sample.week).distinct().order_by(col(Sample.week).desc()).limit(n)).all()
        return list(weeks)
