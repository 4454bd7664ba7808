"""Bounded memory of the turns of recent conversations, for the rewrite signal: hashes, never text.

Of each turn it keeps the content terms (hashes) of the user's message, of the queries its
retrievers searched and of its answer, and a hash and a length of the message's and the answer's
words in order (to tell a query that repeats the history word for word). At most
``per_conversation`` turns of at most ``conversations`` conversations, the least recently active
conversation forgotten first, as the rephrase memory forgets callers.

Tens of thousands of conversations are held, nearly all of one turn: each is one ``bytes`` of its
turns packed end to end (:data:`_RECORD` and the terms), keyed by a hash of the tenant and
conversation id, and unpacked only when a turn of it arrives. As :class:`Turn` structs, tuples and
a text key, a conversation of one turn took about 540 bytes; packed, about 260.
"""

from __future__ import annotations

import struct
import threading
from array import array
from collections import OrderedDict

import msgspec

TURNS_KEPT = 4  # per conversation: a follow-up leans on the turns just before it

# trace id hash, turn number (0: none; numbers start at 1, decode.py), time, message hash and
# words, answer hash and words (-1: no answer), how many terms follow (four bytes each)
_RECORD = struct.Struct("<qqdqIqiH")


class Turn(msgspec.Struct, frozen=True, gc=False):
    """What is remembered of one turn. ``terms``: its content terms as packed 32-bit hashes
    (``array("I")`` bytes: four bytes a term). ``message``, ``answer``: (hash of the words in
    order, how many words), see ``terms.spoken_words``; ``answer`` None when the turn had none.
    ``trace``: a hash of the trace id, to know the same trace seen again."""

    trace: int
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
    """The last turns of each recent conversation (key: tenant and conversation id, held as a
    64-bit hash: two conversations would share their turns only if their hashes collided, about
    once in 10^10 at 50,000 conversations). ``evicted`` counts the conversations forgotten for room."""

    def __init__(self, conversations: int, per_conversation: int = TURNS_KEPT) -> None:
        self._capacity = conversations
        self._per_conversation = per_conversation
        # per conversation its turns packed, oldest first: no object per turn for the collector
        self._turns: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def add(self, conversation: str, turn: Turn) -> tuple[Turn, ...]:
        """Remember ``turn`` and return the turns of the conversation held before it, oldest first.
        The same trace seen again (a retried batch) replaces its first sighting and is not an
        earlier turn of itself."""
        key = hash(conversation)
        with self._lock:
            packed = self._turns.get(key)
            held: tuple[Turn, ...] = ()
            if packed is not None:
                self._turns.move_to_end(key)
                held = tuple(t for t in _unpack(packed) if t.trace != turn.trace)
            before = _in_order(t for t in held if earlier(t, turn))
            kept = _in_order((*held, turn))[-self._per_conversation:]  # the oldest go first
            self._turns[key] = b"".join(_pack(t) for t in kept)
            if len(self._turns) > self._capacity:
                self._turns.popitem(last=False)
                self.evicted += 1
            return before

    def held(self, conversation: str) -> tuple[Turn, ...]:
        """The turns held of ``conversation``, oldest first."""
        with self._lock:
            packed = self._turns.get(hash(conversation))
        return () if packed is None else _unpack(packed)

    @property
    def full(self) -> int:
        """How many turns a conversation holds at most."""
        return self._per_conversation

    def __len__(self) -> int:
        return len(self._turns)


def _pack(turn: Turn) -> bytes:
    answer = turn.answer if turn.answer is not None else (0, -1)
    head = _RECORD.pack(turn.trace, turn.turn or 0, turn.time, *turn.message, *answer, len(turn.terms) // 4)
    return head + turn.terms


def _unpack(packed: bytes) -> tuple[Turn, ...]:
    turns = []
    offset = 0
    while offset < len(packed):
        trace, number, time, message, message_words, answer, answer_words, terms = _RECORD.unpack_from(packed, offset)
        offset += _RECORD.size
        end = offset + 4 * terms
        turns.append(Turn(trace, number or None, time, packed[offset:end], (message, message_words),
                          None if answer_words < 0 else (answer, answer_words)))
        offset = end
    return tuple(turns)


def _in_order(turns) -> tuple[Turn, ...]:
    """Oldest first: by turn number when every turn has one, else by time."""
    turns = tuple(turns)
    if len(turns) < 2:
        return turns
    if all(t.turn is not None for t in turns):
        return tuple(sorted(turns, key=lambda t: (t.turn, t.time)))
    return tuple(sorted(turns, key=lambda t: t.time))
