"""Stale passages served: a passage from a document version the catalog knows to be outdated."""

from __future__ import annotations

from monitor.catalog import Catalog
from monitor.model import Passage, TraceEvent
from monitor.signals.results import MAX_IDS, StaleFindings


def is_stale(passage: Passage, catalog: Catalog) -> bool:
    """The catalog decides when it knows the document; without it, a source modified after it
    was indexed is stale."""
    if passage.doc_id is not None and passage.doc_version is not None:
        outdated = catalog.is_outdated(passage.doc_id, passage.doc_version)
        if outdated is not None:
            return outdated
    if passage.source_modified_at is not None and passage.indexed_at is not None:
        return passage.source_modified_at > passage.indexed_at
    return False


def stale_passages(trace: TraceEvent, catalog: Catalog) -> StaleFindings:
    """Distinct stale passage ids at stage ``candidates`` and ``context``."""
    verdicts: dict[str, bool] = {}
    doc_ids: list[str] = []

    def stale(passages: list[Passage]) -> set[str]:
        found = set()
        for passage in passages:
            if passage.id not in verdicts:
                verdicts[passage.id] = is_stale(passage, catalog)
            if verdicts[passage.id]:
                found.add(passage.id)
                if passage.doc_id and passage.doc_id not in doc_ids and len(doc_ids) < MAX_IDS:
                    doc_ids.append(passage.doc_id)
        return found

    candidates: set[str] = set()
    for retrieval in trace.retrievals:
        candidates |= stale(retrieval.passages)
    context = stale(trace.final_context())
    return StaleFindings(len(candidates), len(context), doc_ids)
