"""Retrieval scores: top score per list, configured thresholds, the trailing percentile after
min_samples (judged before the new score joins), bounded baselines, empty keyword side."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragmon.monitor.core.model import IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals.results import RetrievalFinding
from ragmon.monitor.core.signals.scores import ScoreBaselines, retrieval_findings, top_score

NOW = 1_796_000_000.0
KEYWORD = frozenset({"bm25", "keyword", "sparse"})


def make_trace(*lists: tuple[str, list[float | None]], index="policies") -> TraceEvent:
    retrievals = [Retrieval(name, [Passage(f"{name}-{i}", score=s) for i, s in enumerate(scores)])
                  for name, scores in lists]
    return TraceEvent(trace_id="t1", time=NOW, query="q", index=IndexRef(index), retrievals=retrievals)


def baselines(percentile=5.0, min_samples=500, window=5000, **kwargs) -> ScoreBaselines:
    return ScoreBaselines(percentile, min_samples, window, **kwargs)


# --- top_score -------------------------------------------------------------------------------------


def test_top_score_is_the_highest_known_score():
    assert top_score([0.2, None, 0.9, 0.5]) == 0.9
    assert top_score([-3.0, -1.5]) == -1.5


def test_top_score_of_an_empty_list_or_missing_scores_is_none():
    assert top_score([]) is None
    assert top_score([None, None]) is None


# --- ScoreBaselines --------------------------------------------------------------------------------


def test_no_threshold_before_min_samples():
    scores = baselines(min_samples=3)
    scores.observe(("policies", "vector"), 0.5)
    scores.observe(("policies", "vector"), 0.6)
    assert scores.threshold(("policies", "vector")) is None
    scores.observe(("policies", "vector"), 0.7)
    assert scores.threshold(("policies", "vector")) == 0.5


def test_threshold_is_the_trailing_fifth_percentile_of_500_scores():
    scores = baselines()
    key = ("policies", "vector")
    for i in range(500, 0, -1):  # 0.500 ... 0.001, in an order that is not sorted ascending
        scores.observe(key, i / 1000)
    assert scores.threshold(key) == 0.025  # sorted[int(0.05 * 499)] = sorted[24]


def test_thresholds_are_kept_per_index_and_retriever():
    scores = baselines(percentile=50.0, min_samples=1)
    scores.observe(("policies", "vector"), 0.8)
    scores.observe(("policies", "bm25"), 12.0)
    scores.observe(("archive", "vector"), 0.3)
    assert [scores.threshold(k) for k in (("policies", "vector"), ("policies", "bm25"), ("archive", "vector"),
                                          ("archive", "bm25"))] == [0.8, 12.0, 0.3, None]


def test_threshold_follows_every_score():
    scores = baselines(percentile=50.0, min_samples=3)
    key = ("policies", "vector")
    for s in (0.1, 0.2, 0.3):
        scores.observe(key, s)
    assert scores.threshold(key) == 0.2
    scores.observe(key, 0.9)
    assert scores.threshold(key) == 0.2  # [0.1, 0.2, 0.3, 0.9] -> sorted[int(0.5 * 3)]
    scores.observe(key, 0.9)
    assert scores.threshold(key) == 0.3


def test_nan_scores_are_ignored():
    scores = baselines(percentile=50.0, min_samples=1, window=2)
    key = ("policies", "vector")
    for s in (0.4, float("nan"), 0.6, float("nan"), 0.8):
        scores.observe(key, s)
    assert scores.threshold(key) == 0.6  # the window holds 0.6 and 0.8


def test_threshold_uses_only_the_trailing_window():
    scores = baselines(percentile=5.0, min_samples=2, window=3)
    key = ("policies", "vector")
    for s in (0.1, 0.2, 0.7, 0.8, 0.9):
        scores.observe(key, s)
    assert scores.threshold(key) == 0.7


def test_least_recently_used_key_is_dropped_beyond_max_keys():
    scores = baselines(min_samples=1, max_keys=2)
    a, b, c = ("i", "a"), ("i", "b"), ("i", "c")
    scores.observe(a, 0.1)
    scores.observe(b, 0.2)
    scores.observe(a, 0.3)  # a is now the most recently used
    scores.observe(c, 0.4)  # b goes
    assert [scores.threshold(k) for k in (a, b, c)] == [0.1, None, 0.4]
    scores.observe(b, 0.5)  # b starts over (min_samples=1), a goes
    assert [scores.threshold(k) for k in (a, b, c)] == [None, 0.5, 0.4]


def test_a_dropped_key_starts_over_with_min_samples():
    scores = baselines(min_samples=2, max_keys=1)
    a, b = ("i", "a"), ("i", "b")
    scores.observe(a, 0.1)
    scores.observe(a, 0.2)
    assert scores.threshold(a) == 0.1
    scores.observe(b, 0.9)
    scores.observe(a, 0.3)
    assert scores.threshold(a) is None  # one score since it came back


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=60),
       st.integers(min_value=1, max_value=60))
def test_threshold_is_always_one_of_the_window_scores(values, min_samples):
    scores = baselines(percentile=5.0, min_samples=min_samples, window=20)
    for v in values:
        scores.observe(("i", "r"), v)
    cut = scores.threshold(("i", "r"))
    if len(values) < min_samples or min_samples > 20:
        assert cut is None
    else:
        window = sorted(values[-20:])
        assert cut == window[int(0.05 * (len(window) - 1))]


# --- retrieval_findings ----------------------------------------------------------------------------


def test_no_retrievals_no_findings():
    assert retrieval_findings(make_trace(), {}, baselines(), KEYWORD) == []


def test_one_finding_per_list_with_top_score_empty_and_keyword_flags():
    trace = make_trace(("bm25", []), ("vector", [0.4, 0.81, None]), ("sparse", [None]), ("rerank", [0.2]))
    assert retrieval_findings(trace, {}, baselines(), KEYWORD) == [
        RetrievalFinding("bm25", None, False, True, True),
        RetrievalFinding("vector", 0.81, False, False, False),
        RetrievalFinding("sparse", None, False, False, True),
        RetrievalFinding("rerank", 0.2, False, False, False),
    ]


def test_configured_threshold_for_index_and_retriever():
    thresholds = {"policies": {"vector": 0.55}}
    scores = baselines(min_samples=1)
    low = retrieval_findings(make_trace(("vector", [0.54])), thresholds, scores, KEYWORD)
    at = retrieval_findings(make_trace(("vector", [0.55])), thresholds, scores, KEYWORD)
    other_index = retrieval_findings(make_trace(("vector", [0.1]), index="archive"), thresholds, scores, KEYWORD)
    assert [f[0].low for f in (low, at, other_index)] == [True, False, False]


def test_a_configured_threshold_does_not_feed_the_baseline():
    scores = baselines(min_samples=1)
    retrieval_findings(make_trace(("vector", [0.54])), {"policies": {"vector": 0.55}}, scores, KEYWORD)
    assert scores.threshold(("policies", "vector")) is None


def test_threshold_for_another_retriever_leaves_this_one_to_the_baseline():
    thresholds = {"policies": {"vector": 0.55}}
    scores = baselines(percentile=50.0, min_samples=1)
    retrieval_findings(make_trace(("bm25", [10.0])), thresholds, scores, KEYWORD)
    assert scores.threshold(("policies", "bm25")) == 10.0
    finding = retrieval_findings(make_trace(("bm25", [9.0])), thresholds, scores, KEYWORD)[0]
    assert finding == RetrievalFinding("bm25", 9.0, True, False, True)


def test_an_empty_list_or_a_list_without_scores_is_never_low_and_feeds_no_baseline():
    scores = baselines(min_samples=1)
    thresholds = {"policies": {"bm25": 5.0}}
    findings = retrieval_findings(make_trace(("bm25", []), ("vector", [None])), thresholds, scores, KEYWORD)
    assert [f.low for f in findings] == [False, False]
    assert scores.threshold(("policies", "vector")) is None


def test_trailing_percentile_applies_only_after_min_samples():
    scores = baselines(min_samples=500)
    for i in range(500):
        finding = retrieval_findings(make_trace(("vector", [0.5 + i / 10_000])), {}, scores, KEYWORD)[0]
        assert finding.low is False  # no baseline yet, however the scores fall
    cut = scores.threshold(("policies", "vector"))
    assert cut == 0.5 + 24 / 10_000
    below = retrieval_findings(make_trace(("vector", [0.5])), {}, scores, KEYWORD)[0]
    equal = retrieval_findings(make_trace(("vector", [cut])), {}, scores, KEYWORD)[0]
    assert (below.low, equal.low) == (True, False)


def test_first_score_below_everything_before_min_samples_is_not_low():
    scores = baselines(min_samples=3)
    flags = [retrieval_findings(make_trace(("vector", [s])), {}, scores, KEYWORD)[0].low for s in (0.9, 0.8, 0.01)]
    assert flags == [False, False, False]


def test_percentile_is_judged_before_the_new_score_joins():
    scores = ScoreBaselines(50.0, 3, 100)
    for s in (0.1, 0.2, 0.3):
        retrieval_findings(make_trace(("vector", [s])), {}, scores, KEYWORD)
    assert scores.threshold(("policies", "vector")) == 0.2
    # judged against 0.2: low. Had 0.15 joined first, the cut would be 0.15 and it would not be low.
    finding = retrieval_findings(make_trace(("vector", [0.15])), {}, scores, KEYWORD)[0]
    assert finding.low is True
    assert scores.threshold(("policies", "vector")) == 0.15


def test_each_list_of_a_trace_feeds_its_own_baseline():
    scores = baselines(percentile=50.0, min_samples=1)
    retrieval_findings(make_trace(("vector", [0.7]), ("bm25", [14.0])), {}, scores, KEYWORD)
    assert (scores.threshold(("policies", "vector")), scores.threshold(("policies", "bm25"))) == (0.7, 14.0)


@pytest.mark.parametrize(("name", "keyword"), [
    ("bm25", True), ("keyword", True), ("sparse", True), ("vector", False), ("fused", False),
    # the names real frameworks give their retrievers (span names, methods cut off)
    ("BM25Retriever", True), ("InMemoryBM25Retriever", True), ("KeywordTableSimpleRetriever", True),
    ("VectorIndexRetriever", False), ("InMemoryEmbeddingRetriever", False), ("ColBERTv2", False)])
def test_keyword_retrievers_are_matched_by_name_parts_ignoring_case(name, keyword):
    assert retrieval_findings(make_trace((name, [])), {}, baselines(), KEYWORD)[0].keyword is keyword


def test_custom_keyword_retriever_names():
    findings = retrieval_findings(make_trace(("bm25", []), ("es", []), ("ESRetriever", [])), {}, baselines(),
                                  {"es"})
    assert [f.keyword for f in findings] == [False, True, True]
