"""Low-score baselines shared through the database (monitor/storage/score_share.py): replicas that
each judge a share of the stream hold the baselines one process holds; a process starting holds
the newest window; replicas starting together warm a pair after as many scores as one process;
rows committed out of id order are read once; pruning keeps a window per pair; an unavailable
database delays sharing and refuses nothing."""

from __future__ import annotations

import logging
import random
from collections import Counter

import pytest
from sqlalchemy import insert, select

from ragmon.monitor.config.pipeline import SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.pipeline import Observation
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.core.signals.scores import ScoreBaselines
from ragmon.monitor.storage import score_share
from ragmon.monitor.storage.score_share import (
    KEEP_SECONDS,
    WARMING_SYNC,
    BaselineSharing,
    ScoreShare,
    ScoreShareRow,
    pack,
)
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url

NOW = 1_796_000_000.0
PAIRS = [("policies", "vector"), ("policies", "bm25"), ("handbook", "vector")]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def trace(n: int, scores: dict[tuple[str, str], float]) -> TraceEvent:
    index = next(iter(scores))[0]
    return TraceEvent(trace_id=f"t{n}", time=NOW + n, query="q", index=IndexRef(index),
                      retrievals=[Retrieval(retriever, [Passage(f"{retriever}-{n}", score=score)])
                                  for (_, retriever), score in scores.items()])


def stream(n: int, seed: int = 7) -> list[TraceEvent]:
    rng = random.Random(seed)
    traces = []
    for i in range(n):
        index = rng.choice(["policies", "handbook"])
        traces.append(trace(i, {(index, r): round(rng.random(), 6) for i_, r in PAIRS if i_ == index}))
    return traces


class Replica:
    """A signal engine with its sharing sink, as build_runtime joins them."""

    def __init__(self, url: str, clock: Clock, config: SignalsConfig, name: str) -> None:
        self.engine = make_engine(url)
        self.signals = SignalEngine(config, Catalog(), explain=False)
        self.sharing = BaselineSharing(ScoreShare(self.engine, name, config.low_score_window, lambda: NOW),
                                       self.signals.baselines, config.low_score_thresholds, config.low_score_window,
                                       config.low_score_sync_seconds, clock)
        self.sharing.start()
        self.low = 0
        self.warming: Counter[tuple[str, str]] = Counter()  # scores judged while their pair warmed

    def judge(self, traces: list[TraceEvent]) -> None:
        self.sharing.prepare()
        for event in traces:
            self.sharing.consume(Observation(event, "test", NOW, self.judge_one(event)))
        self.sharing.flush(1.0)

    def judge_one(self, event: TraceEvent):
        signals = self.signals.trace(event)
        self.low += sum(r.low for r in signals.retrievals)
        self.warming.update((signals.index, r.retriever) for r in signals.retrievals if r.warming)
        return signals


@pytest.fixture(params=BOTH)
def url(request, tmp_path):
    return migrated_url(request, tmp_path, "share")


def alone(traces: list[TraceEvent], config: SignalsConfig) -> ScoreBaselines:
    engine = SignalEngine(config, Catalog(), explain=False)
    for event in traces:
        engine.trace(event)
    return engine.baselines


def test_replicas_sharing_one_database_hold_the_baselines_of_one_process(url):
    config = SignalsConfig(low_score_min_samples=50, low_score_window=2000, low_score_sync_seconds=1.0)
    clock = Clock()
    replicas = [Replica(url, clock, config, name) for name in "abc"]
    traces = stream(1500)
    shares = [traces[i::3] for i in range(3)]
    for start in range(0, 500, 40):  # each replica a batch in turn, a sync after each round
        clock.now += 1.0
        for replica, share in zip(replicas, shares, strict=True):
            replica.judge(share[start:start + 40])
    clock.now += 1.0
    for replica in replicas:
        replica.sharing.prepare()  # the last round's scores of the others
    expected = alone(traces, config)
    for pair in PAIRS:
        assert expected.threshold(pair) is not None
        assert [r.signals.baselines.threshold(pair) for r in replicas] == [expected.threshold(pair)] * 3
    # and they judged about as one process does: each alone would have started 3x later
    one = SignalEngine(config, Catalog(), explain=False)
    one_low = sum(r.low for event in traces for r in one.trace(event).retrievals)
    assert abs(sum(r.low for r in replicas) - one_low) <= 0.05 * one_low


def test_a_process_starting_holds_the_newest_window_of_every_pair(url):
    config = SignalsConfig(low_score_min_samples=10, low_score_window=100, low_score_sync_seconds=1.0)
    clock = Clock()
    writer = Replica(url, clock, config, "a")
    traces = stream(900, seed=3)
    for start in range(0, 900, 30):
        clock.now += 1.0
        writer.judge(traces[start:start + 30])
    starting = Replica(url, Clock(), config, "b")
    expected = alone(traces, config)  # the newest 100 scores of each pair
    for pair in PAIRS:
        assert starting.signals.baselines.threshold(pair) == expected.threshold(pair) is not None


