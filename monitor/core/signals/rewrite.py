"""The rewrite signal (docs/signals.md, "Rewrite"): did the query each retriever searched keep
something of the conversation, and is a rewritten query a question at all?

A chat condenses a follow-up ("and for contractors?") with its history into the query it searches.
A condense step that drops the entity the conversation is about searches for something else, and
nothing else in the trace shows it. Per trace:

- a **follow-up** is a turn of a conversation the monitor saw an earlier turn of, or one whose
  ``turn`` is above 1. It is ``lost`` when a query it searched (each retrieval's
  ``Retrieval.searched``) shares no content term (``terms.py``) with the user's message nor with the
  earlier turns held (their messages, searched queries and answers), else ``kept``. A follow-up whose
  turn just before it the monitor does not hold (it never saw it, or forgot it) is
  ``history_unseen``: not judged, since an entity of that turn could not be looked for. One that
  searched nothing is ``no_retrieval``.
- a **rewritten query** is a retrieval's own ``query`` when it differs from the user's message. It is
  ``empty`` when it holds no word, ``history`` when it is the earlier turns held, word for word
  (the speakers' tags aside, the current message possibly after them: the condense step returned its
  history), else ``other``. Counted per retrieval, on any turn.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.signals.conversations import ConversationMemory, Turn
from ragmon.monitor.core.signals.explain import Finding, FindingSignal
from ragmon.monitor.core.signals.results import TraceRef
from ragmon.monitor.core.signals.terms import MAX_TERMS, ROLE_WORDS, STOPWORDS, content_words, is_content, words


class FollowUp(StrEnum):
    """What a follow-up turn's searches kept of the conversation (the ``outcome`` label)."""

    KEPT = "kept"
    LOST = "lost"
    HISTORY_UNSEEN = "history_unseen"  # not judged: the turn before it was never seen, or forgotten
    NO_RETRIEVAL = "no_retrieval"


class Rewritten(StrEnum):
    """What a retrieval's rewritten query was (the ``outcome`` label)."""

    EMPTY = "empty"
    HISTORY = "history"
    OTHER = "other"


