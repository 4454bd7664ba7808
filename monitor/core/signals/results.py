"""What the signals found, attached to each observation for the sinks."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import msgspec

from ragmon.monitor.core.model import Latency, Usage

if TYPE_CHECKING:
    from ragmon.monitor.core.signals.explain import Finding

MAX_IDS = 10  # ids kept per finding for alerts (docs/alerts.md: up to 10 trace and document ids)


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


@dataclass(slots=True)
class StaleFindings:
    """Passages served from an outdated document version, distinct passage ids per stage."""

    candidates: int = 0
    context: int = 0
    doc_ids: list[str] = field(default_factory=list)


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
    # which passages broke which rule, in words (signals/explain.py); empty when nothing fired
    findings: list[Finding] = field(default_factory=list, compare=False)

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


Signals = TraceSignals | FeedbackSignals | IndexSignals
