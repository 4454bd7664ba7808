"""The weekly quota decided by rank: caps and near duplicates in one tenant-week (WeekState), and
as the store decides it (SampleStore.admit on SQLite): the samples of a week do not depend on the
order in which its traces arrive, nor on how they are split into batches."""

from __future__ import annotations

import hashlib
import random
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.monitor.labeling.quota import Claim, WeekState, rank_of
from ragmon.monitor.labeling.sample_store import NewSample, Sample, SampleStore
from ragmon.monitor.labeling.sampling import SamplingConfig
from ragmon.monitor.storage.store import make_engine, upgrade

WEEK = "2026-W48"


def caps(default=2, **per_stratum):
    return lambda stratum: per_stratum.get(stratum, default)


def test_a_full_stratum_keeps_the_lowest_ranks_whatever_the_order():
    state = WeekState()
    outcomes = [state.offer(t, f"fp-{t}", rank, {"random"}, caps(2)) for t, rank in
                [("a", 0.5), ("b", 0.4), ("c", 0.9), ("d", 0.1)]]
    assert [o.admitted for o in outcomes] == [{"random"}, {"random"}, set(), {"random"}]
    assert [(t, s, r.value) for o in outcomes for t, s, r in o.displaced] == [("a", "random", "weekly_cap")]
    assert [r.value for _, r in outcomes[2].refused] == ["weekly_cap"]
    assert state.strata == {"b": {"random"}, "d": {"random"}}


def test_caps_are_per_stratum_with_overrides_and_zero():
    state = WeekState()
    cap = caps(5, random=1, abstained=0)
    assert state.offer("t1", "a", 0.5, {"random", "low_score"}, cap).admitted == {"random", "low_score"}
    assert state.offer("t2", "b", 0.7, {"random"}, cap).admitted == set()
    assert state.offer("t3", "c", 0.1, {"abstained"}, cap).admitted == set()
    config = SamplingConfig(weekly_cap=7, weekly_cap_overrides={"random": 3})
    assert (config.cap("random"), config.cap("low_score")) == (3, 7)


def test_the_lowest_ranked_near_duplicate_of_a_stratum_takes_the_queued_holders_place():
    state = WeekState()
    assert state.offer("t1", "fp", 0.6, {"random", "low_score"}, caps(10)).admitted == {"random", "low_score"}
    late = state.offer("t2", "fp", 0.3, {"random"}, caps(10))
    assert late.admitted == {"random"}
    assert [(t, s, r.value) for t, s, r in late.displaced] == [("t1", "random", "near_duplicate")]
    assert state.strata == {"t1": {"low_score"}, "t2": {"random"}}  # one question per stratum
    higher = state.offer("t3", "fp", 0.7, {"low_score", "random"}, caps(10))
    assert sorted((s, r.value) for s, r in higher.refused) == [("low_score", "near_duplicate"),
                                                              ("random", "near_duplicate")]
    # a claim stays with the lowest rank even when its trace lost its place to the cap
    state = WeekState()
    state.offer("low", "other", 0.1, {"random"}, caps(1))
    state.offer("t1", "fp", 0.5, {"random"}, caps(1))
    assert state.claims["random", "fp"].trace_id == "t1" and "t1" not in state.strata
    assert [r.value for _, r in state.offer("t2", "fp", 0.6, {"random"}, caps(1)).refused] == ["near_duplicate"]


def test_a_leak_is_never_a_near_duplicate():
    state = WeekState()
    state.offer("t1", "fp", 0.1, {"random"}, caps(10))
    outcome = state.offer("t2", "fp", 0.9, {"permission_violation", "random"}, caps(10))
    assert outcome.admitted == {"permission_violation"}
    assert [(s, r.value) for s, r in outcome.refused] == [("random", "near_duplicate")]
    state.offer("t3", "fp", 0.05, {"random"}, caps(10))
    assert state.strata == {"t2": {"permission_violation"}, "t3": {"random"}}


def test_a_traces_rank_is_the_documented_hash_which_stored_ranks_were_made_with():
    # hash(salt, "rank", trace_id) (docs/sampling.md): ranks are stored with the samples and claims,
    # so a replica of another version (a rolling upgrade) must rank a newcomer on the same scale; and
    # the domain keeps the rank apart from the strata's draws, hash(salt, stratum, trace_id)
    digest = hashlib.blake2b(b"ragmon\x00rank\x009f1c2e", digest_size=8).digest()
    assert rank_of("ragmon", "9f1c2e") == (int.from_bytes(digest, "big") >> 11) / (1 << 53)


def test_leaks_are_held_under_their_own_stratums_cap():
    state = WeekState()
    cap = caps(10, permission_violation=1)
    assert state.offer("t1", "fp-1", 0.5, {"permission_violation"}, cap).admitted == {"permission_violation"}
    refused = state.offer("t2", "fp-2", 0.7, {"permission_violation"}, cap)
    assert [(s, r.value) for s, r in refused.refused] == [("permission_violation", "weekly_cap")]
    lower = state.offer("t3", "fp-3", 0.2, {"permission_violation"}, cap)
    assert [(t, r.value) for t, _, r in lower.displaced] == [("t1", "weekly_cap")]
    assert state.strata == {"t3": {"permission_violation"}}


