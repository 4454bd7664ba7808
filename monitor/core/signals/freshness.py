"""Stale passages served: a passage from a document version the catalog knows to be outdated."""

from __future__ import annotations

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import StaleFindings
from ragmon.monitor.core.signals.stages import flag_passages


def is_stale(passage: Passage, catalog: Catalog, index: str | None = None) -> bool:
    """The catalog decides when it knows the document (a deleted document's passages are stale);
    without it, a source modified after it was indexed is stale. ``index``: the trace's index.

    A passage that names no version (spans that report only ids and scores) is judged by the
    version its index last reported embedding: that is what the index served."""
    doc_id = catalog.document_of(passage)
    if doc_id is not None:
        version = passage.doc_version
        if version is None and index is not None:
            version = catalog.indexed_version(index, doc_id)
        outdated = catalog.is_outdated(doc_id, version, index) if version is not None else None
        if outdated is not None:
            return outdated
    if passage.source_modified_at is not None and passage.indexed_at is not None:
        return passage.source_modified_at > passage.indexed_at
    return False


def stale_passages(trace: TraceEvent, catalog: Catalog) -> StaleFindings:
    """Distinct stale passage ids at stage ``candidates`` and ``context``."""
    flagged = flag_passages(trace, lambda passage: is_stale(passage, catalog, trace.index.name), catalog.document_of)
    return StaleFindings(flagged.candidates, flagged.context, flagged.doc_ids)
