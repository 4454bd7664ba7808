"""Sampling decisions: strata from signals, deterministic selection at the configured rates, question
fingerprints and splits, ISO weeks, the config's errors (the weekly quota: test_quota.py)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from ragmon.monitor.config.settings import Settings
from ragmon.monitor.core.model import IndexRef, TraceEvent
from ragmon.monitor.core.signals import (
    AccessFindings,
    FeedbackSignals,
    IndexSignals,
    Outcome,
    RetrievalFinding,
    StaleFindings,
    TraceRef,
    TraceSignals,
)
from ragmon.monitor.labeling.sampling import (
    DEFAULT_RATES,
    SamplingConfig,
    Stratum,
    decide,
    late_strata_from,
    question_fingerprint,
    selected,
    split_of,
    strata_of,
    unit_hash,
)
from ragmon.monitor.labeling.weeks import iso_week, previous_week, week_monday

NOW = 1_796_000_000.0
TRACE = TraceEvent(trace_id="t1", time=NOW, query="How many vacation days carry over?", index=IndexRef("policies"))
EARLIER = TraceRef("t0", "acme", "policies", NOW - 60)


def signals(outcome=Outcome.ANSWERED, candidates=0, context=0, unknown_acl=0, stale_candidates=0, stale_context=0,
            low=False, unsupported=0, rephrase_of=None) -> TraceSignals:
    return TraceSignals(
        tenant="acme", index="policies", has_caller=True, outcome=outcome,
        access=AccessFindings(candidates=candidates, context=context, unknown_acl=unknown_acl),
        stale=StaleFindings(candidates=stale_candidates, context=stale_context),
        retrievals=[RetrievalFinding("bm25", 3.0, False, False, True),
                    RetrievalFinding("vector", 0.2, low, False, False)],
        duplicate_passages=0, duplicate_doc_versions=0, mixed_embeddings=False, unsupported_citations=unsupported,
        rephrase_of=rephrase_of, latency=None, usage=None,
    )


def trace_ids(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(64):016x}" for _ in range(n)]


# strata


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (signals(), {"random"}),
        (signals(candidates=1), {"random", "permission_violation"}),
        (signals(context=2), {"random", "permission_violation"}),
        (signals(unknown_acl=5), {"random"}),
        (signals(unsupported=1), {"random", "unsupported_citation"}),
        (signals(outcome=Outcome.ABSTAINED), {"random", "abstained"}),
        (signals(outcome=Outcome.EMPTY_CONTEXT), {"random", "empty_context"}),
        (signals(outcome=Outcome.UNKNOWN), {"random"}),
        (signals(low=True), {"random", "low_score"}),
        (signals(stale_candidates=1), {"random", "stale_served"}),
        (signals(stale_context=1), {"random", "stale_served"}),
        (signals(rephrase_of=EARLIER), {"random"}),  # rephrased belongs to the earlier trace
        (
            signals(outcome=Outcome.ABSTAINED, context=1, low=True, stale_context=3, unsupported=2),
            {"random", "permission_violation", "abstained", "low_score", "stale_served", "unsupported_citation"},
        ),
    ],
)
def test_strata_of_each_signal(found, expected):
    assert strata_of(TRACE, found) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (signals(rephrase_of=EARLIER), [(EARLIER, "rephrased")]),
        (signals(), []),
        (FeedbackSignals(EARLIER, "thumb", "down"), [(EARLIER, "negative_feedback")]),
        (FeedbackSignals(EARLIER, "escalation", None), [(EARLIER, "negative_feedback")]),
        (FeedbackSignals(EARLIER, "thumb", "up"), []),
        (FeedbackSignals(EARLIER, "thumb", None), []),
        (FeedbackSignals(EARLIER, "comment", "down"), []),
        (FeedbackSignals(EARLIER, "citation_click", None), []),
        (FeedbackSignals(None, "thumb", "down"), []),  # the trace is no longer remembered
        (IndexSignals("policies", 12.0), []),
    ],
)
def test_late_strata(event, expected):
    assert late_strata_from(event) == expected


def test_every_stratum_has_a_default_rate():
    assert set(DEFAULT_RATES) == set(Stratum)
    assert SamplingConfig().rates == DEFAULT_RATES


# the decision


def test_decision_is_exactly_reproducible():
    ids = trace_ids(2000)
    first = [selected("ragmon", "random", t, 0.3) for t in ids]
    assert first == [selected("ragmon", "random", t, 0.3) for t in ids]
    # pinned: a change of the hash would silently re-draw every sample and split already taken
    assert unit_hash("ragmon", "random", "9f1c2e") == 0.6203178599199546


def test_salt_and_stratum_change_the_draw():
    ids = trace_ids(2000)
    base = [selected("ragmon", "random", t, 0.5) for t in ids]
    other_salt = [selected("pepper", "random", t, 0.5) for t in ids]
    other_stratum = [selected("ragmon", "low_score", t, 0.5) for t in ids]
    for other in (other_salt, other_stratum):
        agree = sum(a == b for a, b in zip(base, other, strict=True))
        assert 800 < agree < 1200  # independent draws agree about half the time


def test_rates_are_monotone_and_bounded():
    for t in trace_ids(1000):
        u = unit_hash("ragmon", "abstained", t)
        assert 0.0 <= u < 1.0
        assert selected("ragmon", "abstained", t, 1.0)
        assert not selected("ragmon", "abstained", t, 0.0)
        assert selected("ragmon", "abstained", t, 0.25) <= selected("ragmon", "abstained", t, 0.5)


def test_parts_cannot_run_into_each_other():
    assert unit_hash("a", "b", "c") != unit_hash("a", "bc", "")
    with pytest.raises(ValueError, match="NUL"):
        unit_hash("a\x00b", "random", "t")


@pytest.mark.parametrize(("seed", "stratum"), list(enumerate(DEFAULT_RATES)))
def test_selection_rate_per_stratum_within_five_standard_deviations(seed, stratum):
    n, rate = 100_000, DEFAULT_RATES[stratum]
    hits = sum(selected("ragmon", stratum, t, rate) for t in trace_ids(n, seed=seed))
    sd = math.sqrt(n * rate * (1 - rate))
    assert abs(hits - n * rate) <= 5 * sd


def test_decide_keeps_the_strata_whose_draw_is_under_the_rate():
    config = SamplingConfig(rates={"random": 0.0, "low_score": 1.0})
    assert decide(config, "t1", {"random", "low_score", "permission_violation"}) == {
        "low_score", "permission_violation"}
    config = SamplingConfig(rates={"abstained": 0.5})
    ids = trace_ids(1000)
    assert {t for t in ids if decide(config, t, {"abstained"})} == {
        t for t in ids if unit_hash("ragmon", "abstained", t) < 0.5}


# fingerprints and splits


@pytest.mark.parametrize(
    "variant",
    [
        "How many vacation days carry over?",
        "how many vacation days carry over",
        "HOW MANY VACATION DAYS CARRY OVER ??",
        "  How   many\tvacation days\ncarry over? ",
        "How many vacation-days carry over?",
        "Vacation days: how many carry over?",
        "Please, how many vacation days carry over?",
        "How many vacation days carry over? How many?",  # repeats
        "Ｈｏｗ many vacation days carry over？",  # full-width letters and question mark (NFKC)
    ],
)
def test_near_duplicate_questions_share_a_fingerprint(variant):
    assert question_fingerprint(variant) == question_fingerprint("How many vacation days carry over?")


@pytest.mark.parametrize(
    "other",
    [
        "How many sick days carry over?",
        "How many vacation days expire?",
        "Do vacation days not carry over?",
        "How many vacation days carry over in Germany?",
        "",
    ],
)
def test_different_questions_differ(other):
    assert question_fingerprint(other) != question_fingerprint("How many vacation days carry over?")


def test_fingerprint_is_a_stable_hex_digest():
    fp = question_fingerprint("Who approves expenses?")
    assert len(fp) == 32 and int(fp, 16) >= 0
    assert fp == question_fingerprint("who approves expenses")
    assert question_fingerprint("The?") == question_fingerprint("the") != question_fingerprint("")  # only stop words


def test_split_is_stable_and_follows_the_fingerprint():
    a = question_fingerprint("How many vacation days carry over?")
    b = question_fingerprint("vacation days: how many carry over")
    assert split_of("ragmon", a, 0.2) == split_of("ragmon", b, 0.2)
    assert split_of("ragmon", a, 0.0) == "dev"
    assert split_of("ragmon", a, 1.0) == "heldout"
    fps = [question_fingerprint(f"question number {i}") for i in range(2000)]
    assert [split_of("ragmon", f, 0.2) for f in fps] == [split_of("ragmon", f, 0.2) for f in fps]
    # a fingerprint held out at a share stays held out at any larger one
    assert all(split_of("ragmon", f, 0.3) == "heldout" for f in fps if split_of("ragmon", f, 0.2) == "heldout")


def test_heldout_share_within_five_standard_deviations():
    n, share = 50_000, 0.2
    heldout = sum(split_of("ragmon", question_fingerprint(f"q {t}"), share) == "heldout" for t in trace_ids(n))
    assert abs(heldout - n * share) <= 5 * math.sqrt(n * share * (1 - share))


# ISO weeks


def at(*args, tz=UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


@pytest.mark.parametrize(
    ("instant", "week"),
    [
        (at(2026, 11, 29, 10), "2026-W48"),
        (at(2026, 12, 31, 12), "2026-W53"),
        (at(2027, 1, 1, 0), "2026-W53"),
        (at(2027, 1, 3, 23, 59, 59), "2026-W53"),
        (at(2027, 1, 4, 0), "2027-W01"),
        (at(2024, 12, 30, 0), "2025-W01"),
        (at(2026, 1, 1, 0), "2026-W01"),
        (at(2021, 1, 3, 0), "2020-W53"),
    ],
)
def test_iso_week(instant, week):
    assert iso_week(instant) == week
    year, number, _ = datetime.fromtimestamp(instant, UTC).isocalendar()
    assert week == f"{year}-W{number:02d}"


def test_iso_week_in_a_time_zone():
    sunday_late_utc = at(2026, 12, 27, 23, 30)  # Monday morning in Tokyo
    assert iso_week(sunday_late_utc) == "2026-W52"
    assert iso_week(sunday_late_utc, "Asia/Tokyo") == "2026-W53"
    assert iso_week(sunday_late_utc, "America/New_York") == "2026-W52"


def test_week_arithmetic():
    assert previous_week("2027-W01") == "2026-W53"
    assert previous_week("2026-W01") == "2025-W52"
    assert previous_week("2026-W48") == "2026-W47"
    assert week_monday("2026-W48").isoformat() == "2026-11-23"
    for bad in ("2026-48", "2026-W5", "2026-W54", "W48"):
        with pytest.raises(ValueError):
            week_monday(bad)


# configuration


def test_partial_rates_keep_the_other_defaults():
    config = SamplingConfig(rates={"random": 0.05})
    assert config.rates["random"] == 0.05
    assert config.rates["permission_violation"] == 1.0


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"rates": {"randm": 0.1}}, ["rates", "randm"]),
        ({"rates": {"random": 1.5}}, ["rates.random", "less than or equal to 1"]),
        ({"rates": {"random": -0.1}}, ["rates.random"]),
        ({"weekly_cap_overrides": {"lowscore": 3}}, ["weekly_cap_overrides", "lowscore"]),
        ({"weekly_cap_overrides": {"random": -1}}, ["weekly_cap_overrides.random"]),
        ({"weekly_cap": -1}, ["weekly_cap"]),
        ({"heldout_share": 1.2}, ["heldout_share"]),
        ({"time_zone": "Mars/Olympus"}, ["time_zone", "Mars/Olympus"]),
        ({"salt": ""}, ["salt"]),
        ({"salt": "a\x00b"}, ["salt", "NUL"]),
        ({"rate": {"random": 0.1}}, ["rate", "Extra inputs are not permitted"]),
    ],
)
def test_config_errors_name_the_key(fields, names):
    with pytest.raises(ValidationError) as caught:
        SamplingConfig(**fields)
    for name in names:
        assert name in str(caught.value)


def test_config_error_inside_the_settings_names_the_section_and_key():
    class WithSampling(Settings):
        sampling: SamplingConfig = SamplingConfig()

    with pytest.raises(ValidationError) as caught:
        WithSampling.model_validate({"sampling": {"rates": {"randm": 0.1}}})
    [problem] = caught.value.errors()
    assert problem["loc"] == ("sampling", "rates")
    assert "unknown stratum randm" in problem["msg"]
