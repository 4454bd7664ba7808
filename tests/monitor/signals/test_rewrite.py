"""The rewrite signal: follow-up turns whose searched query kept nothing of the conversation, and
rewritten queries that are empty or the history word for word; its content terms and its memory."""

from __future__ import annotations

from ragmon.monitor.core.model import Answer, IndexRef, Retrieval, TraceEvent
from ragmon.monitor.core.signals.conversations import TURNS_KEPT
from ragmon.monitor.core.signals.rewrite import FollowUp, RewriteJudge, Rewritten
from ragmon.monitor.core.signals.terms import content_words

NOW = 1_796_000_000.0
FIRST = "How many vacation days carry over into the next year?"
FIRST_ANSWER = "Five days carry over."


def turn(trace_id: str, message: str, *searched: str | None, n: int | None = None, at: float = 0.0,
         conversation: str | None = "c-1", answer: str | None = None, tenant: str = "acme") -> TraceEvent:
    """A turn whose retrievals searched ``searched`` (None: the message itself), one list each."""
    return TraceEvent(trace_id=trace_id, time=NOW + at, query=message, index=IndexRef("policies"), tenant=tenant,
                      conversation_id=conversation, turn=n,
                      retrievals=[Retrieval(f"r{i}", [], q) for i, q in enumerate(searched or (None,))],
                      answer=None if answer is None else Answer(text=answer))


def first_turn(judge: RewriteJudge, **kwargs) -> None:
    assert judge.judge(turn("t1", FIRST, None, answer=FIRST_ANSWER, **kwargs)) is None


# --- content terms ---------------------------------------------------------------------------------


def test_content_terms_are_casefolded_words_without_english_stopwords_or_lone_characters():
    assert content_words("How many Vacation-days does Straße 5 carry over in 2026 for a 401k?") == [
        "vacation", "days", "strasse", "carry", "2026", "401k"]


def test_content_terms_of_scripts_without_spaces_are_pairs_of_characters():
    assert content_words("有給休暇は") == ["有給", "給休", "休暇", "暇は"]
    assert content_words("休") == ["休"]


# --- follow-ups -------------------------------------------------------------------------------------


def test_a_follow_up_whose_rewrite_keeps_an_entity_of_an_earlier_turn_is_kept():
    judge = RewriteJudge(100)
    first_turn(judge)
    found = judge.judge(turn("t2", "And for contractors?", "vacation policy for contractors", at=30))
    assert found is not None and found.follow_up is FollowUp.KEPT and found.lost == []
    assert found.rewritten == {Rewritten.OTHER: 1}


def test_a_follow_up_whose_rewrite_shares_no_term_with_the_message_or_earlier_turns_is_lost():
    judge = RewriteJudge(100)
    first_turn(judge)
    found = judge.judge(turn("t2", "And for contractors?", "What is the policy on it?", at=30))
    assert found is not None and found.follow_up is FollowUp.LOST and found.lost == ["r0"]
    assert (found.earlier_turns, found.earlier_terms) == (1, len(content_words(FIRST + " " + FIRST_ANSWER)))


def test_a_term_of_an_earlier_answer_or_search_counts_as_kept():
    judge = RewriteJudge(100)
    assert judge.judge(turn("t1", "Which plan fits me?", "health insurance plans", answer="The Gold plan.")) is not None
    assert judge.judge(turn("t2", "How much is it?", "price of gold", at=20)).follow_up is FollowUp.KEPT
    assert judge.judge(turn("t3", "Is it cheaper?", "insurance cost", at=40)).follow_up is FollowUp.KEPT


def test_one_search_of_several_that_lost_the_conversation_makes_the_turn_lost_and_is_named():
    judge = RewriteJudge(100)
    first_turn(judge)
    found = judge.judge(turn("t2", "And unused ones?", "unused vacation days", "office opening hours", None, at=30))
    assert found.follow_up is FollowUp.LOST and found.lost == ["r1"]
    assert found.rewritten == {Rewritten.OTHER: 2}


def test_a_follow_up_searched_as_typed_is_judged_by_the_message_it_searched():
    judge = RewriteJudge(100)
    first_turn(judge)
    assert judge.judge(turn("t2", "And for contractors?", None, at=30)).follow_up is FollowUp.KEPT
    # nothing of the conversation left to search with: lost, though nothing was rewritten
    found = judge.judge(turn("t3", "Why?", None, at=60))
    assert found.follow_up is FollowUp.LOST and found.rewritten == {}


def test_a_follow_up_whose_turn_before_was_never_seen_is_not_judged():
    judge = RewriteJudge(100)
    found = judge.judge(turn("t2", "And for contractors?", "What is the policy on it?", n=2))
    assert found.follow_up is FollowUp.HISTORY_UNSEEN and found.lost == []
    # turn 3 with only turn 1 held: the entity may be turn 2's
    judge.judge(turn("t1", FIRST, n=1, conversation="c-2"))
    found = judge.judge(turn("t3", "Does it apply?", "What is the policy on it?", n=3, conversation="c-2"))
    assert found.follow_up is FollowUp.HISTORY_UNSEEN
    # without a conversation, a numbered follow-up has no history to judge by
    assert judge.judge(turn("t9", "And then?", None, n=2, conversation=None)).follow_up is FollowUp.HISTORY_UNSEEN


def test_turn_numbers_order_the_turns_before_time_does():
    judge = RewriteJudge(100)
    # turn 2 arrives first, stamped later: it is not an earlier turn of turn 1
    assert judge.judge(turn("t2", "And for contractors?", "policy", n=2, at=30)).follow_up is FollowUp.HISTORY_UNSEEN
    assert judge.judge(turn("t1", FIRST, None, n=1)) is None
    found = judge.judge(turn("t3", "What about interns?", "policy", n=3, at=60))
    assert found.follow_up is FollowUp.KEPT and found.earlier_turns == 2


