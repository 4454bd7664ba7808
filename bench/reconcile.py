"""The cost of one reconciliation walk (monitor/core/reconcile.py) for a catalog of a given size: the
figure docs/catalog.md ("Reconciliation", its cost) quotes. A catalog of N documents in 5 tenants,
each in one index, with ACLs on both sides; a tenth of them stale, a tenth with the index's ACL
wider than the source's. Prints the CPU seconds of a walk (the best of 5) and of the scrape that
reads it. ``python -m bench.reconcile [--documents N ...]``.
"""

from __future__ import annotations

import argparse
import time

from prometheus_client import CollectorRegistry, generate_latest

from ragmon.exporters.instruments import LabelCap
from ragmon.exporters.reconciliation import ReconciliationCollector
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.reconcile import Reconciler, reconcile

NOW = 1_796_000_000.0


def catalog_of(documents: int) -> Catalog:
    catalog = Catalog()
    for n in range(documents):
        doc_id, tenant = f"doc-{n:07d}", f"tenant-{n % 5}"
        catalog.apply(DocumentEvent(doc_id=doc_id, tenant=tenant, version="v2" if n % 10 == 1 else "v1",
                                    modified_at=NOW - 3600 + (n % 10 == 1) * 60, acl=["group:staff", "group:hr"]))
        acl = ["group:staff", "group:hr", "group:all"] if n % 10 == 2 else ["group:staff", "group:hr"]
        catalog.apply(IndexEvent(index=f"index-{n % 3}", doc_id=doc_id, version="v1", indexed_at=NOW - 3000, acl=acl))
    return catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    for documents in args.documents:
        catalog = catalog_of(documents)
        walks = []
        for _ in range(5):
            started = time.process_time()
            result = reconcile(catalog.documents, list(catalog.indexed.values()), NOW)
            walks.append(time.process_time() - started)
        registry = CollectorRegistry()
        registry.register(ReconciliationCollector(Reconciler(catalog, lambda: NOW), LabelCap((), 50), LabelCap((), 50)))
        generate_latest(registry)  # the walk
        started = time.process_time()
        generate_latest(registry)  # a scrape within the interval: the last walk, read
        scrape = time.process_time() - started
        narrower = sum(t.documents for (_, _, kind), t in result.drift.items() if kind == "acl_narrower")
        print(f"{documents:>9,} documents: walk {min(walks) * 1000:7.1f} ms CPU, scrape from the last walk "
              f"{scrape * 1000:5.1f} ms; {narrower:,} revocations pending found")


if __name__ == "__main__":
    main()
