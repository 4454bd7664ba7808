"""No-answer: did the system answer, abstain, answer from an empty context, or not say?"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.results import Outcome


def compile_refusals(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One case-insensitive alternation of the configured refusal patterns."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


def answer_outcome(trace: TraceEvent, refusals: re.Pattern[str] | None) -> Outcome:
    """The explicit ``abstained`` flag first, then the refusal patterns on the text, then an
    empty context; otherwise answered. No answer at all is ``unknown``."""
    answer = trace.answer
    if answer is None:
        return Outcome.UNKNOWN
    if answer.abstained:
        return Outcome.ABSTAINED
    if answer.abstained is None and answer.text and refusals is not None and refusals.search(answer.text):
        return Outcome.ABSTAINED
    if not trace.final_context():
        return Outcome.EMPTY_CONTEXT
    return Outcome.ANSWERED
