"""From a vector store's chunks to index entries: the chunks of one document fold into one
:class:`IndexEvent` (docs/catalog.md, "A Chroma vector store"). Shared by the vector-store sources, which
only read chunks' metadata in the store's own order.

- **document**: ``id_prefix`` + the chunk's ``doc_id_key`` value, by the join rule. A chunk without
  one (or with one that is not a non-empty string) is refused (``bad_record``).
- **version**: the ``version_key`` value. Chunks of one document holding several versions are a
  document re-indexed in part (new chunks added, old ones left, or the re-indexing cut short): the
  index still serves the old chunks, so the entry takes the **oldest** version, that of the chunk
  indexed first (by ``indexed_at_key``; without times, the chunk the store holds first), and the
  document shows as stale at the source until every chunk is of the new one. A chunk without a
  version is refused (``bad_record``); a document none of whose chunks has one keeps its last state.
- **ACL**: the ``acl_keys`` values of every chunk, read by the one ACL rule, bare names given their
  key's prefix; chunks that differ give all their readers (whoever any chunk admits can read part of
  the document: a revocation is pending until no chunk admits the reader). No chunk with a key, or
  one whose value the rule refuses (counted ``bad_record``): unknown.
- **indexed time**: the latest ``indexed_at_key`` among the chunks of the entry's version (when the
  version was in whole); none: ``fallback_time`` (the sync's; the catalog sync keeps the time an
  unchanged version was first seen with).
- **chunks**: every chunk of the document with a version, whichever it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmon.collectors.catalog_sources.base import IndexKey, Snapshot, SourceError
from ragmon.monitor.core.acl import EVERYONE, BadAcl, read_acl
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.model import IndexEvent
from ragmon.monitor.core.times import BadTime, read_seconds


@dataclass(frozen=True)
class ChunkKeys:
    """Which chunk metadata keys say what (the source's configuration)."""

    doc_id: str
    version: str
    acl: Mapping[str, str]  # key -> prefix of a bare name
    indexed_at: str | None
    id_prefix: str = ""
    embedding_model: str | None = None

    @classmethod
    def of(cls, config: Any) -> ChunkKeys:
        """The keys a vector-store source's entry (``VectorStoreEntry``) names."""
        return cls(doc_id=config.doc_id_key, version=config.version_key, acl=config.acl_keys,
                   indexed_at=config.indexed_at_key, id_prefix=config.id_prefix,
                   embedding_model=config.embedding_model)

    @property
    def all(self) -> list[str]:
        """Every key read, so that a store is asked for these alone."""
        keys = [self.doc_id, self.version, *self.acl]
        return keys + [self.indexed_at] if self.indexed_at else keys


@dataclass
class _Document:
    chunks: int = 0
    first: tuple[float, int, str] | None = None  # (indexed time, position, version) of the chunk indexed first
    times: dict[str, float] = field(default_factory=dict)  # version -> latest indexed time of its chunks
    acl: list[str] | None = None
    acl_unknown: bool = False  # a chunk's ACL could not be read


def fold(index: str, chunks: Iterable[Mapping[str, Any]], keys: ChunkKeys, snapshot: Snapshot,
         fallback_time: float) -> dict[IndexKey, IndexEvent]:
    """The index entries of ``chunks`` (metadata mappings, in the store's order) of ``index``;
    refusals counted in ``snapshot`` (a document none of whose chunks could be read is in its
    ``unread_entries``)."""
    documents: dict[str, _Document] = {}
    unversioned: set[str] = set()
    for position, metadata in enumerate(chunks):
        raw_id = metadata.get(keys.doc_id)
        if not isinstance(raw_id, str) or not raw_id.strip():
            snapshot.refuse("bad_record")
            continue
        doc_id = join_key(keys.id_prefix + raw_id)
        version = _version(metadata.get(keys.version))
        if version is None:
            snapshot.refuse("bad_record")
            unversioned.add(doc_id)
            continue
        document = documents.setdefault(doc_id, _Document())
        document.chunks += 1
        when = _time(metadata.get(keys.indexed_at)) if keys.indexed_at else None
        order = (when if when is not None else math.inf, position, version)
        if document.first is None or order < document.first:
            document.first = order
        if when is not None and when > document.times.get(version, -math.inf):
            document.times[version] = when
        try:
            acl = _readers(metadata, keys.acl)
        except BadAcl:
            snapshot.refuse("bad_record")  # what this chunk admits is unknown, so what the document's do
            document.acl_unknown = True
            continue
        if acl is not None:
            document.acl = _union(document.acl, acl)
    entries: dict[IndexKey, IndexEvent] = {}
    for doc_id, document in documents.items():
        assert document.first is not None
        version = document.first[2]
        entries[(index, doc_id)] = IndexEvent(
            index=index, doc_id=doc_id, version=version, indexed_at=document.times.get(version, fallback_time),
            embedding_model=keys.embedding_model, chunks=document.chunks,
            acl=None if document.acl_unknown else document.acl)
    for doc_id in unversioned - documents.keys():
        snapshot.unread_entries.add((index, doc_id))
    return entries


def fold_collections(config: Any, keys: ChunkKeys, chunks_of: Callable[[str], Iterable[Mapping[str, Any]]],
                     now: float, what: str = "collection") -> Snapshot:
    """A vector-store source's snapshot: the chunks of each of ``config.collections`` (``chunks_of``
    reads one, by name) folded under its index (``config.index_names``, else its own name), then at
    most ``config.max_items`` entries. Two collections holding chunks of one document under one index
    fail the sync: one entry would silently replace the other. ``what``: the store's word for a
    collection, for that error."""
    snapshot = Snapshot(index_entries={})
    entries = snapshot.index_entries
    assert entries is not None
    for name in config.collections:
        index = config.index_names.get(name, name)
        folded = fold(index, chunks_of(name), keys, snapshot, now)
        if folded.keys() & entries.keys():
            raise SourceError("bad_format", f"{what} {name!r} and another one hold chunks of one document under "
                              f"the index {index!r}: give each its own name in index_names")
        entries.update(folded)
    keep_at_most(snapshot, config.max_items)
    return snapshot


def keep_at_most(snapshot: Snapshot, max_items: int) -> None:
    """Refuse the index entries of ``snapshot`` beyond ``max_items``, in the order of their keys
    (``too_many``): they keep their last state."""
    entries = snapshot.index_entries
    assert entries is not None
    for key in sorted(entries)[max_items:]:
        del entries[key]
        snapshot.refused["too_many"] += 1
        snapshot.unread_entries.add(key)


def _version(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return text or None


def _readers(metadata: Mapping[str, Any], acl_keys: Mapping[str, str]) -> list[str] | None:
    """The readers a chunk's ``acl_keys`` name; None when none is there. Raises BadAcl."""
    found: list[str] | None = None
    for key, prefix in acl_keys.items():
        value = metadata.get(key)
        if value is None:
            continue
        found = found if found is not None else []
        for name in read_acl(list(value) if isinstance(value, tuple) else value):
            principal = name if name == EVERYONE or ":" in name or not prefix else prefix + name
            if principal not in found:
                found.append(principal)
    return found


def _union(held: list[str] | None, more: list[str]) -> list[str]:
    if held is None:
        return list(more)
    return held + [name for name in more if name not in held]


def _time(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = read_seconds(value)
    except BadTime:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
