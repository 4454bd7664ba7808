"""From a source's last snapshot and its new one to the catalog events that move the catalog from the
one to the other: pure, so that every rule of a sync is tested without a source or a database.

- A document (index entry) new or different since the last snapshot is sent; so is one the catalog at
  hand (when one is given) does not hold as the snapshot says, unless the catalog knows a later change
  of it (from another feed): a process that did not take part in the last sync (a ``serve`` while
  ``ragmon catalog sync`` ran in another) is brought level, and nothing is sent twice to one that did.
  Events that go to the Kafka catalog topic need no such catch-up (every replica reads the topic), and
  the process sending them may hold no current catalog: they are planned without one.
- A document gone from the source becomes a tombstone (``deleted: true``, its last version, the time
  of the sync); an index entry gone becomes a removal (``chunks: 0``). Tombstones and removals stay in
  the snapshot for :data:`KEEP_GONE_SECONDS`, so a later sync neither sends them again nor forgets them.
- An unchanged version keeps the changed time it was first seen with (a file touched, or committed
  later, is not a new version); a document back after its tombstone is dated no earlier than the
  tombstone, or the catalog would keep it deleted.
  Likewise an index entry of an unchanged version keeps the time it was first indexed with.
- Items the source could not read (``unread``) keep their last state.
- A sync that would delete more than ``max_deletion_share`` of what the last snapshot held is *held*:
  no event, no new snapshot (``accept_deletions`` lets one through).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from ragmon.collectors.catalog_sources.base import IndexKey, Snapshot
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, IndexEvent

KEEP_GONE_SECONDS = 30 * 86400.0  # tombstones and removals remembered by a source's snapshot

_encode = msgspec.json.Encoder().encode


@dataclass
class SyncPlan:
    """What one sync would do. ``documents`` and ``index_entries`` are the source's snapshot once the
    events are applied (None: the source says nothing of that kind, its last state stays)."""

    events: list[DocumentEvent | IndexEvent] = field(default_factory=list)
    documents: dict[str, DocumentEvent] | None = None
    index_entries: dict[IndexKey, IndexEvent] | None = None
    changes: Counter[str] = field(default_factory=Counter)  # document, tombstone, index, removal
    deletions: int = 0  # tombstones and removals this sync makes
    live_before: int = 0  # live documents and index entries of the last snapshot
    held: bool = False

    @property
    def deletion_share(self) -> float:
        return self.deletions / self.live_before if self.live_before else 0.0

    def keep_last(self, event: DocumentEvent | IndexEvent, previous_documents: Mapping[str, DocumentEvent],
                  previous_entries: Mapping[IndexKey, IndexEvent]) -> None:
        """``event`` was not taken (the catalog refused it): the snapshot keeps what it held of that
        item before, so the next sync sends it again."""
        if isinstance(event, DocumentEvent) and self.documents is not None:
            _restore(self.documents, event.doc_id, previous_documents)
        elif isinstance(event, IndexEvent) and self.index_entries is not None:
            _restore(self.index_entries, (event.index, event.doc_id), previous_entries)


def plan_sync(previous_documents: Mapping[str, DocumentEvent], previous_entries: Mapping[IndexKey, IndexEvent],
              snapshot: Snapshot, catalog: Catalog | None, now: float, *, max_deletion_share: float,
              accept_deletions: bool = False) -> SyncPlan:
    """The events that take the catalog from ``previous_*`` (the last snapshot applied) to ``snapshot``;
    ``catalog``: the one to bring level as well (None: the snapshot alone decides)."""
    plan = SyncPlan()
    if snapshot.documents is not None:
        plan.documents = _documents(previous_documents, snapshot, now, plan)
        for doc_id, event in plan.documents.items():
            before = previous_documents.get(doc_id)
            if _differs(before, event) or (catalog is not None and _document_disagrees(catalog, event)):
                plan.events.append(event)
                plan.changes[change_kind(event)] += 1
    if snapshot.index_entries is not None:
        plan.index_entries = _entries(previous_entries, snapshot, now, plan)
        for key, entry in plan.index_entries.items():
            before = previous_entries.get(key)
            if _differs(before, entry) or (catalog is not None and _entry_disagrees(catalog, entry)):
                plan.events.append(entry)
                plan.changes[change_kind(entry)] += 1
    if plan.deletion_share > max_deletion_share and not accept_deletions:
        plan.held = True
        plan.events = []
        plan.changes = Counter()
    return plan


def change_kind(event: DocumentEvent | IndexEvent) -> str:
    """What an event of a sync is (the ``kind`` label of ``ragmon_catalog_source_changes_total``)."""
    if isinstance(event, DocumentEvent):
        return "tombstone" if event.deleted else "document"
    return "removal" if event.chunks == 0 else "index"


def _documents(previous: Mapping[str, DocumentEvent], snapshot: Snapshot, now: float,
               plan: SyncPlan) -> dict[str, DocumentEvent]:
    current = snapshot.documents or {}
    plan.live_before += sum(1 for before in previous.values() if not before.deleted)
    state: dict[str, DocumentEvent] = {}
    for doc_id, event in current.items():
        before = previous.get(doc_id)
        if before is not None and not before.deleted and before.version == event.version:
            event.modified_at = before.modified_at
        elif before is not None and before.deleted and event.modified_at <= before.modified_at:  # type: ignore[operator]
            event.modified_at = max(now, before.modified_at)  # type: ignore[type-var]
        state[doc_id] = event
    for doc_id, before in previous.items():
        if doc_id in current:
            continue
        if doc_id in snapshot.unread:
            state[doc_id] = before
        elif before.deleted:
            if now - before.modified_at < KEEP_GONE_SECONDS:  # type: ignore[operator]
                state[doc_id] = before
        else:
            plan.deletions += 1
            state[doc_id] = DocumentEvent(doc_id=doc_id, version=before.version,
                                          modified_at=max(now, before.modified_at),  # type: ignore[type-var]
                                          tenant=before.tenant, acl=before.acl, deleted=True)
    return state


def _entries(previous: Mapping[IndexKey, IndexEvent], snapshot: Snapshot, now: float,
             plan: SyncPlan) -> dict[IndexKey, IndexEvent]:
    current = snapshot.index_entries or {}
    plan.live_before += sum(1 for before in previous.values() if before.chunks != 0)
    state: dict[IndexKey, IndexEvent] = dict(current)
    for key, entry in current.items():
        before = previous.get(key)
        # an unchanged version keeps the time it was first indexed (a source that knows no time gives
        # the sync's, which must not make it new lag at every sync)
        if (before is not None and before.chunks != 0 and before.version == entry.version
                and before.indexed_at < entry.indexed_at):  # type: ignore[operator]
            entry.indexed_at = before.indexed_at
    for key, before in previous.items():
        if key in current:
            continue
        if key in snapshot.unread_entries:
            state[key] = before
        elif before.chunks == 0:
            if now - before.indexed_at < KEEP_GONE_SECONDS:  # type: ignore[operator]
                state[key] = before
        else:
            plan.deletions += 1
            state[key] = IndexEvent(index=before.index, doc_id=before.doc_id, version=before.version,
                                    indexed_at=max(now, before.indexed_at),  # type: ignore[type-var]
                                    embedding_model=before.embedding_model, chunks=0)
    return state


def _differs(before: DocumentEvent | IndexEvent | None, event: DocumentEvent | IndexEvent) -> bool:
    return before is None or (before is not event and _encode(before) != _encode(event))


def _document_disagrees(catalog: Catalog, event: DocumentEvent) -> bool:
    """The catalog at hand does not hold the document as ``event`` says, and knows no later change."""
    current = catalog.document(event.doc_id)
    if current is None:
        return not event.deleted
    if current.modified_at > event.modified_at:  # type: ignore[operator]
        return False
    acl = tuple(event.acl) if event.acl is not None else None
    return (current.version, current.tenant, current.acl, current.deleted) != (
        event.version, event.tenant, acl, event.deleted)


def _entry_disagrees(catalog: Catalog, entry: IndexEvent) -> bool:
    current = catalog.indexed.get((entry.index, entry.doc_id))
    if current is None:
        return entry.chunks != 0
    if current.indexed_at > entry.indexed_at:  # type: ignore[operator]
        return False
    acl = tuple(entry.acl) if entry.acl is not None else None
    return (current.version, current.embedding_model, current.chunks, current.acl) != (
        entry.version, entry.embedding_model, entry.chunks, acl)


def _restore(state: dict, key, previous: Mapping) -> None:
    if key in previous:
        state[key] = previous[key]
    else:
        state.pop(key, None)