@dataclass(slots=True)
class RewriteFindings:
    """The rewrite signal of one trace. ``follow_up``: None for a first turn. ``rewritten``: the
    retrievals that searched a rewrite of the message, by outcome. ``lost``, ``empty``,
    ``history``: the retrievers behind each (distinct, in list order). ``earlier_turns`` and
    ``earlier_terms``: the turns held before this one and their distinct content terms."""

    follow_up: FollowUp | None = None
    rewritten: dict[Rewritten, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    earlier_turns: int = 0
    earlier_terms: int = 0


class _Text:
    """A text's words, worked out once: whether it has any, its content terms (hashes) and its
    words without the speakers' tags (what a history formatted as text and the turns it was made
    of have in common)."""

    __slots__ = ("empty", "spoken", "terms")

    def __init__(self, text: str) -> None:
        found = words(text)
        self.empty = not found
        self.spoken = tuple(w for w in found if w not in ROLE_WORDS)
        # is_content, inlined (this runs for every message, query and answer); a term is held as a
        # 32-bit hash, never text: a collision can only make a lost rewrite look kept
        self.terms = tuple({hash(w) & 0xFFFF_FFFF: None for w in found
                            if (len(w) > 1 and w not in STOPWORDS) or (len(w) == 1 and is_content(w))})


class RewriteJudge:
    """Judges each trace's searched queries against the conversation's earlier turns, and
    remembers its turn (:class:`ConversationMemory`, at most ``conversations`` conversations)."""

    def __init__(self, conversations: int) -> None:
        self.memory = ConversationMemory(conversations)

    def judge(self, trace: TraceEvent) -> RewriteFindings | None:
        """The trace's rewrite signal, None when it is a first turn that searched no rewrite."""
        message = _Text(trace.query)
        rewrites = [(r.retriever, r.query) for r in trace.retrievals if r.query is not None and r.query != trace.query]
        texts = {query: _Text(query) for _, query in rewrites}
        earlier = self._remember(trace, message, texts)
        follow_up = bool(earlier) or (trace.turn is not None and trace.turn > 1)
        if not follow_up and not rewrites:
            return None
        found = RewriteFindings(earlier_turns=len(earlier))
        for retriever, query in rewrites:
            text = texts[query]
            if text.empty:
                outcome, names = Rewritten.EMPTY, found.empty
            elif earlier and _repeats_history(text.spoken, message.spoken, earlier, self.memory.full):
                outcome, names = Rewritten.HISTORY, found.history
            else:
                outcome, names = Rewritten.OTHER, None
            found.rewritten[outcome] = found.rewritten.get(outcome, 0) + 1
            if names is not None and retriever not in names:
                names.append(retriever)
        if not follow_up:
            return found
        if not _holds_turn_before(trace, earlier):
            found.follow_up = FollowUp.HISTORY_UNSEEN
            return found
        if not trace.retrievals:
            found.follow_up = FollowUp.NO_RETRIEVAL
            return found
        conversation = set(message.terms)
        for turn in earlier:
            conversation.update(turn.term_hashes())
        found.earlier_terms = len(conversation.difference(message.terms))
        for retrieval in trace.retrievals:
            searched = message if retrieval.query is None or retrieval.query == trace.query else texts[retrieval.query]
            if conversation.isdisjoint(searched.terms) and retrieval.retriever not in found.lost:
                found.lost.append(retrieval.retriever)
        found.follow_up = FollowUp.LOST if found.lost else FollowUp.KEPT
        return found

    def remember(self, trace: TraceEvent) -> None:
        """Take in a turn another replica already judged (its memory only)."""
        self._remember(trace, _Text(trace.query),
                       {r.query: _Text(r.query) for r in trace.retrievals if r.query is not None})

    def _remember(self, trace: TraceEvent, message: _Text, rewrites: dict[str, _Text]) -> tuple[Turn, ...]:
        """Remember the trace's turn; the turns of its conversation held before it, oldest first."""
        if not trace.conversation_id:
            return ()
        answer = trace.answer.text if trace.answer is not None and trace.answer.text else None
        answered = _Text(answer) if answer is not None else None
        terms = dict.fromkeys(message.terms)
        for text in (*rewrites.values(), *((answered,) if answered is not None else ())):
            terms.update(dict.fromkeys(text.terms))
        turn = Turn(hash(trace.trace_id), trace.turn, trace.time, array("I", list(terms)[:MAX_TERMS]).tobytes(),
                    (hash(message.spoken), len(message.spoken)),
                    None if answered is None else (hash(answered.spoken), len(answered.spoken)))
        return self.memory.add(f"{trace.tenant}\x00{trace.conversation_id}", turn)


def _holds_turn_before(trace: TraceEvent, earlier: Sequence[Turn]) -> bool:
    """Whether the turn just before this one is held: turn n - 1 for a numbered turn (a turn held
    without a number, before it in time, stands for it), any earlier turn otherwise."""
    if not earlier:
        return False
    if trace.turn is None:
        return True
    return any(t.turn is None or t.turn == trace.turn - 1 for t in earlier)


def _repeats_history(query: tuple[str, ...], message: tuple[str, ...], earlier: Sequence[Turn], full: int) -> bool:
    """Whether ``query`` (spoken words) is the earlier turns held, each whole (its message, then
    its answer when it had one), oldest first, possibly followed by the current message. When the
    memory is full and the oldest held turn is not the first, words before them are taken as turns
    forgotten."""
    end = len(query)
    if message and end > len(message) and query[end - len(message):] == message:
        end -= len(message)
    for turn in reversed(earlier):
        for part in (turn.answer, turn.message):
            if part is None or part[1] == 0:
                continue
            digest, length = part
            if length > end or hash(query[end - length:end]) != digest:
                return False
            end -= length
        if end == 0:
            return True
    return len(earlier) >= full and earlier[0].turn != 1


def rewrite_findings(ref: TraceRef, found: RewriteFindings, trace: TraceEvent) -> list[Finding]:
    """The rewrite signal's findings of a trace, in words: which retriever searched what kind of
    query, and for a lost follow-up, the message's terms it dropped (named redacted, by the
    findings sink) and how many terms of the earlier turns (held as hashes: counted only)."""
    findings = []
    if found.follow_up is FollowUp.LOST:
        message = content_words(trace.query)
        dropped = "the message's terms {lost}" if message else "the message (it holds no content term)"
        findings.append(Finding(
            FindingSignal.LOST_IN_REWRITE, ref,
            f"the query retriever {{retriever}} searched{_others(found.lost)} shares no content term with the "
            f"conversation: it keeps none of {dropped}, nor any of the {found.earlier_terms} other term(s) of the "
            f"{found.earlier_turns} earlier turn(s) ragmon holds",
            ids={"retriever": found.lost[0]}, words={"lost": (trace.query, frozenset(message))} if message else {}))
    if found.empty:
        findings.append(Finding(
            FindingSignal.EMPTY_REWRITE, ref,
            f"retriever {{retriever}}{_others(found.empty)} searched a rewrite of the message that holds no word",
            ids={"retriever": found.empty[0]}))
    if found.history:
        findings.append(Finding(
            FindingSignal.HISTORY_REWRITE, ref,
            f"retriever {{retriever}}{_others(found.history)} searched the {found.earlier_turns} earlier turn(s) "
            "word for word instead of a question written from them: the condense step returned its history",
            ids={"retriever": found.history[0]}))
    return findings


def _others(retrievers: list[str]) -> str:
    return f" (and {len(retrievers) - 1} other list(s))" if len(retrievers) > 1 else ""