def test_a_first_turn_is_no_follow_up_and_only_its_rewrites_are_counted():
    judge = RewriteJudge(100)
    assert judge.judge(turn("t1", FIRST, None)) is None
    found = judge.judge(turn("h1", FIRST, "  ", conversation="c-2"))
    assert found.follow_up is None and found.rewritten == {Rewritten.EMPTY: 1} and found.empty == ["r0"]


def test_conversations_are_apart_per_tenant_and_id():
    judge = RewriteJudge(100)
    first_turn(judge)
    assert judge.judge(turn("t2", "And contractors?", "policy", at=30, tenant="globex")).follow_up is None
    assert judge.judge(turn("t3", "And contractors?", "policy", at=30, conversation="c-9")).follow_up is None


def test_a_turn_another_replica_judged_is_remembered_for_the_next():
    judge = RewriteJudge(100)
    judge.remember(turn("t1", FIRST, None, n=1, answer=FIRST_ANSWER))
    found = judge.judge(turn("t2", "And for contractors?", "What is the policy on it?", n=2, at=30))
    assert found.follow_up is FollowUp.LOST and found.earlier_turns == 1


def test_the_same_trace_again_is_not_its_own_earlier_turn():
    judge = RewriteJudge(100)
    first_turn(judge)
    first_turn(judge)


# --- rewritten queries -----------------------------------------------------------------------------


def test_an_empty_rewrite_is_counted_per_retrieval_and_loses_the_turn():
    judge = RewriteJudge(100)
    first_turn(judge)
    found = judge.judge(turn("t2", "And for contractors?", "", " ?! ", None, at=30))
    assert found.rewritten == {Rewritten.EMPTY: 2} and found.empty == ["r0", "r1"]
    assert found.follow_up is FollowUp.LOST and found.lost == ["r0", "r1"]


def test_a_rewrite_that_is_the_history_word_for_word_is_counted():
    judge = RewriteJudge(100)
    first_turn(judge)
    history = f"Human: {FIRST}\nAI: {FIRST_ANSWER}"
    found = judge.judge(turn("t2", "And for contractors?", history, f"{history}\nHuman: And for contractors?",
                             f"user: {FIRST.upper()}  assistant: {FIRST_ANSWER}", at=30))
    assert found.rewritten == {Rewritten.HISTORY: 3} and found.history == ["r0", "r1", "r2"]
    assert found.follow_up is FollowUp.KEPT


def test_a_rewrite_repeating_only_part_of_the_history_is_a_question():
    judge = RewriteJudge(100)
    first_turn(judge)
    # as many words as the history, other words
    same_length = " ".join(["contractors"] * len(f"{FIRST} {FIRST_ANSWER}".split()))
    found = judge.judge(turn("t2", "And for contractors?", FIRST, f"{FIRST_ANSWER} And for contractors?",
                             f"AI: {FIRST_ANSWER}", same_length, at=30))
    assert found.rewritten == {Rewritten.OTHER: 4} and found.history == []


def test_the_history_of_several_turns_and_of_turns_forgotten_is_the_history():
    judge = RewriteJudge(100)
    said = []
    for n in range(1, TURNS_KEPT + 3):
        message, answer = f"question number {n} about topic{n}", f"answer {n}"
        judge.judge(turn(f"t{n}", message, None, n=n, at=10 * n, answer=answer))
        said.append(f"Human: {message}\nAI: {answer}")
    last = TURNS_KEPT + 3
    # the whole history, though its first turns are forgotten
    found = judge.judge(turn("tz", "and?", "\n".join(said), n=last, at=10 * last))
    assert found.rewritten == {Rewritten.HISTORY: 1}
    # a turn of it missing is no history
    found = judge.judge(turn("ty", "and?", "\n".join(said[:-2] + said[-1:]), n=last, at=10 * last))
    assert found.rewritten == {Rewritten.OTHER: 1}


def test_words_before_a_short_history_are_not_the_history():
    judge = RewriteJudge(100)
    judge.judge(turn("t1", FIRST, None, n=1, answer=FIRST_ANSWER))
    found = judge.judge(turn("t2", "and?", f"Rephrase this: {FIRST} {FIRST_ANSWER}", n=2, at=30))
    assert found.rewritten == {Rewritten.OTHER: 1}


# --- memory ----------------------------------------------------------------------------------------


def test_the_memory_is_bounded_by_conversations_least_recently_active_first():
    judge = RewriteJudge(10)
    for i in range(25):
        judge.judge(turn(f"t{i}", FIRST, None, conversation=f"c-{i}"))
    assert len(judge.memory) == 10 and judge.memory.evicted == 15
    # a forgotten conversation's follow-up is not judged, a remembered one's is
    assert judge.judge(turn("x0", "And for contractors?", "policy", conversation="c-0", n=2, at=30)).follow_up \
        is FollowUp.HISTORY_UNSEEN
    assert judge.judge(turn("x24", "And for contractors?", "policy", conversation="c-24", n=2, at=30)).follow_up \
        is FollowUp.LOST


def test_the_memory_keeps_hashes_of_a_bounded_number_of_terms_per_turn():
    judge = RewriteJudge(10)
    judge.judge(turn("t1", " ".join(f"word{i}" for i in range(1000)), None, answer="secret-project"))
    held = judge.memory.held("acme\x00c-1")
    assert len(held) == 1 and len(held[0].term_hashes()) == 128
    assert b"word" not in held[0].terms and "word0" not in repr(held[0])
    assert len(judge.memory) == 1 and all(b"word" not in packed for packed in judge.memory._turns.values())
