"""The weekly quota of one tenant's week, decided by rank so that arrival order does not matter.

Every sampled trace has a rank, ``hash(salt, "rank", trace_id)`` (:func:`rank_of`), equal in every
process and replica. Within a tenant's ISO week, for each stratum:

- **near duplicates**: of the traces offered for the stratum with the same question fingerprint,
  only the lowest-ranked one (its *claim*) may hold a place; a later, lower-ranked trace takes the
  queued holder's place. ``permission_violation`` has no near duplicates: every leak is an
  incident of its own;
- **cap**: the stratum holds the ``cap`` lowest-ranked of the traces that may; a lower-ranked
  newcomer to a full stratum takes the place of the highest-ranked queued member.

So each stratum holds the ``cap`` lowest-ranked claims of the week, whichever replica saw which
trace first and however the traces were batched; a trace's strata are the strata it holds a place
in. What makes order matter still (docs/sampling.md): samples no longer queued (exported, labeled,
discarded) keep their places, and ``weekly_total_cap``, a safety valve across tenants, counts in
arrival order.

:class:`WeekState` is what the store loads for one tenant-week under a lock and writes back
(``monitor/labeling/sample_store.py``); :meth:`WeekState.offer` is pure and reads no clock or store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ragmon.monitor.labeling.sampling import DropReason, Stratum, unit_hash

LEAK = Stratum.PERMISSION_VIOLATION.value


def rank_of(salt: str, trace_id: str) -> float:
    """A trace's rank in [0, 1): lower wins a fingerprint and a place under a cap."""
    return unit_hash(salt, "rank", trace_id)


@dataclass(slots=True)
class Claim:
    """The lowest-ranked trace offered with a question fingerprint (stored or not)."""

    trace_id: str
    rank: float


@dataclass(slots=True)
class Outcome:
    """What one offer did: strata newly admitted for the trace, strata refused with their reason,
    and places taken from other traces, ``(trace_id, stratum, reason)``."""

    admitted: set[str] = field(default_factory=set)
    refused: list[tuple[str, DropReason]] = field(default_factory=list)
    displaced: list[tuple[str, str, DropReason]] = field(default_factory=list)


@dataclass
class WeekState:
    """One tenant's week as the store holds it: the stored samples' strata and ranks, which of them
    are fixed (no longer queued), and the claims, per (stratum, fingerprint), the offers touch."""

    strata: dict[str, set[str]] = field(default_factory=dict)  # trace -> strata it holds a place in
    ranks: dict[str, float] = field(default_factory=dict)  # trace -> rank, stored traces
    fixed: set[str] = field(default_factory=set)  # stored traces no longer queued: never displaced
    claims: dict[tuple[str, str], Claim] = field(default_factory=dict)  # (stratum, fingerprint) -> claim
    changed_claims: set[tuple[str, str]] = field(default_factory=set)  # claims this state changed
    _members: dict[str, set[str]] = field(default_factory=dict, init=False)  # stratum -> traces holding a place

    def __post_init__(self) -> None:
        for trace_id, held in self.strata.items():
            for stratum in held:
                self._members.setdefault(stratum, set()).add(trace_id)

    def offer(self, trace_id: str, fingerprint: str, rank: float, strata: set[str],
              cap: Callable[[str], int], claim_keys: Mapping[str, str] | None = None) -> Outcome:
        """Offer a trace for ``strata`` (those it already holds are ignored: a replay or a retried
        batch changes nothing). ``claim_keys``: the key a stratum's claim is held under in place of
        the question ``fingerprint`` (``conversation``: the conversation's, one place per
        conversation)."""
        outcome = Outcome()
        claim_keys = claim_keys or {}
        for stratum in sorted(strata - self.strata.get(trace_id, set())):
            if stratum == LEAK:
                admitted = self._place(rank, stratum, cap(stratum), outcome)
            else:
                admitted = self._claim(trace_id, claim_keys.get(stratum, fingerprint), rank, stratum, cap(stratum),
                                       outcome)
                if admitted is None:
                    outcome.refused.append((stratum, DropReason.NEAR_DUPLICATE))
                    continue
            if admitted:
                outcome.admitted.add(stratum)
                self.strata.setdefault(trace_id, set()).add(stratum)
                self._members.setdefault(stratum, set()).add(trace_id)
                self.ranks[trace_id] = rank
            else:
                outcome.refused.append((stratum, DropReason.WEEKLY_CAP))
        return outcome

    def _claim(self, trace_id: str, fingerprint: str, rank: float, stratum: str, cap: int,
               outcome: Outcome) -> bool | None:
        """None when a lower-ranked trace (or a fixed sample) holds the fingerprint's claim for the
        stratum; else whether the trace gets a place: the holder's, or one under the cap."""
        key = (stratum, fingerprint)
        holder = self.claims.get(key)
        if holder is not None and holder.trace_id != trace_id:
            holds_place = stratum in self.strata.get(holder.trace_id, ())
            if holder.rank <= rank or (holds_place and holder.trace_id in self.fixed):
                return None
            self.claims[key] = Claim(trace_id, rank)
            self.changed_claims.add(key)
            if holds_place:  # the newcomer ranks lower: it takes the holder's place
                self._remove(holder.trace_id, stratum)
                outcome.displaced.append((holder.trace_id, stratum, DropReason.NEAR_DUPLICATE))
                return True
        elif holder is None:
            self.claims[key] = Claim(trace_id, rank)
            self.changed_claims.add(key)
        return self._place(rank, stratum, cap, outcome)

    def _place(self, rank: float, stratum: str, cap: int, outcome: Outcome) -> bool:
        """Whether a trace of ``rank`` gets a place in ``stratum`` under ``cap``: a free one, or the
        highest-ranked queued member's, who is displaced."""
        members = self._members.get(stratum, ())
        if len(members) < cap:
            return True
        movable = [t for t in members if t not in self.fixed]
        if not movable:
            return False
        worst = max(movable, key=lambda t: (self.ranks[t], t))
        if self.ranks[worst] <= rank:
            return False
        self._remove(worst, stratum)
        outcome.displaced.append((worst, stratum, DropReason.WEEKLY_CAP))
        return True

    def _remove(self, trace_id: str, stratum: str) -> None:
        held = self.strata[trace_id]
        held.discard(stratum)
        self._members[stratum].discard(trace_id)
        if not held:
            del self.strata[trace_id]
            del self.ranks[trace_id]
