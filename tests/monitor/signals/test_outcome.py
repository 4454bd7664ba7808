"""No-answer outcome: the abstained flag, then refusal patterns (the defaults on realistic English),
then an empty context; no answer at all is unknown."""

from __future__ import annotations

import pytest

from ragmon.monitor.config.pipeline import DEFAULT_REFUSALS, SignalsConfig
from ragmon.monitor.core.model import Answer, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals.outcome import answer_outcome, compile_refusals
from ragmon.monitor.core.signals.results import Outcome

NOW = 1_796_000_000.0
DEFAULTS = compile_refusals(DEFAULT_REFUSALS)
CONTEXT = [Passage("leave#4", text="Up to five days carry over.")]


def make_trace(answer: Answer | None, context: list[Passage] | None = CONTEXT, retrievals=()) -> TraceEvent:
    return TraceEvent(trace_id="t1", time=NOW, query="How many vacation days carry over?",
                      index=IndexRef("policies"), answer=answer, context=context, retrievals=list(retrievals))


def test_the_default_config_uses_the_default_patterns():
    assert SignalsConfig().refusal_patterns == DEFAULT_REFUSALS


def test_no_patterns_compile_to_none():
    assert compile_refusals([]) is None


def test_patterns_are_case_insensitive_and_combined():
    pattern = compile_refusals(["no idea", r"^sorry\b"])
    assert pattern is not None
    assert [bool(pattern.search(t)) for t in ("I have NO IDEA.", "Sorry, cannot.", "Not sorry at all")] == [
        True, True, False]


def test_no_answer_is_unknown():
    assert answer_outcome(make_trace(None), DEFAULTS) is Outcome.UNKNOWN
    assert answer_outcome(make_trace(None, context=[]), DEFAULTS) is Outcome.UNKNOWN


def test_an_answer_from_a_non_empty_context_is_answered():
    answer = Answer("Up to five days carry over.", abstained=False, citations=["leave#4"])
    assert answer_outcome(make_trace(answer), DEFAULTS) is Outcome.ANSWERED


def test_the_abstained_flag_wins_over_the_text_and_the_empty_context():
    answer = Answer("Up to five days carry over.", abstained=True)
    assert answer_outcome(make_trace(answer), DEFAULTS) is Outcome.ABSTAINED
    assert answer_outcome(make_trace(answer, context=[]), DEFAULTS) is Outcome.ABSTAINED


def test_an_explicit_false_flag_is_not_overridden_by_refusal_text():
    answer = Answer("I don't know.", abstained=False)
    assert answer_outcome(make_trace(answer), DEFAULTS) is Outcome.ANSWERED


def test_refusal_text_without_a_flag_is_abstained_even_with_an_empty_context():
    answer = Answer("I don't know.")
    assert answer_outcome(make_trace(answer), DEFAULTS) is Outcome.ABSTAINED
    assert answer_outcome(make_trace(answer, context=[]), DEFAULTS) is Outcome.ABSTAINED


def test_an_answer_from_an_empty_context_is_empty_context():
    answer = Answer("Up to five days carry over.")
    assert answer_outcome(make_trace(answer, context=[]), DEFAULTS) is Outcome.EMPTY_CONTEXT


def test_context_absent_means_the_last_retrieval_list():
    answer = Answer("Five days.")
    with_passages = make_trace(answer, context=None, retrievals=[Retrieval("bm25", []), Retrieval("rerank", CONTEXT)])
    last_empty = make_trace(answer, context=None, retrievals=[Retrieval("bm25", CONTEXT), Retrieval("rerank", [])])
    no_lists = make_trace(answer, context=None)
    assert [answer_outcome(t, DEFAULTS) for t in (with_passages, last_empty, no_lists)] == [
        Outcome.ANSWERED, Outcome.EMPTY_CONTEXT, Outcome.EMPTY_CONTEXT]


def test_without_patterns_refusal_text_is_answered():
    assert answer_outcome(make_trace(Answer("I don't know.")), None) is Outcome.ANSWERED


def test_custom_patterns_replace_the_defaults():
    custom = compile_refusals([r"\bkeine Informationen\b"])
    assert answer_outcome(make_trace(Answer("Dazu habe ich keine Informationen.")), custom) is Outcome.ABSTAINED
    assert answer_outcome(make_trace(Answer("I don't know.")), custom) is Outcome.ANSWERED


def test_an_answer_without_text_or_flag_is_judged_by_the_context():
    assert answer_outcome(make_trace(Answer(citations=["leave#4"])), DEFAULTS) is Outcome.ANSWERED
    assert answer_outcome(make_trace(Answer(text=""), context=[]), DEFAULTS) is Outcome.EMPTY_CONTEXT


@pytest.mark.parametrize("text", [
    "I don't know the answer to that.",
    "I do not know.",
    "I'm sorry, but I couldn't find any information about parking in the provided documents.",
    "I cannot answer this question from the context I was given.",
    "There is no information about the 2027 holiday calendar in the available sources.",
    "There is no relevant information on that topic.",
    "Not enough context to answer this question.",
    "The bonus scheme is not covered in the provided documents.",
    "That detail is not mentioned in the context.",
    "I'm unable to answer that based on the provided context.",
    "I am not able to find that in the documents.",
    "I have no information about that policy.",
    "I DON'T KNOW.",
    # common phrasings of LLM refusals in production
    "I don't have enough information to answer that question.",
    "I’m sorry, but I don’t know.",  # typographic apostrophes, as many models write them
    "The provided context does not contain information about the parking policy.",
])
def test_default_patterns_match_realistic_refusals(text):
    assert answer_outcome(make_trace(Answer(text)), DEFAULTS) is Outcome.ABSTAINED


@pytest.mark.parametrize("text", [
    "Up to five days of unused vacation carry over to the next calendar year.",
    "Knowledge workers may work from home two days a week.",
    "Ask HR if you don't know your remaining balance.",
    "If you cannot find the form, ask your manager.",
    "The information you need is in section 4 of the leave policy.",
    "Notification of absence must be given by 9 am.",
    "You can find the form on the intranet; I cannot stress enough that it is due Friday.",
    "No documents are required for sick leave of up to three days.",
])
def test_default_patterns_do_not_match_normal_answers(text):
    assert answer_outcome(make_trace(Answer(text)), DEFAULTS) is Outcome.ANSWERED
