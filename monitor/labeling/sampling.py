"""Sampling decisions for the labeling queue (docs/sampling.md): pure functions plus one bounded quota.

A trace belongs to strata (:func:`strata_of`, and later :func:`late_strata_from` when a rephrase or
negative feedback arrives); each stratum is kept when ``hash(salt, stratum, trace_id) < rate``
(:func:`selected`), so a replay or another replica decides the same. The question fingerprint
(:func:`question_fingerprint`) decides the split and which questions are near duplicates; the
:class:`WeeklyQuota` applies the weekly caps per tenant and stratum and samples a question once per
tenant-week. Nothing here reads a clock, a store or a random source.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated, Literal, NamedTuple

from pydantic import Field, NonNegativeInt, ValidationInfo, field_validator

from ragmon.monitor.config.section import ConfigSection, TimeZoneName
from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.results import FeedbackSignals, Outcome, Signals, TraceRef, TraceSignals
from ragmon.monitor.labeling.weeks import previous_week, week_monday


class Stratum(StrEnum):
    PERMISSION_VIOLATION = "permission_violation"
    NEGATIVE_FEEDBACK = "negative_feedback"  # late: joined to an earlier trace
    UNSUPPORTED_CITATION = "unsupported_citation"
    REPHRASED = "rephrased"  # late: the earlier trace of a rephrase
    ABSTAINED = "abstained"
    LOW_SCORE = "low_score"
    STALE_SERVED = "stale_served"
    EMPTY_CONTEXT = "empty_context"
    RANDOM = "random"


class DropReason(StrEnum):
    WEEKLY_CAP = "weekly_cap"  # the tenant's cap for this stratum and week is reached
    WEEKLY_TOTAL_CAP = "weekly_total_cap"  # the week holds sampling.weekly_total_cap samples of all tenants
    NEAR_DUPLICATE = "near_duplicate"  # another trace with the same question fingerprint was sampled this week
    OLD_WEEK = "old_week"  # older than the weeks the quota keeps (see WeeklyQuota)
    TRACE_EVICTED = "trace_evicted"  # a late stratum for a trace no longer among the recent ones


DEFAULT_RATES: dict[str, float] = {
    "permission_violation": 1.0, "negative_feedback": 1.0, "unsupported_citation": 0.5, "rephrased": 0.5,
    "abstained": 0.25, "low_score": 0.25, "stale_served": 0.25, "empty_context": 0.25, "random": 0.01,
}
_SEP = "\x00"  # between the parts of a hashed key; forbidden in the salt, absent from stratum names
Rate = Annotated[float, Field(ge=0, le=1)]


class SamplingConfig(ConfigSection):
    """Which traces go to the labeling queue (docs/sampling.md): rates per stratum, weekly caps, the split."""

    salt: str = Field("ragmon", min_length=1, description="Mixed into every sampling and split hash; changing it "
                      "re-draws which traces are sampled and which questions are held out.")
    rates: dict[str, Rate] = Field(
        default_factory=lambda: dict(DEFAULT_RATES),
        description="Share of the traces of each stratum that is sampled, 0 to 1. Strata not given keep "
        "their default.",
    )
    weekly_cap: NonNegativeInt = Field(200, description="Samples at most per tenant, stratum and ISO week.")
    weekly_cap_overrides: dict[str, NonNegativeInt] = Field(
        default_factory=dict, description="Weekly caps for single strata, e.g. {random: 50}."
    )
    weekly_total_cap: NonNegativeInt = Field(
        20_000, description="Samples at most per ISO week, all tenants together: many tenants (or many forged "
        "tenant names) cannot fill the queue past it.")
    heldout_share: float = Field(0.2, ge=0, le=1, description="Share of question fingerprints in the heldout split.")
    time_zone: TimeZoneName = Field("UTC", description="Time zone in which ISO weeks start (Monday 00:00).")
    late_window_traces: int = Field(
        20_000, gt=0, description="Recent traces kept (compressed, in memory, never stored unredacted) so that "
        "a later rephrase or negative feedback can still sample them; older ones are dropped as trace_evicted.",
    )

    @field_validator("salt")
    @classmethod
    def _salt_has_no_separator(cls, salt: str) -> str:
        if _SEP in salt:
            raise ValueError("must not contain a NUL character")
        return salt

    @field_validator("rates", "weekly_cap_overrides")
    @classmethod
    def _strata_known(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        unknown = sorted(set(value) - set(DEFAULT_RATES))
        if unknown:
            raise ValueError(f"unknown stratum {', '.join(unknown)} (known: {', '.join(DEFAULT_RATES)})")
        return {**DEFAULT_RATES, **value} if info.field_name == "rates" else value

    def cap(self, stratum: str) -> int:
        """The weekly cap of one stratum per tenant."""
        return self.weekly_cap_overrides.get(stratum, self.weekly_cap)


def strata_of(trace: TraceEvent, signals: TraceSignals) -> set[str]:
    """The strata a trace belongs to when it arrives, from its signals; ``random`` always.

    ``rephrased`` and ``negative_feedback`` are never returned here: they reach a trace later,
    through :func:`late_strata_from`. ``trace`` is taken for strata that need more than the signals.
    """
    strata: set[str] = {Stratum.RANDOM}
    if signals.access.candidates or signals.access.context:
        strata.add(Stratum.PERMISSION_VIOLATION)
    if signals.unsupported_citations:
        strata.add(Stratum.UNSUPPORTED_CITATION)
    if signals.outcome is Outcome.ABSTAINED:
        strata.add(Stratum.ABSTAINED)
    elif signals.outcome is Outcome.EMPTY_CONTEXT:
        strata.add(Stratum.EMPTY_CONTEXT)
    if signals.low_score:
        strata.add(Stratum.LOW_SCORE)
    if signals.stale.candidates or signals.stale.context:
        strata.add(Stratum.STALE_SERVED)
    return strata


def late_strata_from(signals: Signals) -> list[tuple[TraceRef, str]]:
    """Strata that a later event gives an earlier trace: the earlier trace of a rephrase is
    ``rephrased``; a thumb down or an escalation makes its trace ``negative_feedback``.

    Feedback whose trace is no longer remembered gives nothing. The week of such a sample is the
    week of the earlier trace (``TraceRef.time``), not of the late event.
    """
    if isinstance(signals, TraceSignals) and signals.rephrase_of is not None:
        return [(signals.rephrase_of, Stratum.REPHRASED)]
    if isinstance(signals, FeedbackSignals) and signals.trace is not None and (
        signals.kind == "escalation" or (signals.kind == "thumb" and signals.value == "down")
    ):
        return [(signals.trace, Stratum.NEGATIVE_FEEDBACK)]
    return []


def unit_hash(salt: str, domain: str, key: str) -> float:
    """A number in [0, 1) fixed by its three inputs, equal in every process, replica and version of Python.

    BLAKE2b over the NUL-joined UTF-8 parts (the salt and the domain hold no NUL, so the key may hold
    anything); the first 53 bits of the digest divided by 2**53, exact in a float and never 1.0.
    """
    if _SEP in salt or _SEP in domain:
        raise ValueError("salt and domain must not contain a NUL character")
    digest = hashlib.blake2b(f"{salt}{_SEP}{domain}{_SEP}{key}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 11) / (1 << 53)


def selected(salt: str, stratum: str, trace_id: str, rate: float) -> bool:
    """Whether a trace is sampled for a stratum: ``hash(salt, stratum, trace_id) < rate``.

    Rate 1 keeps every trace, rate 0 none; a trace kept at one rate is kept at every higher rate.
    """
    return unit_hash(salt, stratum, trace_id) < rate


def decide(config: SamplingConfig, trace_id: str, strata: Iterable[str]) -> set[str]:
    """The strata, among those a trace belongs to, for which it is sampled (before weekly caps)."""
    return {s for s in strata if selected(config.salt, s, trace_id, config.rates[s])}


_WORDS = re.compile(r"\w+")
#: Dropped from fingerprints: words whose presence never makes a different question.
STOP_WORDS = frozenset({"a", "an", "the", "please"})


def question_fingerprint(question: str) -> str:
    """A hex digest shared by near-duplicate questions.

    Normalization: Unicode NFKC, casefold, the words (runs of word characters; punctuation and
    spacing dropped), articles and "please" dropped (unless nothing else is left), then the distinct
    words sorted, so word order and repeats do not matter either. The price of ignoring order: a
    question and its permutation ("who pays whom") share a fingerprint, which for a labeling sample
    is a near duplicate worth losing. Changing this function moves questions between splits.
    """
    words = _WORDS.findall(unicodedata.normalize("NFKC", question).casefold())
    kept = [w for w in words if w not in STOP_WORDS] or words
    canonical = " ".join(sorted(set(kept)))
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def split_of(salt: str, fingerprint: str, heldout_share: float) -> Literal["dev", "heldout"]:
    """``heldout`` for a stable ``heldout_share`` of fingerprints, else ``dev``; paraphrases that share
    a fingerprint share a split, and a fingerprint never changes split while salt and share stay."""
    return "heldout" if unit_hash(salt, "split", fingerprint) < heldout_share else "dev"


class SeedRow(NamedTuple):
    """One stored sample, as the durable store gives it back to seed a :class:`WeeklyQuota`."""

    tenant: str
    week: str
    fingerprint: str
    trace_id: str
    strata: tuple[str, ...]


class WeeklyQuota:
    """Weekly caps per (tenant, stratum) and one sample per question fingerprint per tenant-week.

    Memory is bounded by time: only the newest week seen and the one before it are kept (the one
    before because late feedback and rephrases reach traces of last week, and events near Monday
    00:00 arrive out of order). A newer week evicts older ones; an older week is refused as
    ``old_week``. Within the kept weeks, what is held is bounded by the caps: one entry per admitted
    sample and a counter per tenant and stratum. Weeks are judged from event times, not a clock,
    which the decoder bounds (no timestamps from the far future). Thread-safe.
    """

    def __init__(self, cap: Callable[[str], int], total_cap: int | None = None) -> None:
        """``cap`` gives the weekly cap of a stratum per tenant, e.g. :meth:`SamplingConfig.cap`;
        ``total_cap`` bounds the samples (traces) of a week, all tenants together."""
        self._cap = cap
        self._total_cap = total_cap
        self._totals: dict[str, int] = {}  # week -> samples (traces admitted for at least one stratum)
        self._lock = threading.Lock()
        self._kept: tuple[str, ...] = ()  # the newest week seen and the one before it
        self._counts: dict[tuple[str, str, str], int] = {}  # (tenant, stratum, week) -> samples
        self._fingerprints: dict[tuple[str, str], dict[str, str]] = {}  # (tenant, week) -> fingerprint -> trace
        self._admitted: dict[tuple[str, str], dict[str, set[str]]] = {}  # (tenant, week) -> trace -> strata
        self.dropped: dict[DropReason, int] = dict.fromkeys(DropReason, 0)

    def admit(self, tenant: str, stratum: str, week: str, fingerprint: str, trace_id: str) -> DropReason | None:
        """Take a trace sampled for ``stratum`` into the week's quota: None when admitted, else why not.

        The same trace may come again, for another stratum (several strata, or a late one) or for the
        same one (a replay): it is never its own near duplicate, and a repeat is admitted without
        being counted twice. Drops are counted in :attr:`dropped`.
        """
        with self._lock:
            reason = self._admit(tenant, stratum, week, fingerprint, trace_id)
            if reason is not None:
                self.dropped[reason] += 1
            return reason

    def _admit(self, tenant: str, stratum: str, week: str, fingerprint: str, trace_id: str) -> DropReason | None:
        if not self._advance(week):
            return DropReason.OLD_WEEK
        admitted = self._admitted.setdefault((tenant, week), {})
        if stratum in admitted.get(trace_id, ()):
            return None
        seen = self._fingerprints.setdefault((tenant, week), {})
        # Every leak is an incident of its own, however common its question: never a near duplicate.
        if stratum != Stratum.PERMISSION_VIOLATION and seen.get(fingerprint, trace_id) != trace_id:
            return DropReason.NEAR_DUPLICATE
        key = (tenant, stratum, week)
        if self._counts.get(key, 0) >= self._cap(stratum):
            return DropReason.WEEKLY_CAP
        new_sample = trace_id not in admitted
        if new_sample and self._total_cap is not None and self._totals.get(week, 0) >= self._total_cap:
            return DropReason.WEEKLY_TOTAL_CAP
        self._counts[key] = self._counts.get(key, 0) + 1
        if new_sample:
            self._totals[week] = self._totals.get(week, 0) + 1
        seen[fingerprint] = trace_id
        admitted.setdefault(trace_id, set()).add(stratum)
        return None

    def holds(self, tenant: str, stratum: str, week: str, trace_id: str) -> bool:
        """Whether the trace was already admitted for ``stratum`` (a replay or a retried batch)."""
        with self._lock:
            return stratum in self._admitted.get((tenant, week), {}).get(trace_id, ())

    def seed(self, rows: Iterable[SeedRow]) -> None:
        """Load the samples already stored (call before the first :meth:`admit`). Rows of weeks older
        than the two kept are skipped; a row already known is not counted again, so seeding twice is
        harmless. Caps are not applied: what is stored counts, even above a lowered cap."""
        with self._lock:
            for row in sorted(rows, key=lambda r: week_monday(r.week)):  # oldest first: the window only advances
                if not self._advance(row.week):
                    continue
                self._fingerprints.setdefault((row.tenant, row.week), {}).setdefault(row.fingerprint, row.trace_id)
                by_trace = self._admitted.setdefault((row.tenant, row.week), {})
                if row.trace_id not in by_trace:
                    self._totals[row.week] = self._totals.get(row.week, 0) + 1
                known = by_trace.setdefault(row.trace_id, set())
                for stratum in set(row.strata) - known:
                    key = (row.tenant, stratum, row.week)
                    self._counts[key] = self._counts.get(key, 0) + 1
                    known.add(stratum)

    def count(self, tenant: str, stratum: str, week: str) -> int:
        """Samples admitted (or seeded) for a tenant, stratum and week, 0 for weeks not kept."""
        with self._lock:
            return self._counts.get((tenant, stratum, week), 0)

    def weeks(self) -> list[str]:
        """The weeks currently kept, oldest first."""
        with self._lock:
            return sorted({week for _, week in self._admitted}, key=week_monday)

    def _advance(self, week: str) -> bool:
        """Make ``week`` current if it is newer; False when it is older than the kept weeks."""
        if week in self._kept:
            return True
        if self._kept and week_monday(week) < week_monday(self._kept[0]):
            return False
        self._kept = (week, previous_week(week))
        self._counts = {k: v for k, v in self._counts.items() if k[2] in self._kept}
        self._fingerprints = {k: v for k, v in self._fingerprints.items() if k[1] in self._kept}
        self._admitted = {k: v for k, v in self._admitted.items() if k[1] in self._kept}
        self._totals = {k: v for k, v in self._totals.items() if k in self._kept}
        return True
