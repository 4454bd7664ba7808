"""The catalog: what the source systems say exists (document events) and what each index holds
(index events). Kept in memory for the hot path; persisted by ``ragmon.monitor.storage.catalog_store``.

Document ids are global (the change feed of every tenant shares one id space); each document
records its tenant, which is how a passage of another tenant is recognized.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ragmon.monitor.core.errors import InvalidInput, Reason
from ragmon.monitor.core.model import DocumentEvent, Event, IndexEvent, Passage

MAX_VERSION_HISTORY = 16  # versions remembered per document, to tell an old version from a new one
STALEST_IDS = 10  # stale document ids kept per index, for alerts


@dataclass(slots=True)
class DocumentState:
    """The newest known version of a source document, and when its recent versions changed.

    Treated as immutable once in the catalog (a change replaces it)."""

    doc_id: str
    tenant: str
    version: str
    modified_at: float
    acl: tuple[str, ...] | None
    deleted: bool
    history: dict[str, float] = field(default_factory=dict)  # version -> modified_at, newest last


@dataclass(slots=True)
class IndexedState:
    """What one index holds of one document; ``acl``: who the index lets read its chunks, as the
    index event said (None: unknown), compared with the document's own ACL by reconciliation."""

    index: str
    doc_id: str
    version: str
    indexed_at: float
    embedding_model: str | None
    chunks: int | None
    acl: tuple[str, ...] | None = None


@dataclass(slots=True)
class IndexHealth:
    """Per-index figures computed from the catalog at a point in time."""

    stale_documents: int = 0
    max_staleness_seconds: float = 0.0
    embedding_models: int = 0
    stalest: list[str] = field(default_factory=list, compare=False)  # the stalest document ids (STALEST_IDS)


