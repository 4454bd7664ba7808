"""SampleStore.tallies: the labeling queue counted in one GROUP BY, on SQLite and on PostgreSQL
(which cannot group a json column as it is), equal to counting the samples one by one."""

from __future__ import annotations

from collections import Counter

import pytest

from ragmon.monitor.labeling.sample_store import NewSample, SampleStore
from ragmon.monitor.storage.store import make_engine
from tests.databases import BOTH, migrated_url

STRATA = ({"random"}, {"low_score", "random"}, {"permission_violation"}, {"abstained", "low_score"})


@pytest.fixture(params=BOTH)
def store(request, tmp_path) -> SampleStore:
    engine = make_engine(migrated_url(request, tmp_path, "tallies"))
    store = SampleStore(engine)
    store.upsert([NewSample(f"t{i}", f"tenant-{i % 3}", ("2026-W47", "2026-W48")[i % 2], set(STRATA[i % 4]), "dev",
                            f"f{i}", 0.0, {"query": "q" * 100}) for i in range(200)])
    store.mark_exported([f"t{i}" for i in range(0, 200, 5)])
    yield store
    engine.dispose()


def test_tallies_equal_the_samples_counted_one_by_one(store):
    by_stratum, by_status = Counter(), Counter()
    for tally in store.tallies(week="2026-W48"):
        assert tally.week == "2026-W48" and tally.strata == tuple(sorted(tally.strata))
        by_status[tally.status] += tally.samples
        by_stratum.update({(tally.tenant, stratum): tally.samples for stratum in tally.strata})
    samples = store.find(week="2026-W48")
    assert by_status == Counter(s.status for s in samples)
    assert by_stratum == Counter((s.tenant, stratum) for s in samples for stratum in s.strata)


def test_tallies_across_tenants_of_one_status(store):
    tallies = store.tallies(week="2026-W47", status="queued", per_tenant=False)
    assert {t.tenant for t in tallies} == {None} and {t.status for t in tallies} == {"queued"}
    queued = store.find(week="2026-W47", status="queued")
    assert {t.strata: t.samples for t in tallies} == Counter(tuple(s.strata) for s in queued)
    assert len(tallies) == 2  # weeks alternate, so W47 holds the even samples: two sets of strata