def side_by_side(replicas: list[Replica], traces: list[TraceEvent], clock: Clock) -> None:
    """Each replica judges one batch of its third of ``traces``, the three at once (a trace of
    each in turn), as replicas starting together on a backlog do."""
    shares = [traces[i::3] for i in range(3)]
    observed: list[list[Observation]] = [[] for _ in replicas]
    for replica in replicas:
        replica.sharing.prepare()
    for events in zip(*shares, strict=False):
        for replica, event, batch in zip(replicas, events, observed, strict=True):
            batch.append(Observation(event, "test", NOW, replica.judge_one(event)))
    clock.now += 1.0
    for replica, batch in zip(replicas, observed, strict=True):
        for observation in batch:
            replica.sharing.consume(observation)
        replica.sharing.flush(1.0)


@pytest.mark.parametrize("share_warming", [True, False], ids=["warming-shared", "warming-alone"])
def test_replicas_starting_together_warm_a_pair_after_as_many_scores_as_one_process(url, share_warming,
                                                                                     monkeypatch):
    if not share_warming:  # a warming pair's scores wait for the end of the batch, as the others'
        monkeypatch.setattr(score_share, "WARMING_SYNC", 10**9)
    config = SignalsConfig(low_score_min_samples=100, low_score_window=2000, low_score_sync_seconds=1.0)
    clock = Clock()
    replicas = [Replica(url, clock, config, name) for name in "abc"]
    traces = stream(1500, seed=11)
    side_by_side(replicas, traces, clock)
    one = SignalEngine(config, Catalog(), explain=False)
    one_warming = Counter((event.index.name, r.retriever) for event in traces
                          for r in one.trace(event).retrievals if r.warming)
    assert one_warming == {pair: 100 for pair in PAIRS}  # what warming means: min_samples scores unjudged
    group = sum((r.warming for r in replicas), Counter())
    if share_warming:
        # each replica shares every WARMING_SYNC scores: at most that many more per replica go unjudged
        assert all(one_warming[pair] <= group[pair] <= one_warming[pair] + 3 * WARMING_SYNC for pair in PAIRS), group
    else:  # each warms alone: three times as many
        assert all(group[pair] >= 2.5 * one_warming[pair] for pair in PAIRS), group
    # and from the next batch on, all three hold one process's percentile of what was judged
    clock.now += 1.0
    for replica in replicas:
        replica.sharing.prepare()
    for pair in PAIRS:
        assert {r.signals.baselines.threshold(pair) for r in replicas} == {one.baselines.threshold(pair)}


def test_rows_committed_out_of_id_order_are_read_once(url):
    engine = make_engine(url)
    share = ScoreShare(engine, "reader", window=100)

    def row(row_id: int, score: float) -> None:
        with engine.begin() as connection:
            connection.execute(insert(ScoreShareRow.__table__), [
                {"id": row_id, "index_name": "policies", "retriever": "vector", "replica": "writer", "n": 1,
                 "scores": pack([score]), "recorded_at": NOW}])

    row(10, 0.1)
    row(20, 0.2)
    assert [scores for _, scores in share.since()] == [(0.1,), (0.2,)]
    row(15, 0.15)  # a writer that took its id earlier and committed later
    assert [scores for _, scores in share.since()] == [(0.15,)]
    assert share.since() == []
    engine.dispose()


def test_pruning_keeps_a_window_of_every_pair_and_nothing_older_than_the_limit(url):
    engine = make_engine(url)
    now = [NOW]
    share = ScoreShare(engine, "a", window=100, clock=lambda: now[0])
    share.write({("old", "vector"): [0.5]})
    now[0] = NOW + KEEP_SECONDS - 1
    for i in range(10):
        share.write({("policies", "vector"): [i / 10] * 30, ("handbook", "bm25"): [i / 10] * 60})
    share.write({("old", "bm25"): [0.5]})
    now[0] = NOW + KEEP_SECONDS + 1
    share.prune()
    with engine.connect() as connection:
        rows = connection.execute(select(ScoreShareRow.index_name, ScoreShareRow.retriever,
                                         ScoreShareRow.n)).all()
    held: dict[tuple[str, str], int] = {}
    for index, retriever, n in rows:
        held[(index, retriever)] = held.get((index, retriever), 0) + n
    # the newest rows holding 100 scores: 4 rows of 30, 2 of 60; the pair last seen too long ago goes
    assert held == {("policies", "vector"): 120, ("handbook", "bm25"): 120, ("old", "bm25"): 1}
    engine.dispose()


def test_an_unavailable_database_delays_sharing_and_refuses_nothing(tmp_path, caplog):
    config = SignalsConfig(low_score_min_samples=100, low_score_window=100, low_score_sync_seconds=1.0)
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        replica = Replica(f"sqlite:///{tmp_path / 'ragmon.db'}", clock, config, "a")  # never migrated
        share, writes = replica.sharing._share, []
        write = share.write
        share.write = lambda scores: (writes.append(len(scores)), write(scores))
        traces = stream(600)
        for start in range(0, 600, 30):
            clock.now += 1.0
            replica.judge(traces[start:start + 30])  # flush returns True: the batch goes through
    assert "low-score baselines not shared: OperationalError" in caplog.text
    # one try per batch (the flush), and one within the first batch: warming pairs are not shared
    # within a batch while the database is unreachable
    assert len(writes) <= 20 + 1, len(writes)
    assert all(len(scores) <= 2 * config.low_score_window for scores in replica.sharing._pending.values())
    assert replica.signals.baselines.threshold(("policies", "vector")) is not None  # its own scores still count
