"""Sampling decisions for the labeling queue (docs/sampling.md): pure functions plus one bounded quota.

A trace belongs to strata (:func:`strata_of`, and later :func:`late_strata_from` when a rephrase or
negative feedback arrives); each stratum is kept when ``hash(salt, stratum, trace_id) < rate``
(:func:`selected`), so a replay or another replica decides the same. The question fingerprint
(:func:`question_fingerprint`) decides the split and which questions are near duplicates; the
weekly caps and the near-duplicate rule are in ``monitor/labeling/quota.py``. Nothing here reads a
clock, a store or a random source.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, ValidationInfo, field_validator

from ragmon.monitor.config.section import ConfigSection, TimeZoneName
from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.results import FeedbackSignals, Outcome, Signals, TraceRef, TraceSignals


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
    # a conversation whose turn was rephrased, got negative feedback or leaked: sampled once, as its
    # triggering turn with the turns before it (docs/sampling.md, "Conversation samples")
    CONVERSATION = "conversation"


class DropReason(StrEnum):
    WEEKLY_CAP = "weekly_cap"  # the tenant's cap for this stratum and week is reached
    WEEKLY_TOTAL_CAP = "weekly_total_cap"  # the week holds sampling.weekly_total_cap samples of all tenants
    NEAR_DUPLICATE = "near_duplicate"  # another trace with the same question fingerprint was sampled this week
    OLD_WEEK = "old_week"  # older than the week before the newest week this process has seen
    TRACE_EVICTED = "trace_evicted"  # a late stratum for a trace no longer among the recent ones
    DISPLACED = "displaced"  # a queued sample gave its place in a stratum to a lower-ranked trace (quota.py)


DEFAULT_RATES: dict[str, float] = {
    "permission_violation": 1.0, "negative_feedback": 1.0, "unsupported_citation": 0.5, "rephrased": 0.5,
    "abstained": 0.25, "low_score": 0.25, "stale_served": 0.25, "empty_context": 0.25, "random": 0.01,
    "conversation": 1.0,
}
#: The strata whose turn makes its conversation a candidate for the ``conversation`` stratum.
CONVERSATION_TRIGGERS = frozenset({"permission_violation", "negative_feedback", "rephrased"})
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

    history_turns: NonNegativeInt = Field(
        8, le=100, description="Earlier turns of its conversation a sample carries at most, the newest kept; 0: "
        "none, and no turn is kept for it.")
    history_bytes: int = Field(16_384, ge=1_024, le=1_048_576, description="Bytes at most of a sample's earlier "
                               "turns as JSON; the oldest turns go first.")
    history_retention_days: float = Field(
        8.0, gt=0, description="How long a conversation's redacted turns are kept for the samples of its later "
        "turns (the newest 4 x history_turns per conversation).")

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


def conversation_selected(config: SamplingConfig, tenant: str, conversation_id: str, strata: Iterable[str]
                          ) -> bool:
    """Whether a turn belonging to ``strata`` (before their rates) makes its conversation a
    ``conversation`` sample: one of :data:`CONVERSATION_TRIGGERS` is among them, and the
    conversation is selected, by ``hash(salt, "conversation", tenant NUL conversation_id)``: every
    turn of one conversation, on any replica, decides alike."""
    if config.history_turns == 0 or CONVERSATION_TRIGGERS.isdisjoint(strata):
        return False
    return selected(config.salt, Stratum.CONVERSATION, f"{tenant}{_SEP}{conversation_id}",
                    config.rates[Stratum.CONVERSATION])


def conversation_claim(pseudonym: str) -> str:
    """The key the ``conversation`` stratum's claim is held under (``quota.py``) in place of the
    question fingerprint: one place per conversation and week, whichever of its turns holds it."""
    return hashlib.blake2b(f"conversation{_SEP}{pseudonym}".encode(), digest_size=16).hexdigest()


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
