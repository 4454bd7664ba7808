"""The reconciliation gauges (docs/catalog.md, "Reconciliation"): per tenant and index, the live index
entries, the documents each drift kind holds and the age of its oldest, and the entries not judged
by reason, computed at scrape time from the last walk of the catalog (:class:`Reconciler`, at most
every 30 s).

Every kind is exported for every tenant and index holding a live entry, zeros included, so that a
resolved drift goes back to 0 instead of vanishing and a dashboard can tell "none" from "not
reported". Tenant and index names go through their label caps: names beyond a cap add up under
``other`` (counts summed, the oldest age kept).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ragmon.exporters.instruments import LabelCap
from ragmon.exporters.metrics import BY_NAME
from ragmon.monitor.core.reconcile import Drift, NotJudged, Reconciler

ENTRIES = "ragmon_index_entries"
DRIFT = "ragmon_index_drift_documents"
OLDEST = "ragmon_index_drift_oldest_seconds"
NOT_JUDGED = "ragmon_index_drift_unjudged_documents"


def _gauge(name: str) -> GaugeMetricFamily:
    spec = BY_NAME[name]
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


class ReconciliationCollector(Collector):
    """The gauges above from ``reconciler``'s last walk; ``tenant`` and ``index``: the label caps."""

    def __init__(self, reconciler: Reconciler, tenant: LabelCap, index: LabelCap) -> None:
        self._reconciler = reconciler
        self._tenant = tenant
        self._index = index

    def collect(self):
        result = self._reconciler.current()
        entries: dict[tuple[str, str], int] = {}
        drift: dict[tuple[str, str, str], list[float]] = {}  # -> [documents, oldest seconds]
        not_judged: dict[tuple[str, str, str], int] = {}
        for (tenant, index), n in result.entries.items():
            key = (self._tenant(tenant), self._index(index))
            entries[key] = entries.get(key, 0) + n
            for kind in Drift:
                counted = drift.setdefault((*key, kind.value), [0, 0.0])
                counted[0] += result.tally(tenant, index, kind).documents
                counted[1] = max(counted[1], result.oldest_seconds(tenant, index, kind))
            for reason in NotJudged:
                labels = (*key, reason.value)
                not_judged[labels] = not_judged.get(labels, 0) + result.not_judged.get((tenant, index, reason), 0)
        families = [_gauge(name) for name in (ENTRIES, DRIFT, OLDEST, NOT_JUDGED)]
        for labels, n in sorted(entries.items()):
            families[0].add_metric(list(labels), n)
        for labels, (n, oldest) in sorted(drift.items()):
            families[1].add_metric(list(labels), n)
            families[2].add_metric(list(labels), oldest)
        for labels, n in sorted(not_judged.items()):
            families[3].add_metric(list(labels), n)
        return families

    def describe(self):
        return []  # values exist only at scrape time; registering must not call collect()
