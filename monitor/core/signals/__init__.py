"""Online signals (docs/signals.md): small functions over one trace, plus the bounded state some of them
need (score baselines, recent callers, recent traces), joined by :class:`SignalEngine`."""

from ragmon.monitor.core.signals.engine import SignalEngine
from ragmon.monitor.core.signals.results import (
    AccessFindings,
    FeedbackSignals,
    IndexSignals,
    Outcome,
    RetrievalFinding,
    Signals,
    StaleFindings,
    TraceRef,
    TraceSignals,
)

__all__ = [
    "AccessFindings", "FeedbackSignals", "IndexSignals", "Outcome", "RetrievalFinding", "SignalEngine",
    "Signals", "StaleFindings", "TraceRef", "TraceSignals",
]