class Catalog:
    """Thread-safe in-memory catalog. Writes take a lock; single-key reads rely on dict atomicity.

    Index health is kept up to date as events arrive (which documents each index holds stale, since
    when, and its embedding models), so that reading it costs the stale documents, not the catalog:
    Prometheus reads it at every scrape.
    """

    def __init__(self, max_documents: int | None = None, max_index_entries: int | None = None) -> None:
        """``max_documents`` and ``max_index_entries`` bound the catalog: a new document or index
        entry beyond them is refused (:class:`InvalidInput` ``catalog_full``), changes to known
        ones still apply."""
        self._max_documents = max_documents
        self._max_index_entries = max_index_entries
        self.documents: dict[str, DocumentState] = {}
        self.indexed: dict[tuple[str, str], IndexedState] = {}
        self._lock = threading.Lock()
        self._holders: dict[str, set[str]] = {}  # doc_id -> the indexes holding an entry of it
        self._stale: dict[str, dict[str, float]] = {}  # index -> doc_id -> its oldest change not taken in
        self._models: dict[str, Counter[str]] = {}  # index -> embedding model -> entries (not removed)
        # the last index event applied and the lag it took in: the catalog stage and the signals
        # run one after the other on each event (see lag_taken_in)
        self._last_lag: tuple[IndexEvent, float | None] | None = None

    def apply_document(self, event: DocumentEvent) -> DocumentState:
        """Record a document change. An older change arriving late only enters the history.

        States are replaced, never changed in place, so a reader holding one sees a consistent
        snapshot without the lock. An event that changes nothing (sent again) leaves the very
        state object in place.
        """
        acl = tuple(event.acl) if event.acl is not None else None
        with self._lock:
            current = self.documents.get(event.doc_id)
            if current is None and self._max_documents is not None and len(self.documents) >= self._max_documents:
                raise InvalidInput(Reason.CATALOG_FULL, f"the catalog holds {len(self.documents)} documents "
                                   "(catalog.max_documents)")
            history = dict(current.history) if current is not None else {}
            if not (event.deleted and event.version in history):
                # a deletion is not a new version: keep when the version was made
                _remember(history, event.version, event.modified_at)
            if current is None or event.modified_at >= current.modified_at:
                state = DocumentState(event.doc_id, event.tenant, event.version, event.modified_at, acl,
                                      event.deleted, history)
            else:
                state = replace(current, history=history)
            if state == current:
                return current
            self.documents[event.doc_id] = state
            for index in self._holders.get(event.doc_id, ()):
                self._judge(index, event.doc_id)
            return state

    def apply(self, event: Event) -> str | None:
        """The catalog stage of the pipeline: document and index events update the catalog before
        any signal reads it; other events leave it as it is. Returns the id of the document whose
        state (or an index's entry of it) the event changed, None when it changed nothing (an event
        sent again, an older one). Raises :class:`InvalidInput` when the catalog is full."""
        if isinstance(event, DocumentEvent):
            before = self.documents.get(event.doc_id)
            return event.doc_id if self.apply_document(event) is not before else None
        if isinstance(event, IndexEvent):
            before = self.indexed.get((event.index, event.doc_id))
            self.apply_index(event)
            after = self.indexed.get((event.index, event.doc_id))
            return event.doc_id if after is not before and after != before else None
        return None

    def apply_index(self, event: IndexEvent) -> float | None:
        """Record what an index embedded; return the index lag the event shows (:meth:`index_lag`)
        when it brings the index a version of the document it did not hold, else None: an event
        sent again, replayed, older than what the index holds, or re-indexing the version it holds
        takes no source change in, so it is no new lag. :meth:`lag_taken_in` gives the same
        figure to the signals."""
        key = (event.index, event.doc_id)
        lag = None
        with self._lock:
            current = self.indexed.get(key)
            if current is None and self._max_index_entries is not None and \
                    len(self.indexed) >= self._max_index_entries:
                raise InvalidInput(Reason.CATALOG_FULL, f"the catalog holds {len(self.indexed)} index entries "
                                   "(catalog.max_index_entries)")
            if current is None or event.indexed_at >= current.indexed_at:
                entry = IndexedState(event.index, event.doc_id, event.version, event.indexed_at,
                                     event.embedding_model, event.chunks,
                                     tuple(event.acl) if event.acl is not None else None)
                self.indexed[key] = entry
                self._track(current, entry)
                if event.chunks != 0 and (current is None or current.version != event.version):
                    lag = self.index_lag(event)
            self._last_lag = (event, lag)
        return lag

    def lag_taken_in(self, event: IndexEvent) -> float | None:
        """The lag :meth:`apply_index` returned for ``event`` (this very event, the last one it
        applied), else None: the signals report it once, when the catalog stage took it in."""
        last = self._last_lag
        return last[1] if last is not None and last[0] is event else None

    def _track(self, old: IndexedState | None, new: IndexedState) -> None:
        """Under the lock: the health figures of ``new.index`` after its entry of a document changed."""
        models = self._models.setdefault(new.index, Counter())
        if old is not None and old.embedding_model and old.chunks != 0:
            models[old.embedding_model] -= 1
            if not models[old.embedding_model]:
                del models[old.embedding_model]
        if new.embedding_model and new.chunks != 0:
            models[new.embedding_model] += 1
        self._holders.setdefault(new.doc_id, set()).add(new.index)
        self._judge(new.index, new.doc_id)

    def _judge(self, index: str, doc_id: str) -> None:
        """Under the lock: whether ``index`` holds ``doc_id`` stale now, and since when."""
        entry, document = self.indexed[(index, doc_id)], self.documents.get(doc_id)
        pending = None if document is None else pending_since(document, entry, entry.chunks == 0)
        stale = self._stale.setdefault(index, {})
        if pending is None:
            stale.pop(doc_id, None)
        else:
            stale[doc_id] = pending

    def index_lag(self, event: IndexEvent) -> float | None:
        """The index lag of an index event (source change to indexed) in seconds, when the catalog
        knows when that version was made; reads the catalog only."""
        document = self.documents.get(event.doc_id)
        if document is None:
            return None
        modified_at = document.history.get(event.version)
        return None if modified_at is None else max(0.0, event.indexed_at - modified_at)

    def document(self, doc_id: str) -> DocumentState | None:
        return self.documents.get(doc_id)

    def document_of(self, passage: Passage) -> str | None:
        """The document a passage belongs to: its ``doc_id``, else its own id when the catalog
        knows a document by that id (retrieval spans such as OTel GenAI's report only document
        ids and scores)."""
        if passage.doc_id is not None:
            return passage.doc_id
        return passage.id if passage.id in self.documents else None

    def indexed_version(self, index: str, doc_id: str) -> str | None:
        """The version of ``doc_id`` that ``index`` last reported embedding, if any."""
        entry = self.indexed.get((index, doc_id))
        return None if entry is None else entry.version

    def is_outdated(self, doc_id: str, version: str, index: str | None = None) -> bool | None:
        """Whether ``version`` of ``doc_id`` is no longer current at the source.

        True when the catalog knows a newer version, or the document was deleted. None when the
        catalog does not know the document. A known version made in the same second as the current
        one is neither newer nor older (which came first is unknown): it is not outdated. A version
        the change feed has not announced counts as older, unless ``index`` holds exactly that
        version, indexed at or after the newest change the catalog knows: then the index is ahead
        of the change feed, not behind it. The tie goes to the index: sources and indexers often
        stamp whole seconds, and a version indexed in the same second as the change is taken as
        that change's.
        """
        document = self.documents.get(doc_id)
        if document is None:
            return None
        if document.deleted:
            return True
        if version == document.version:
            return False
        made = document.history.get(version)
        if made is not None:
            return made < document.modified_at
        if index is not None:
            entry = self.indexed.get((index, doc_id))
            if entry is not None and entry.version == version and entry.indexed_at >= document.modified_at:
                return False
        return True

    def health(self, now: float) -> dict[str, IndexHealth]:
        """Staleness and embedding models per index, as of ``now``.

        A document an index holds is stale there when its newest source version (or its deletion)
        is not what the index holds; its staleness is ``now`` minus the time of the oldest change
        the index has not taken in. An index event with ``chunks: 0`` records a removal. Costs the
        stale documents, not the catalog (see :func:`health_from_scratch` for the same figures
        computed from the whole catalog).
        """
        with self._lock:
            stale = {index: list(pending.items()) for index, pending in self._stale.items()}
            models = {index: len(counted) for index, counted in self._models.items()}
        result = {}
        for index, pending in stale.items():
            oldest = min((since for _, since in pending), default=None)
            result[index] = IndexHealth(
                stale_documents=len(pending),
                max_staleness_seconds=0.0 if oldest is None else max(0.0, now - oldest),
                embedding_models=models[index],  # _track counts models for every index it judges
                stalest=[doc_id for _, doc_id in heapq.nsmallest(STALEST_IDS, ((s, d) for d, s in pending))],
            )
        return result

    def merge(self, documents: list[DocumentState], indexed: list[IndexedState]) -> set[str]:
        """Take in what another process wrote to the store (``catalog_store.changes_since``):
        each stored state replaces the one held when it is further along, by the rule the store
        applies to writes (a later modification or indexing; as late with more history; as late
        and different). Returns the ids of the documents whose state or index entries changed."""
        changed: set[str] = set()
        with self._lock:
            for stored in documents:
                current = self.documents.get(stored.doc_id)
                if current is None and self._max_documents is not None and len(self.documents) >= self._max_documents:
                    continue  # as full as for events: a new document is refused
                if current is None or _further(stored.modified_at, len(stored.history), stored, current.modified_at,
                                               len(current.history), current):
                    self.documents[stored.doc_id] = stored
                    for index in self._holders.get(stored.doc_id, ()):
                        self._judge(index, stored.doc_id)
                    changed.add(stored.doc_id)
            for entry in indexed:
                key = (entry.index, entry.doc_id)
                current = self.indexed.get(key)
                if current is None and self._max_index_entries is not None and \
                        len(self.indexed) >= self._max_index_entries:
                    continue
                if current is None or _further(entry.indexed_at, 0, entry, current.indexed_at, 0, current):
                    self.indexed[key] = entry
                    self._track(current, entry)
                    changed.add(entry.doc_id)
        return changed

    def load(self, documents: list[DocumentState], indexed: list[IndexedState]) -> None:
        """Replace the contents (at start-up, from the store, which holds one state per document
        and one entry per index and document: their primary keys)."""
        with self._lock:
            self.documents = {d.doc_id: d for d in documents}
            self.indexed = {(entry.index, entry.doc_id): entry for entry in indexed}
            self._holders, self._stale, self._models = {}, {}, {}
            for entry in self.indexed.values():
                self._track(None, entry)


