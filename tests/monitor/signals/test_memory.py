"""Bounded memories: recent traces for the feedback join, and rephrase detection per caller."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragmon.monitor.core.signals.memory import MAX_TOKENS, RecentTraces, RephraseDetector, jaccard, question_tokens
from ragmon.monitor.core.signals.results import TraceRef

NOW = 1_796_000_000.0
QUESTION = "How many vacation days carry over?"


def ref(trace_id: str, time: float = NOW) -> TraceRef:
    return TraceRef(trace_id, "acme", "policies", time)


def detector(callers=100, per_caller=8) -> RephraseDetector:
    return RephraseDetector(120.0, 0.6, callers, per_caller)


# --- tokens and similarity -------------------------------------------------------------------------


def words(*tokens: str) -> tuple[int, ...]:
    return tuple(hash(t) for t in tokens)


def test_question_tokens_are_lower_cased_words_without_punctuation():
    assert question_tokens("How many vacation-days carry over?? How") == words(
        "how", "many", "vacation", "days", "carry", "over")


def test_question_tokens_fold_case_beyond_ascii():
    assert question_tokens("STRASSE Straße") == words("strasse")


def test_question_tokens_keep_a_bounded_number_of_words():
    long_question = " ".join(f"word{i}" for i in range(10_000))
    assert question_tokens(long_question) == words(*(f"word{i}" for i in range(MAX_TOKENS)))


def test_a_caller_is_judged_by_its_own_time_not_by_a_partition_running_ahead():
    """Two partitions at their own pace: one already at NOW + 1000 must not make the other's
    callers forgotten; their rephrases, within the window of their own questions, are found."""
    detector = RephraseDetector(window_seconds=120, min_jaccard=0.6, callers=1000)
    for i in range(100):
        detector.check(f"caller-{i}", TraceRef(f"t{i}", "acme", "policies", NOW + i), QUESTION)
    detector.check("ahead", TraceRef("t-ahead", "acme", "policies", NOW + 1000), QUESTION)
    assert len(detector) == 101
    again = detector.check("caller-7", TraceRef("t7-again", "acme", "policies", NOW + 60), QUESTION + " please")
    assert again is not None and again.trace_id == "t7"
    # a caller's own question outside the window is no rephrase
    assert detector.check("caller-8", TraceRef("t8-late", "acme", "policies", NOW + 500), QUESTION) is None


def test_memory_is_bounded_by_the_callers_least_recently_active_first():
    detector = RephraseDetector(window_seconds=120, min_jaccard=0.6, callers=10)
    for i in range(25):
        detector.check(f"caller-{i}", TraceRef(f"t{i}", "acme", "policies", NOW + i), QUESTION)
    assert len(detector) == 10
    assert detector.check("caller-2", TraceRef("t2-again", "acme", "policies", NOW + 30), QUESTION) is None


def test_question_tokens_of_empty_or_punctuation_only_text():
    assert question_tokens("") == ()
    assert question_tokens("?!... --") == ()


def test_jaccard_values():
    a = frozenset({"a", "b", "c", "d"})
    assert jaccard(a, frozenset({"a", "b", "c", "e"})) == 0.6
    assert jaccard(a, frozenset({"a", "b"})) == 0.5
    assert jaccard(a, frozenset({"x"})) == 0.0
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset(), a) == 0.0


@given(st.frozensets(st.sampled_from("abcdefgh")), st.frozensets(st.sampled_from("abcdefgh")))
def test_jaccard_is_symmetric_bounded_and_one_only_for_equal_sets(a, b):
    value = jaccard(a, b)
    assert value == jaccard(b, a)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == (a == b)


# --- RecentTraces ----------------------------------------------------------------------------------


def test_recent_traces_are_found_by_id():
    recent = RecentTraces(3)
    recent.remember(ref("t1"))
    assert recent.get("t1") == ref("t1")
    assert recent.get("t2") is None
    assert len(recent) == 1


def test_the_oldest_trace_is_evicted_beyond_capacity():
    recent = RecentTraces(2)
    for trace_id in ("t1", "t2", "t3"):
        recent.remember(ref(trace_id))
    assert [recent.get(t) for t in ("t1", "t2", "t3")] == [None, ref("t2"), ref("t3")]
    assert (len(recent), recent.evicted) == (2, 1)


def test_remembering_the_same_trace_again_does_not_evict():
    recent = RecentTraces(2)
    recent.remember(ref("t1"))
    recent.remember(ref("t2"))
    recent.remember(ref("t2", NOW + 1))
    assert (len(recent), recent.evicted) == (2, 0)
    assert recent.get("t2") == ref("t2", NOW + 1)


@given(st.lists(st.sampled_from([f"t{i}" for i in range(12)]), max_size=40), st.integers(min_value=1, max_value=5))
def test_recent_traces_hold_at_most_capacity(trace_ids, capacity):
    recent = RecentTraces(capacity)
    for trace_id in trace_ids:
        recent.remember(ref(trace_id))
    assert len(recent) == min(capacity, len(set(trace_ids)))
    if trace_ids:
        assert recent.get(trace_ids[-1]) == ref(trace_ids[-1])


# --- RephraseDetector ------------------------------------------------------------------------------


def test_first_question_is_not_a_rephrase():
    assert detector().check("u-1", ref("t1"), QUESTION) is None


def test_same_caller_similar_question_within_the_window_is_a_rephrase_of_the_earlier_trace():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-1", ref("t2", NOW + 30), "how many vacation days carry over to next year") == ref("t1")


def test_jaccard_exactly_at_the_threshold_is_a_rephrase_and_just_below_is_not():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), "alpha beta gamma delta")
    assert rephrases.check("u-1", ref("t2", NOW + 1), "alpha beta gamma epsilon") == ref("t1")  # 3/5 = 0.6
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), "alpha beta gamma")
    assert rephrases.check("u-1", ref("t2", NOW + 1), "alpha beta delta") is None  # 2/4 = 0.5


def test_exactly_at_the_window_is_a_rephrase_and_after_it_is_not():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-1", ref("t2", NOW + 120), QUESTION) == ref("t1")
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-1", ref("t2", NOW + 120.5), QUESTION) is None


def test_a_question_arriving_with_an_earlier_time_is_not_a_rephrase():
    rephrases = detector()
    rephrases.check("u-1", ref("t2", NOW), QUESTION)
    assert rephrases.check("u-1", ref("t1", NOW - 10), QUESTION) is None


def test_another_caller_asking_the_same_is_not_a_rephrase():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-2", ref("t2", NOW + 5), QUESTION) is None


def test_a_redelivered_trace_is_not_a_rephrase_of_itself():
    rephrases = detector()
    assert rephrases.check("u-1", ref("t1"), QUESTION) is None
    assert rephrases.check("u-1", ref("t1"), QUESTION) is None


def test_a_redelivered_rephrase_is_reported_once():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-1", ref("t2", NOW + 10), QUESTION) == ref("t1")
    assert rephrases.check("u-1", ref("t2", NOW + 10), QUESTION) is None
    assert rephrases.check("u-1", ref("t3", NOW + 20), QUESTION) == ref("t2", NOW + 10)


def test_the_most_recent_similar_question_is_the_one_rephrased():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    rephrases.check("u-1", ref("t2", NOW + 10), "Where is the parking garage?")
    assert rephrases.check("u-1", ref("t3", NOW + 20), QUESTION) == ref("t1")
    assert rephrases.check("u-1", ref("t4", NOW + 30), QUESTION.lower()) == ref("t3", NOW + 20)


def test_an_unrelated_question_is_not_a_rephrase():
    rephrases = detector()
    rephrases.check("u-1", ref("t1"), QUESTION)
    assert rephrases.check("u-1", ref("t2", NOW + 10), "Where is the parking garage?") is None


def test_callers_are_bounded_and_the_least_recently_active_is_forgotten():
    rephrases = detector(callers=2)
    rephrases.check("a", ref("a1"), QUESTION)
    rephrases.check("b", ref("b1"), QUESTION)
    rephrases.check("a", ref("a2", NOW + 1), "Where is the parking garage?")  # a is now the most recent
    rephrases.check("c", ref("c1"), QUESTION)  # b is forgotten
    assert rephrases.check("a", ref("a3", NOW + 3), QUESTION) == ref("a1")
    assert rephrases.check("b", ref("b2", NOW + 2), QUESTION) is None  # b starts over and pushes out c
    assert rephrases.check("c", ref("c2", NOW + 4), QUESTION) is None


def test_only_the_last_per_caller_questions_are_remembered():
    rephrases = detector(per_caller=2)
    rephrases.check("u-1", ref("t1"), QUESTION)
    rephrases.check("u-1", ref("t2", NOW + 1), "Where is the parking garage?")
    rephrases.check("u-1", ref("t3", NOW + 2), "Who approves travel expenses?")
    assert rephrases.check("u-1", ref("t4", NOW + 3), QUESTION) is None
