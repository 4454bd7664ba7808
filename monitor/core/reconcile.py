"""Reconciliation without traffic: what each index holds against what its documents are now at the
source (docs/catalog.md, "Reconciliation").

For every live index entry (an index event whose ``chunks`` is not 0) and the catalog's state of its
document, per index and the document's tenant:

- ``stale``: the source holds a version the index has not taken in (not deleted); age from the oldest
  change not taken in (the rule of ``ragmon_index_max_staleness_seconds``);
- ``deleted``: the source deleted the document and the index still serves it; age from the deletion;
- ``acl_narrower``: a revocation waiting in the index: someone the index still lets read the chunks
  is no longer allowed at the source (:func:`revoked`);
- ``acl_wider``: someone the source allows is not yet let read by the index (:func:`granted`).
  A document whose readers were swapped (``group:a`` to ``group:b``) is both.

The kinds are conditions, not a partition: a document can be stale and narrower at once. An ACL
drift's age runs from the later of the two statements (the source's last change, the indexing): the
drift is at least that old, and exactly so when the ACL change was the source's last change.

What cannot be judged is counted, never read as health (``reason``): ``unknown_document`` (the
catalog holds no document for the entry: nothing is judged), ``source_acl_unknown`` and
``index_acl_unknown`` (no ACL on that side: the ACL kinds are not judged; a document may count under
both). Pure: the catalog's states and the time come in.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ragmon.monitor.core.acl import EVERYONE
from ragmon.monitor.core.catalog import Catalog, DocumentState, IndexedState, pending_since

EVERY_SECONDS = 30.0  # a Reconciler walks the catalog at most this often (docs/catalog.md, its cost)
MAX_EXAMPLES = 10  # documents named per tenant, index and kind: the oldest (SPEC §4: up to 10 ids)
CALLER_KINDS = ("user:", "group:", "tenant:")  # the principals a caller holds (access.caller_principals)


class Drift(StrEnum):
    """What is wrong with an index entry (the ``kind`` label): a closed set."""

    STALE = "stale"
    DELETED = "deleted"
    ACL_NARROWER = "acl_narrower"
    ACL_WIDER = "acl_wider"


class NotJudged(StrEnum):
    """Why an index entry was not judged (the ``reason`` label): a closed set."""

    UNKNOWN_DOCUMENT = "unknown_document"
    SOURCE_ACL_UNKNOWN = "source_acl_unknown"
    INDEX_ACL_UNKNOWN = "index_acl_unknown"


RULES = {
    Drift.STALE: "the source holds a newer version than the index serves",
    Drift.DELETED: "the source deleted the document and the index still serves it",
    Drift.ACL_NARROWER: "revocation pending: the index still lets read {principals}, whom the source no longer allows",
    Drift.ACL_WIDER: "the source allows {principals}, whom the index does not yet let read",
}


def readers(acl: Iterable[str]) -> frozenset[str]:
    """The principals of ``acl`` that can admit a caller: ``*`` and ``user:``, ``group:``,
    ``tenant:`` principals. A bare name or another kind matches no caller, so it admits nobody."""
    return frozenset(p for p in acl if p == EVERYONE or p.startswith(CALLER_KINDS))


def revoked(source_acl: Iterable[str], index_acl: Iterable[str]) -> frozenset[str]:
    """The principals the index admits that the source no longer does: not empty exactly when some
    caller the index lets read is refused by the source.

    A caller is admitted by an ACL holding ``*`` or one of the caller's principals. The source
    admitting everyone (``*``) revokes no one; the index admitting everyone and the source not
    revokes ``*`` (a caller with none of the source's principals exists); else every principal of
    the index the source does not hold is revoked (the caller holding that principal and none of
    the source's is refused). Principals that admit no caller (:func:`readers`) are left out."""
    source, index = readers(source_acl), readers(index_acl)
    if EVERYONE in source:
        return frozenset()
    if EVERYONE in index:
        return frozenset({EVERYONE})
    return index - source


def granted(source_acl: Iterable[str], index_acl: Iterable[str]) -> frozenset[str]:
    """The principals the source admits that the index does not: the mirror of :func:`revoked`."""
    return revoked(index_acl, source_acl)


@dataclass(frozen=True, slots=True)
class Example:
    """One document named by a drift: its id, since when, and the principals an ACL drift is about."""

    doc_id: str
    since: float
    principals: tuple[str, ...] = ()


@dataclass
class Tally:
    """The documents of one tenant, index and kind."""

    documents: int = 0
    oldest_since: float | None = None
    examples: list[Example] = field(default_factory=list)  # the oldest MAX_EXAMPLES, oldest first


Key = tuple[str, str]  # (tenant, index)


@dataclass
class Reconciliation:
    """The figures of :func:`reconcile` at ``as_of``: live entries per tenant and index, drift per
    tenant, index and kind, entries not judged per tenant, index and reason."""

    as_of: float
    entries: dict[Key, int] = field(default_factory=dict)
    drift: dict[tuple[str, str, Drift], Tally] = field(default_factory=dict)
    not_judged: dict[tuple[str, str, NotJudged], int] = field(default_factory=dict)

    def tally(self, tenant: str, index: str, kind: Drift) -> Tally:
        return self.drift.get((tenant, index, kind)) or Tally()

    def oldest_seconds(self, tenant: str, index: str, kind: Drift) -> float:
        since = self.tally(tenant, index, kind).oldest_since
        return 0.0 if since is None else max(0.0, self.as_of - since)


def reconcile(documents: Mapping[str, DocumentState], entries: Iterable[IndexedState], now: float,
              unknown_tenant: str = "unknown") -> Reconciliation:
    """Walk the live index entries once against their documents (see the module's rules): costs one
    pass over the entries, a set difference per entry with ACLs on both sides, and a heap per
    tenant, index and kind for the examples. An entry whose document the catalog does not know is
    counted under ``unknown_tenant``."""
    result = Reconciliation(now)
    found: dict[tuple[str, str, Drift], list[Example]] = {}
    for entry in entries:
        if entry.chunks == 0:
            continue  # removed: the index serves nothing of it
        document = documents.get(entry.doc_id)
        tenant = document.tenant if document is not None else unknown_tenant
        key = (tenant, entry.index)
        result.entries[key] = result.entries.get(key, 0) + 1
        if document is None:
            _count(result, tenant, entry.index, NotJudged.UNKNOWN_DOCUMENT)
            continue
        for kind, example in _drifts(document, entry):
            found.setdefault((tenant, entry.index, kind), []).append(example)
        if document.deleted:
            continue  # its ACL no longer matters: it should not be served at all
        if document.acl is None:
            _count(result, tenant, entry.index, NotJudged.SOURCE_ACL_UNKNOWN)
        if entry.acl is None:
            _count(result, tenant, entry.index, NotJudged.INDEX_ACL_UNKNOWN)
    for key, examples in found.items():
        oldest = heapq.nsmallest(MAX_EXAMPLES, examples, key=lambda e: (e.since, e.doc_id))
        result.drift[key] = Tally(len(examples), oldest[0].since, oldest)
    return result


def _drifts(document: DocumentState, entry: IndexedState) -> Iterable[tuple[Drift, Example]]:
    if document.deleted:
        yield Drift.DELETED, Example(entry.doc_id, document.modified_at)
        return
    if entry.version != document.version:
        since = pending_since(document, entry, removed=False)
        if since is not None:  # else the index is ahead of the change feed
            yield Drift.STALE, Example(entry.doc_id, since)
    if document.acl is None or entry.acl is None:
        return
    if document.acl == entry.acl:
        return  # the common case, level: no set built
    since = max(document.modified_at, entry.indexed_at)
    narrower, wider = revoked(document.acl, entry.acl), granted(document.acl, entry.acl)
    if narrower:
        yield Drift.ACL_NARROWER, Example(entry.doc_id, since, tuple(sorted(narrower)))
    if wider:
        yield Drift.ACL_WIDER, Example(entry.doc_id, since, tuple(sorted(wider)))


def _count(result: Reconciliation, tenant: str, index: str, reason: NotJudged) -> None:
    key = (tenant, index, reason)
    result.not_judged[key] = result.not_judged.get(key, 0) + 1


class Reconciler:
    """:func:`reconcile` over a live catalog, walked at most every ``every`` seconds: the metrics
    at each scrape, the status page at each refresh and the CLI share the last walk. The walk
    copies the entries (states are replaced, never changed in place: each is a consistent
    snapshot) and runs outside the catalog's lock, so events keep applying meanwhile."""

    def __init__(self, catalog: Catalog, clock: Callable[[], float] = time.time, every: float = EVERY_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._catalog = catalog
        self._clock = clock
        self._every = every
        self._monotonic = monotonic
        self._last: tuple[float, Reconciliation] | None = None
        self._lock = threading.Lock()

    def current(self) -> Reconciliation:
        """The last walk when it is younger than ``every``, else a new one."""
        with self._lock:
            now = self._monotonic()
            if self._last is None or now - self._last[0] >= self._every:
                entries = list(self._catalog.indexed.values())
                self._last = (now, reconcile(self._catalog.documents, entries, self._clock()))
            return self._last[1]
