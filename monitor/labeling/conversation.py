"""A sample's conversation (docs/sampling.md, "Conversation samples"): the redacted summary of one
chat turn, kept for the samples of the turns after it, and the bounded history a sample carries.

Pure: the table the summaries are kept in is ``monitor/labeling/turn_store.py``.

Why a table of redacted summaries, written for every turn of a conversation, rather than the
sampler's held records: with OTLP behind a load balancer the turns of one conversation land on
different replicas, and the replica that samples turn 3 may never have seen turns 1 and 2; only
what the database holds is shared, and it may hold nothing unredacted. So each turn is redacted
once, when its batch is flushed, whether or not a later turn is ever sampled. That cost is paid by
traces with a ``conversation_id`` only, and is bounded: the message, the searched queries and the
answer (no passage text), each cut to :data:`MAX_TEXT_CHARS` after redaction (cutting before
could split a secret in two halves that no detector recognizes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.labeling.redact import Redactor

#: Characters kept of each redacted text of a turn (message, searched query, answer).
MAX_TEXT_CHARS = 2_000
#: Searched queries kept per turn (a multi-query retriever may search many rewrites).
MAX_SEARCHED = 4
CUT = "…"  # ends a text that was cut


def searched_of(message: str, queries: Iterable[str | None]) -> list[str]:
    """The distinct searched queries, in their order, other than the user's ``message`` (a
    retrieval without a query of its own searched the message)."""
    seen: list[str] = []
    for query in queries:
        if query is not None and query != message and query not in seen:
            seen.append(query)
    return seen


def clip(text: str) -> str:
    """``text`` cut to :data:`MAX_TEXT_CHARS` characters, :data:`CUT` marking a cut."""
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS - len(CUT)] + CUT


def turn_of(redactor: Redactor, trace: TraceEvent, conversation_pseudonym: Callable[[str], str] | None = None,
            caller_pseudonym: Callable[[str], str] | None = None) -> dict[str, Any] | None:
    """The redacted summary of a chat turn, as a row of the turn table (but ``recorded_at`` and
    ``caller_key_id``), or None for a trace without a conversation. Ids are keyed as in the trace's
    sample: the shown trace id and tenant, the conversation's and the caller's pseudonyms (by the
    redactor's, or the given functions: the sampler's, which remember recent ones)."""
    if trace.conversation_id is None:
        return None
    conversation_pseudonym = conversation_pseudonym or redactor.pseudonymize_conversation
    caller_pseudonym = caller_pseudonym or redactor.pseudonymize_caller
    message = redactor.redact(trace.query)
    searched = searched_of(message, (None if r.query is None else redactor.redact(r.query) for r in trace.retrievals))
    answer = trace.answer.text if trace.answer is not None else None
    caller = trace.caller.id if trace.caller is not None else None
    return {"trace_id": redactor.shown_id(trace.trace_id), "tenant": redactor.shown_id(trace.tenant),
            "conversation": conversation_pseudonym(trace.conversation_id),
            "caller": "" if caller is None else caller_pseudonym(caller),
            "turn": trace.turn, "time": trace.time, "message": clip(message),
            "searched": [clip(s) for s in searched[:MAX_SEARCHED]],
            "answer": None if answer is None else clip(redactor.redact(answer))}


def is_earlier(turn: int | None, time: float, than_turn: int | None, than_time: float) -> bool:
    """Whether a turn came before the graded one: by turn number when both have one, else by time."""
    if turn is not None and than_turn is not None:
        return turn < than_turn
    return time < than_time


def order_key(turn: int | None, time: float, trace_id: str) -> tuple[int, float, str]:
    """Turns ordered by number, then time: a turn without a number by its time alone, as if it
    were numbered alike (a conversation's turns carry numbers all or none)."""
    return (turn or 0, time, trace_id)


def bounded_history(turns: Sequence[dict[str, Any]], max_turns: int, max_bytes: int) -> list[dict[str, Any]]:
    """The newest ``max_turns`` of ``turns`` (oldest first, as given), fewer while their JSON
    exceeds ``max_bytes``: the turns nearest the graded one are the ones that explain it."""
    kept = list(turns[-max_turns:]) if max_turns > 0 else []
    sizes = [len(json.dumps(turn, ensure_ascii=False).encode()) + 1 for turn in kept]
    total = sum(sizes) + 1
    while kept and total > max_bytes:
        total -= sizes.pop(0)
        kept.pop(0)
    return kept