def health_from_scratch(documents: dict[str, DocumentState], entries: Iterable[IndexedState],
                        now: float) -> dict[str, IndexHealth]:
    """The figures of :meth:`Catalog.health` computed by walking the whole catalog: the reference
    the kept-up-to-date figures are checked against."""
    result: dict[str, IndexHealth] = {}
    models: dict[str, set[str]] = {}
    pending_by_index: dict[str, list[tuple[float, str]]] = {}
    for entry in entries:
        health = result.setdefault(entry.index, IndexHealth())
        removed = entry.chunks == 0
        if entry.embedding_model and not removed:
            models.setdefault(entry.index, set()).add(entry.embedding_model)
        document = documents.get(entry.doc_id)
        if document is None:
            continue
        pending = pending_since(document, entry, removed)
        if pending is not None:
            health.stale_documents += 1
            health.max_staleness_seconds = max(health.max_staleness_seconds, max(0.0, now - pending))
            pending_by_index.setdefault(entry.index, []).append((pending, entry.doc_id))
    for index, names in models.items():
        result[index].embedding_models = len(names)
    for index, pending in pending_by_index.items():
        result[index].stalest = [doc_id for _, doc_id in heapq.nsmallest(STALEST_IDS, pending)]
    return result


def _further(when: float, size: int, state: object, held_when: float, held_size: int, held: object) -> bool:
    """Whether a stored state is further along than the one held (``catalog_store``'s rule)."""
    return when > held_when or (when == held_when and (size > held_size or (size == held_size and state != held)))


def _remember(history: dict[str, float], version: str, modified_at: float) -> None:
    history[version] = modified_at
    if len(history) > MAX_VERSION_HISTORY:
        for old in sorted(history, key=history.__getitem__)[: len(history) - MAX_VERSION_HISTORY]:
            del history[old]


def pending_since(document: DocumentState, entry: IndexedState, removed: bool) -> float | None:
    """When the oldest change not yet in the index was made, or None when the index is current.

    After a removal (``chunks: 0``) the index is current while the document stays deleted or
    unchanged; a change made after the removal is pending again. A deletion stamped in the second
    the indexed version was made is pending: an index still holding chunks has not taken it in.
    """
    if removed:
        if document.deleted:
            return None
        later = [made for made in document.history.values() if made > entry.indexed_at]
        return min(later) if later else None
    if entry.version == document.version and not document.deleted:
        return None
    # Changes made after the indexed version (the deletion among them); an index ahead of the
    # change feed has none.
    base = document.history.get(entry.version, entry.indexed_at)
    later = [made for made in document.history.values() if made > base]
    if document.deleted and document.modified_at >= base:
        later.append(document.modified_at)
    return min(later) if later else None
