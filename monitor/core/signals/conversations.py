"""Bounded memory of the turns of recent conversations, for the rewrite signal: hashes, never text.

Of each turn it keeps the content terms (hashes) of the user's message, of the queries its
retrievers searched and of its answer, and a hash and a length of the message's and the answer's
words in order (to tell a query that repeats the history word for word). At most
``per_conversation`` turns of at most ``conversations`` conversations, the least recently active
conversation forgotten first, as the rephrase memory forgets callers.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict

import msgspec

TURNS_KEPT = 4  # per conversation: a follow-up leans on the turns just before it


class Turn(msgspec.Struct, frozen=True, gc=False):
    """What is remembered of one turn. ``terms``: its content terms as packed 32-bit hashes
    (``array("I")`` bytes: four bytes a term). ``message``, ``answer``: (hash of the words in
    order, how many words), see ``terms.spoken_words``; ``answer`` None when the turn had none."""

    trace_id: str
    turn: int | None
    time: float
    terms: bytes
    message: tuple[int, int]
    answer: tuple[int, int] | None

    def term_hashes(self) -> array:
        hashes = array("I")
        hashes.frombytes(self.terms)
        return hashes


def earlier(turn: Turn, than: Turn) -> bool:
    """Whether ``turn`` came before ``than``: by turn number when both have one, else by time."""
    if turn.turn is not None and than.turn is not None:
        return turn.turn < than.turn
    return turn.time < than.time


class ConversationMemory:
    """The last turns of each recent conversation (key: tenant and conversation id).
    ``evicted`` counts the conversations forgotten for room."""

    def __init__(self, conversations: int, per_conversation: int = TURNS_KEPT) -> None:
        self._capacity = conversations
        self._per_conversation = per_conversation
        # per conversation a tuple of turns in the order they came: untracked by the garbage collector
        self._turns: OrderedDict[str, tuple[Turn, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def add(self, conversation: str, turn: Turn) -> tuple[Turn, ...]:
        """Remember ``turn`` and return the turns of the conversation held before it, oldest first.
        The same trace seen again (a retried batch) replaces its first sighting and is not an
        earlier turn of itself."""
        with self._lock:
            held = self._turns.get(conversation, ())
            if held:
                self._turns.move_to_end(conversation)
                held = tuple(t for t in held if t.trace_id != turn.trace_id)
            before = _in_order(t for t in held if earlier(t, turn))
            kept = _in_order((*held, turn))
            if len(kept) > self._per_conversation:  # the oldest go first
                kept = kept[-self._per_conversation:]
            self._turns[conversation] = kept
            if len(self._turns) > self._capacity:
                self._turns.popitem(last=False)
                self.evicted += 1
            return before

    @property
    def full(self) -> int:
        """How many turns a conversation holds at most."""
        return self._per_conversation

    def __len__(self) -> int:
        return len(self._turns)


def _in_order(turns) -> tuple[Turn, ...]:
    """Oldest first: by turn number when every turn has one, else by time."""
    turns = tuple(turns)
    if len(turns) < 2:
        return turns
    if all(t.turn is not None for t in turns):
        return tuple(sorted(turns, key=lambda t: (t.turn, t.time)))
    return tuple(sorted(turns, key=lambda t: t.time))