def test_a_conversation_holds_one_place_whatever_its_turns_ask():
    # the conversation stratum's claim is held under the conversation's key, not the question's
    state = WeekState()
    keys = {"conversation": "chat-1"}
    assert state.offer("t1", "fp-payroll", 0.5, {"conversation", "random"}, caps(10), keys).admitted == {
        "conversation", "random"}
    second = state.offer("t2", "fp-bonus", 0.3, {"conversation", "random"}, caps(10), keys)
    assert second.admitted == {"conversation", "random"}
    assert [(t, s, r.value) for t, s, r in second.displaced] == [("t1", "conversation", "near_duplicate")]
    assert state.strata == {"t1": {"random"}, "t2": {"conversation", "random"}}
    assert state.offer("t3", "fp-other", 0.1, {"conversation"}, caps(10), {"conversation": "chat-2"}).admitted == {
        "conversation"}


def test_a_trace_is_not_its_own_duplicate_and_a_replay_changes_nothing():
    state = WeekState()
    assert state.offer("t1", "fp", 0.5, {"random"}, caps(1)).admitted == {"random"}
    assert state.offer("t1", "fp", 0.5, {"low_score"}, caps(1)).admitted == {"low_score"}  # a second stratum
    replay = state.offer("t1", "fp", 0.5, {"random", "low_score"}, caps(1))
    assert (replay.admitted, replay.refused, replay.displaced) == (set(), [], [])


def test_samples_no_longer_queued_keep_their_places():
    state = WeekState(strata={"old": {"random"}}, ranks={"old": 0.9}, fixed={"old"})
    assert state.offer("new", "other", 0.1, {"random"}, caps(1)).admitted == set()
    state = WeekState(strata={"old": {"random"}}, ranks={"old": 0.9}, fixed={"old"},
                      claims={("random", "fp"): Claim("old", 0.9)})
    assert state.offer("new", "fp", 0.1, {"random"}, caps(5)).admitted == set()  # the exported holder keeps it


OFFERS = st.lists(
    st.tuples(st.sampled_from([f"t{i}" for i in range(30)]), st.sampled_from(["f1", "f2", "f3", "f4", "f5", "f6"]),
              st.sampled_from(["random", "low_score", "abstained", "permission_violation"])),
    min_size=1, max_size=60)


def _week(offers) -> dict[str, set[str]]:
    state = WeekState()
    fingerprint: dict[str, str] = {}
    for trace, fp, stratum in offers:
        state.offer(trace, fingerprint.setdefault(trace, fp), rank_of("s", trace), {stratum}, caps(3))
    return state.strata


@settings(max_examples=300, deadline=None)
@given(OFFERS, st.randoms(use_true_random=False))
def test_the_week_does_not_depend_on_arrival_order(offers, rng):
    """A trace's strata arrive one by one (late strata come later); any order of the same offers
    gives the same samples."""
    shuffled = offers[:]
    rng.shuffle(shuffled)
    fingerprints: dict[str, str] = {}
    for trace, fp, _ in offers:
        fingerprints.setdefault(trace, fp)  # a trace has one question, whichever offer comes first
    shuffled = [(trace, fingerprints[trace], stratum) for trace, _, stratum in shuffled]
    assert _week(offers) == _week(shuffled)


# the store decides it, batch by batch


