"""What the signals found, attached to each observation for the sinks."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import msgspec

from ragmon.monitor.core.model import Latency, Usage

if TYPE_CHECKING:
    from ragmon.monitor.core.signals.explain import Finding
    from ragmon.monitor.core.signals.rewrite import RewriteFindings

MAX_IDS = 10  # ids kept per finding for alerts (docs/alerts.md: up to 10 trace and document ids)
STAGES = ("candidates", "context")


class Check(StrEnum):
    """The passage-level checks whose coverage is counted (the ``check`` label)."""

    ACCESS = "access"
    FRESHNESS = "freshness"


class Unjudged(StrEnum):
    """Why a served passage could not be judged by a check: a closed set (the ``reason`` label)."""

    # the catalog does not know its document, and the passage carries nothing to judge it by
    UNKNOWN_DOCUMENT = "unknown_document"
    NO_ACL = "no_acl"  # the catalog knows its document but holds no ACL for it, and the passage has none
    NO_VERSION = "no_version"  # the catalog knows its document, but not which version was served


#: The reasons each check can give (the label combinations ``ragmon_passages_unjudged_total`` has).
REASONS: dict[Check, tuple[Unjudged, ...]] = {
    Check.ACCESS: (Unjudged.UNKNOWN_DOCUMENT, Unjudged.NO_ACL),
    Check.FRESHNESS: (Unjudged.UNKNOWN_DOCUMENT, Unjudged.NO_VERSION),
}


@dataclass(slots=True)
class Coverage:
    """What one check could judge of a trace's served passages, as distinct passage ids: judged
    per stage, not judged per stage and reason, and over the whole trace (any stage: ``served``,
    ``served_unjudged`` and ``reasons``). ``examples``: (passage id, its document or None, reason) of the first
    :data:`MAX_IDS` passages not judged, those of the context first."""

    judged: dict[str, int] = field(default_factory=dict)
    unjudged: dict[tuple[str, Unjudged], int] = field(default_factory=dict)
    served: int = 0
    served_unjudged: int = 0
    reasons: dict[Unjudged, int] = field(default_factory=dict)  # passages not judged (any stage) per reason
    examples: list[tuple[str, str | None, Unjudged]] = field(default_factory=list)


class Outcome(StrEnum):
    ANSWERED = "answered"
    ABSTAINED = "abstained"
    EMPTY_CONTEXT = "empty_context"
    UNKNOWN = "unknown"  # the trace carries no answer


class TraceRef(msgspec.Struct, frozen=True, gc=False):
    """The little that is remembered of a recent trace, to join late signals to it.

    Hundreds of thousands are held (recent traces, rephrase memory): ``gc=False`` keeps them out
    of the cyclic garbage collector's scans, which they cannot be part of (strings and a float)."""

    trace_id: str
    tenant: str
    index: str
    time: float


@dataclass(slots=True)
class AccessFindings:
    """Permission violations as distinct passage ids per stage, and ACL coverage."""

    candidates: int = 0
    context: int = 0
    unknown_acl: int = 0
    doc_ids: list[str] = field(default_factory=list)  # documents behind violations, at most MAX_IDS
    context_doc_ids: list[str] = field(default_factory=list, compare=False)  # those that reached the model
    coverage: Coverage = field(default_factory=Coverage, compare=False)  # which passages could be judged
    flagged: frozenset[str] = field(default=frozenset(), compare=False)  # the violating passage ids, any stage


@dataclass(slots=True)
class StaleFindings:
    """Passages served from an outdated document version, distinct passage ids per stage."""

    candidates: int = 0
    context: int = 0
    doc_ids: list[str] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage, compare=False)  # which passages could be judged
    flagged: frozenset[str] = field(default=frozenset(), compare=False)  # the stale passage ids, any stage


@dataclass(slots=True, frozen=True)
class RetrievalFinding:
    retriever: str
    top_score: float | None  # None: empty list or no scores
    low: bool
    empty: bool
    keyword: bool
    # for a low score: the limit it fell below, and whether that is a configured threshold (else
    # the trailing percentile); words for the findings, not part of what the signal is
    limit: float | None = field(default=None, compare=False)
    configured: bool = field(default=False, compare=False)
    # judged while its (index, retriever) pair had too few scores for a percentile: never low
    warming: bool = field(default=False, compare=False)


@dataclass(slots=True)
class TraceSignals:
    tenant: str
    index: str
    has_caller: bool  # False: no caller id nor groups, permission checks saw only the tenant
    outcome: Outcome
    access: AccessFindings
    stale: StaleFindings
    retrievals: list[RetrievalFinding]
    duplicate_passages: int
    duplicate_doc_versions: int
    mixed_embeddings: bool
    unsupported_citations: int
    rephrase_of: TraceRef | None
    latency: Latency | None
    usage: Usage | None
    # what the searched queries kept of the conversation (signals/rewrite.py); None: a first turn
    # that searched no rewrite, or a trace of no conversation
    rewrite: RewriteFindings | None = None
    # which passages broke which rule, in words (signals/explain.py); empty when nothing fired
    findings: list[Finding] = field(default_factory=list, compare=False)
    # catalog events this trace showed to be suspicious (signals/catalog_audit.py), by reason
    suspicious: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def empty_keyword_side(self) -> bool:
        return any(r.keyword and r.empty for r in self.retrievals)

    @property
    def low_score(self) -> bool:
        return any(r.low for r in self.retrievals)


@dataclass(slots=True, frozen=True)
class FeedbackSignals:
    trace: TraceRef | None  # None: the trace is not (or no longer) among the recent ones
    kind: str
    value: str | None


@dataclass(slots=True, frozen=True)
class IndexSignals:
    index: str
    lag_seconds: float | None  # source change to indexed, when the catalog knows the change


@dataclass(slots=True)
class LateSignals:
    """Leaks and stale passages of a trace judged earlier, found when the catalog changed after
    it (``signals/late.py``): only the passages found now, per stage, and their findings, whose
    words say they were found late."""

    tenant: str
    index: str
    access: AccessFindings
    stale: StaleFindings
    findings: list[Finding] = field(default_factory=list, compare=False)


@dataclass(slots=True, frozen=True)
class CatalogSignals:
    """A document event accepted but suspicious (``signals/catalog_audit.py``), by reason."""

    suspicious: dict[str, int]


Signals = TraceSignals | FeedbackSignals | IndexSignals | LateSignals | CatalogSignals
