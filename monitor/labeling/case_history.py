"""A regression case's conversation (docs/evaluation.md): the turns before the graded one, the
graded turn's own number, and what its retrievers searched, taken from the sample the case came from.

A sample keeps each earlier turn as ``{"turn", "time", "trace_id", "message", "searched",
"answer"}``, bounded and redacted already (docs/sampling.md). A case keeps what a candidate
system needs to be asked the same question in the same conversation: ``{"message", "answer"?,
"searched"?}`` per earlier turn, oldest first. Nothing is redacted or cut again here; the shape is
checked, and a wrong one is a ``ValueError`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmon.monitor.core.model import MAX_TURN

#: Fields of a case that say where it sits in its conversation (absent: a first turn, or unknown).
CONVERSATION_KEYS = ("history", "turn", "searched")


def case_history(value: Any, where: str = "history") -> list[dict[str, Any]]:
    """The earlier turns in the case's shape, from a sample's (or a case's) ``history`` list."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"`{where}` is not a list of turns")
    turns = []
    for number, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}[{number}] is not an object")
        message = entry.get("message")
        if not isinstance(message, str):
            raise ValueError(f"{where}[{number}]: `message` is missing or not text")
        turn: dict[str, Any] = {"message": message}
        answer = entry.get("answer")
        if answer is not None:
            if not isinstance(answer, str):
                raise ValueError(f"{where}[{number}]: `answer` is not text")
            turn["answer"] = answer
        searched = searched_queries(entry.get("searched"), f"{where}[{number}].searched")
        if searched:
            turn["searched"] = searched
        turns.append(turn)
    return turns


def searched_queries(value: Any, where: str = "searched") -> list[str]:
    """A list of searched queries (the rewrites beside the user's message), checked."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(query, str) for query in value):
        raise ValueError(f"`{where}` is not a list of texts")
    return list(value)


def case_turn(value: Any, where: str = "turn") -> int | None:
    """The graded turn's number in its conversation (1 for the first), or None when not known."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TURN:
        raise ValueError(f"`{where}` is {value!r}, not a whole number from 1 to {MAX_TURN}")
    return value


def conversation(*sources: Mapping[str, Any] | None) -> dict[str, Any]:
    """The case's ``history``, ``turn`` and ``searched``, each from the first source that has it
    (a Label Studio task's data, then the case it carries): keys that are empty or unknown are
    left out, so a first turn's case looks as it did before conversations were kept."""
    found = {key: next((s[key] for s in sources if s is not None and s.get(key) is not None), None)
             for key in CONVERSATION_KEYS}
    out: dict[str, Any] = {}
    history = case_history(found["history"])
    if history:
        out["history"] = history
    turn = case_turn(found["turn"])
    if turn is not None:
        out["turn"] = turn
    searched = searched_queries(found["searched"])
    if searched:
        out["searched"] = searched
    return out
