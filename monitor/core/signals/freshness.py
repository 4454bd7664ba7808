"""Stale passages served: a passage from a document version the catalog knows to be outdated."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.core.signals.results import StaleFindings, Unjudged
from ragmon.monitor.core.signals.stages import StageIds, flag_passages


class Freshness(Enum):
    """Whether a passage is stale and what decided it. ``stale``: the verdict."""

    OUTDATED = ("outdated", True)  # the catalog knows a newer version than the one served
    DELETED = ("deleted", True)  # the catalog records the document as deleted
    CURRENT = ("current", False)  # the catalog holds the served version as current
    SOURCE_CHANGED = ("source_changed", True)  # no say of the catalog: modified after it was indexed
    NO_EVIDENCE = ("no_evidence", False)

    def __init__(self, _name: str, stale: bool) -> None:
        self.stale = stale


#: A passage's :class:`Freshness`, and the version served when the catalog decided. A plain tuple:
#: one is made for every passage copy of every trace.
Staleness = tuple[Freshness, str | None]
_NO_EVIDENCE: Staleness = (Freshness.NO_EVIDENCE, None)
_SOURCE_CHANGED: Staleness = (Freshness.SOURCE_CHANGED, None)


def staleness(passage: Passage, catalog: Catalog, index: str | None = None) -> Staleness:
    """The catalog decides when it knows the document (a deleted document's passages are stale);
    without it, a source modified after it was indexed is stale. ``index``: the trace's index.

    A passage that names no version (spans that report only ids and scores) is judged by the
    version its index last reported embedding: that is what the index served."""
    doc_id = catalog.document_of(passage)
    if doc_id is not None:
        decided = _catalog_staleness(doc_id, passage.doc_version, catalog, index)
        if decided is not None:
            return decided
    return _SOURCE_CHANGED if _source_changed(passage) else _NO_EVIDENCE


def _catalog_staleness(doc_id: str, version: str | None, catalog: Catalog, index: str | None) -> Staleness | None:
    """What the catalog says of ``version`` of ``doc_id`` served from ``index``; None: nothing."""
    if version is None and index is not None:
        version = catalog.indexed_version(index, doc_id)
    if version is None:  # whatever version was served, a deleted document's passage is stale
        document = catalog.document(doc_id)
        return (Freshness.DELETED, None) if document is not None and document.deleted else None
    outdated = catalog.is_outdated(doc_id, version, index)
    if outdated is None:
        return None
    if not outdated:
        return Freshness.CURRENT, version
    document = catalog.document(doc_id)
    return (Freshness.DELETED if document is not None and document.deleted else Freshness.OUTDATED), version


def stale_as_of(catalog: Catalog, doc_id: str, version: str | None, index: str, at: float
                ) -> tuple[Freshness, str, str | None] | None:
    """Whether ``version`` of ``doc_id`` (None: the version ``index`` held, if it reported it by
    ``at``) was stale at time ``at``, by what the catalog knows now: (OUTDATED or DELETED, the
    version served, the version current at ``at``), or None when it was current then or nothing
    tells. Used to judge a trace again after the catalog changed (``signals/late.py``): a change
    made after the trace is not held against it, and a version the change feed never announced
    decides nothing."""
    document = catalog.document(doc_id)
    if document is None:
        return None
    if version is None:
        entry = catalog.indexed.get((index, doc_id))
        if entry is None or entry.indexed_at > at:
            return None
        version = entry.version
    if document.deleted and document.modified_at <= at:
        return Freshness.DELETED, version, None
    made = document.history.get(version)
    known = [(when, name) for name, when in document.history.items() if when <= at]
    if made is None or made > at or not known:
        return None
    current = max(known)[1]
    return (Freshness.OUTDATED, version, current) if made < document.history[current] else None


def _source_changed(passage: Passage) -> bool:
    return passage.source_modified_at is not None and passage.indexed_at is not None \
        and passage.source_modified_at > passage.indexed_at


def is_stale(passage: Passage, catalog: Catalog, index: str | None = None) -> bool:
    """Whether the passage is stale (:func:`staleness`)."""
    return staleness(passage, catalog, index)[0].stale


def stale_judge(trace: TraceEvent, catalog: Catalog) -> Callable[[Passage], bool | None]:
    """:func:`is_stale` for the passages of ``trace``, None for a passage nothing says anything of
    (the catalog cannot decide, and it lacks ``indexed_at`` or ``source_modified_at``): not judged.
    The chunks and copies of one document version share the catalog's verdict, computed once."""
    index = trace.index.name
    by_version: dict[tuple[str, str | None], Staleness | None] = {}

    def judge(passage: Passage) -> bool | None:
        doc_id = catalog.document_of(passage)
        if doc_id is not None:
            key = (doc_id, passage.doc_version)
            if key in by_version:
                decided = by_version[key]
            else:
                decided = by_version[key] = _catalog_staleness(doc_id, passage.doc_version, catalog, index)
            if decided is not None:
                return decided[0].stale
        if passage.source_modified_at is None or passage.indexed_at is None:
            return None
        return passage.source_modified_at > passage.indexed_at

    return judge


def unjudged_freshness(catalog: Catalog) -> Callable[[list[Passage]], Unjudged]:
    """Why no copy of a passage could be judged for freshness: the catalog knows the document of
    one of them but not which version was served (no copy names one and its index reported none:
    ``no_version``), or knows none of their documents (``unknown_document``); either way no copy
    carries both ``indexed_at`` and ``source_modified_at``."""

    def reason(copies: list[Passage]) -> Unjudged:
        for passage in copies:
            doc_id = catalog.document_of(passage)
            if doc_id is not None and catalog.document(doc_id) is not None:
                return Unjudged.NO_VERSION
        return Unjudged.UNKNOWN_DOCUMENT

    return reason


def stale_passages(trace: TraceEvent, catalog: Catalog, stages: StageIds | None = None) -> StaleFindings:
    """Distinct stale passage ids at stage ``candidates`` and ``context``, and the coverage of the
    check (which passages could be judged at all). ``stages``: the trace's ``stage_ids``, when at
    hand."""
    flagged = flag_passages(trace, stale_judge(trace, catalog), catalog.document_of, unjudged_freshness(catalog),
                            stages)
    return StaleFindings(flagged.candidates, flagged.context, flagged.doc_ids, flagged.coverage, flagged.flagged)
