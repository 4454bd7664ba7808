"""The one interface of a catalog source, and what it hands back: a complete snapshot.

A catalog source reads a system of record (a folder, a manifest, a vector store, a record manager)
and says what it holds *now*, as the catalog's own events:

- documents: what each document is and who may read it (:class:`DocumentEvent`, by ``doc_id``);
- index entries: what an index holds of each document (:class:`IndexEvent`, by ``(index, doc_id)``).

A source knows nothing of what it said before: ``monitor/app/catalog_sync.py`` keeps each source's
last snapshot, turns the difference into events (tombstones and removals for what went missing),
holds a sync that would delete too much, and applies the events the way every catalog event is
applied. So a source is one method, :meth:`CatalogSource.read`, and it either returns everything or
raises :class:`SourceError`: a snapshot is never partial, and a sync that fails half-way changes
nothing.

Document ids in a snapshot are already join keys (``ragmon.monitor.core.doc_ids.join_key``).
Items a source leaves out (too large, beyond its count, unreadable) are counted in
:attr:`Snapshot.refused` by a reason of :data:`REFUSAL_REASONS`; their ids, when known, go to
:attr:`Snapshot.unread`, so that a document present but unreadable keeps its last state instead
of being read as deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ragmon.monitor.config.secret_refs import UnresolvedSecret, resolve
from ragmon.monitor.core.model import DocumentEvent, IndexEvent

#: Why an item was left out of a snapshot: a closed set (a metric label). ``rejected_*`` reasons are
#: the catalog's own (a decoder or catalog refusal, ``monitor/core/errors.Reason``), added at apply time.
RefusalReason = Literal[
    "too_large",  # a file (or record) above its size bound
    "too_many",  # beyond the source's max_items
    "symlink",  # a symbolic link: not followed, so nothing outside the root is read
    "not_regular",  # a device, a FIFO, a socket
    "unreadable",  # an I/O error or a file that is not UTF-8 where text is needed
    "bad_front_matter",  # front matter (or a sidecar) that is not a small, plain YAML mapping
    "bad_record",  # a manifest record missing a field or holding a wrong value
    "duplicate",  # a second record of an id already read in the same snapshot
]
REFUSAL_REASONS: tuple[str, ...] = RefusalReason.__args__  # type: ignore[attr-defined]

FailureReason = Literal["unavailable", "timeout", "too_large", "not_allowed", "bad_format", "git"]


class SourceError(Exception):
    """The source could not be read whole: the sync fails and changes nothing.

    ``reason`` is one of :data:`FailureReason`; the message names what went wrong and never holds a
    credential or document content (it is logged and printed)."""

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


IndexKey = tuple[str, str]  # (index, doc_id)


@dataclass
class Snapshot:
    """Everything a source holds now.

    ``documents`` None: this source says nothing about documents (an index-entry source), so its
    sync never makes a tombstone; likewise ``index_entries`` None for a document source. An empty
    dict says the source holds none (and the deletion guard decides whether to believe it).
    """

    documents: dict[str, DocumentEvent] | None = None
    index_entries: dict[IndexKey, IndexEvent] | None = None
    refused: Counter[str] = field(default_factory=Counter)  # RefusalReason -> items left out
    unread: set[str] = field(default_factory=set)  # doc ids present but left out: they keep their last state
    unread_entries: set[IndexKey] = field(default_factory=set)

    def refuse(self, reason: RefusalReason, doc_id: str | None = None) -> None:
        """Count one item left out; ``doc_id``: it is there, so it is not deleted."""
        self.refused[reason] += 1
        if doc_id is not None:
            self.unread.add(doc_id)


class CatalogSource(Protocol):
    """A system of record the catalog is synced from.

    ``name`` is the configured name. ``read`` returns the complete :class:`Snapshot` or raises
    :class:`SourceError`; it may take a while (git, a download) and runs on the scheduler's thread
    or the CLI's, never on the pipeline's. It must be bounded: in items (``max_items``), bytes and
    time, as its configuration says.
    """

    name: str

    def read(self) -> Snapshot: ...


@dataclass(frozen=True)
class SourceContext:
    """What a source may need from the process, passed in: the clock (Unix seconds), the environment
    (secret references ``env:NAME``), and for HTTP a transport (tests give a local server, or an
    ``httpx.MockTransport``)."""

    clock: Callable[[], float]
    environ: Mapping[str, str]
    http_transport: object | None = None

    def secret(self, source: str, key: str, ref: str | None) -> str | None:
        """The value of the secret reference ``ref`` (the entry ``key`` of source ``source``), read at
        each call so that a rotated secret is taken; None without one. Raises :class:`SourceError`
        ``unavailable`` naming the reference, never a value."""
        if not ref:
            return None
        try:
            return resolve(ref, f"catalog.sources[{source}].{key}", self.environ)
        except UnresolvedSecret as problem:
            raise SourceError("unavailable", str(problem)) from None