@pytest.fixture
def store(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    yield SampleStore(engine, clock=lambda: 1000.0)
    engine.dispose()


def new(trace: str, fp: str, strata: set[str], tenant: str = "acme", week: str = WEEK) -> NewSample:
    return NewSample(trace, tenant, week, set(strata), "dev", fp, 0.0, {"trace_id": trace}, rank_of("s", trace))


def stream(n: int = 400, seed: int = 3) -> list[NewSample]:
    rng = random.Random(seed)
    strata_pool = ["random", "low_score", "abstained", "permission_violation"]
    return [new(f"t{i}", f"fp{rng.randrange(60)}", set(rng.sample(strata_pool, rng.randint(1, 2))),
                tenant=rng.choice(["acme", "globex"])) for i in range(n)]


def stored(store: SampleStore) -> dict[str, list[str]]:
    return {s.trace_id: s.strata for s in store.find()}


def test_the_store_keeps_the_same_samples_whatever_the_order_and_the_batches(store, tmp_path):
    samples = stream()
    cap = caps(15)
    for start in range(0, len(samples), 37):
        store.admit(samples[start:start + 37], cap)
    expected = stored(store)
    assert 40 < len(expected) < 150
    for seed in (1, 2):
        other = SampleStore(make_engine(f"sqlite:///{tmp_path / f'other{seed}.db'}"))
        upgrade(other._engine)
        shuffled = stream()
        random.Random(seed).shuffle(shuffled)
        for start in range(0, len(shuffled), 11 * seed):
            other.admit(shuffled[start:start + 11 * seed], cap)
        assert stored(other) == expected
    # every stratum within its cap, per tenant; one question per stratum but for leaks
    rows = store.find()
    for tenant in ("acme", "globex"):
        for stratum in ("random", "low_score", "abstained", "permission_violation"):
            holders = [r.fingerprint for r in rows if r.tenant == tenant and stratum in r.strata]
            assert len(holders) <= 15
            if stratum != "permission_violation":
                assert len(holders) == len(set(holders))


def test_admission_reports_what_it_took_refused_and_took_back(store):
    first = store.admit([new("a", "fp-a", {"random"}), new("b", "fp-b", {"random"})], caps(1))
    ranked = sorted(["a", "b"], key=lambda t: rank_of("s", t))
    assert first.created == [ranked[0]] and first.sampled == [("acme", "random")]
    assert first.dropped == ["weekly_cap"]
    again = store.admit([new("a", "fp-a", {"random"}), new("b", "fp-b", {"random"})], caps(1))
    assert (again.created, again.sampled, again.dropped) == ([], [], ["weekly_cap"])  # a retried batch
    assert list(stored(store)) == [ranked[0]]


def test_the_weekly_total_cap_counts_every_tenant_and_never_refuses_a_leak(store):
    admitted = store.admit([new(f"t{i}", f"fp{i}", {"random"}, tenant=f"tenant-{i}") for i in range(5)],
                           caps(200), total_cap=3)
    assert len(admitted.created) == 3 and admitted.dropped == ["weekly_total_cap"] * 2
    leak = store.admit([new("leak", "fpx", {"permission_violation", "random"}, tenant="tenant-9")], caps(200),
                       total_cap=3)
    assert leak.created == ["leak"] and leak.dropped == ["weekly_total_cap"]
    assert stored(store)["leak"] == ["permission_violation"]
    assert len(store.admit([new("next", "fp", {"random"}, week="2026-W49")], caps(200), total_cap=3).created) == 1


def test_an_exported_sample_keeps_its_place(store):
    store.admit([new("a", "fp", {"random"})], caps(1))
    store.mark_exported(["a"])
    lower = next(f"z{i}" for i in range(100) if rank_of("s", f"z{i}") < rank_of("s", "a"))
    result = store.admit([new(lower, "fp2", {"random"})], caps(1))
    assert result.created == [] and result.dropped == ["weekly_cap"]
    assert list(stored(store)) == ["a"]


def test_samples_stored_before_the_rank_existed_keep_their_places(store):
    store.upsert([NewSample("legacy", "acme", WEEK, {"random"}, "dev", "fp", 0.0, {})])
    assert store.find()[0].rank == 0.0
    assert store.admit([new("t1", "fp2", {"random"})], caps(1)).created == []
    assert isinstance(store.find()[0], Sample)


@pytest.mark.integration
def test_replicas_on_one_postgresql_store_what_one_process_stores(postgres, store):
    """Four replicas, each with its own engine, admit their shares of the stream (split by tenant
    and trace as partitions would split it, batched differently) at the same time: the stored
    samples equal one process's over the whole stream, within every cap; no deadlock, no
    duplicate key."""
    samples = stream(1200, seed=5)
    cap = caps(15)
    for start in range(0, len(samples), 50):
        store.admit(samples[start:start + 50], cap)  # one process, SQLite
    expected = stored(store)
    url = postgres.create_database(f"quota_{uuid.uuid4().hex[:8]}")
    upgrade(make_engine(url))
    replicas = [SampleStore(make_engine(url)) for _ in range(4)]
    shares = [[s for s in samples if hash_share(s.trace_id) == i] for i in range(4)]
    errors: list[BaseException] = []

    def run(replica: SampleStore, share: list[NewSample], size: int) -> None:
        try:
            for start in range(0, len(share), size):
                replica.admit(share[start:start + size], cap)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(r, share, 7 + 9 * i))
               for i, (r, share) in enumerate(zip(replicas, shares, strict=True))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert stored(replicas[0]) == expected
    for replica in replicas:
        replica._engine.dispose()
    log = postgres.log_path.read_text(errors="replace")
    assert "deadlock detected" not in log and "duplicate key" not in log


def hash_share(trace_id: str) -> int:
    return int(trace_id[1:]) * 7919 % 4


def test_a_trace_id_seen_again_with_another_tenant_or_week_stays_one_sample(store):
    """Trace ids that redact alike, or a trace sent again with another tenant or time, are one
    sample, in the tenant-week it was first stored in."""
    store.admit([new("t1", "fp", {"random"}, tenant="acme")], caps(5))
    again = store.admit([new("t1", "fp", {"low_score"}, tenant="globex", week="2026-W49"),
                         new("t2", "fp2", {"random"}, tenant="globex"),
                         new("t2", "fp2", {"abstained"}, tenant="initech")], caps(5))
    assert again.created == ["t2"]
    assert {(s.trace_id, s.tenant, s.week, tuple(s.strata)) for s in store.find()} == {
        ("t1", "acme", WEEK, ("low_score", "random")), ("t2", "globex", WEEK, ("abstained", "random"))}
