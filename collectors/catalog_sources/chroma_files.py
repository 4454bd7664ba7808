"""Reading a Chroma persistent directory without Chroma: its ``chroma.sqlite3``, opened read-only.

A local Chroma (``chromadb.PersistentClient``) keeps every chunk's metadata in SQLite, in its
*metadata segment*; the vectors are in the HNSW files beside it, which are not read. What is relied
on, as chromadb 1.5 writes it (its migrations ``sysdb`` 1-10, ``metadb`` 1-6, ``embeddings_queue`` 1-2),
is :data:`SCHEMA`; a store missing any of it fails the sync with the table and column named, so that
a future Chroma that moves its data is seen at once instead of read as an empty index:

- ``databases(id, name, tenant_id)`` and ``collections(id, name, database_id)``: a collection by its
  name in Chroma's tenant and database;
- ``segments(id, scope, collection)``: the collection's metadata segment, ``scope = 'METADATA'``;
- ``embeddings(id, segment_id, embedding_id)``: one row per chunk of the segment, ``id`` in the order
  chunks were first added;
- ``embedding_metadata(id, key, string_value, int_value, float_value, bool_value)``: a chunk's scalar
  metadata, one row per key, the value in the column of its type;
- ``embedding_metadata_array(id, key, string_value, int_value, float_value, bool_value)`` (metadb 6,
  optional): list values, one row per item (Chroma 1.x keeps lists, such as an ACL);
- ``max_seq_id(segment_id, seq_id)`` and ``embeddings_queue(seq_id, topic)``: the last write the
  segment applied and the writes logged for ``persistent://…/COLLECTION_ID``. A log
  ahead of the segment (a writer stopped before applying it) fails the sync: the segment is not yet
  what the index serves.

The file is opened with ``mode=ro`` (nothing is ever written) and read in one transaction, so the
store is read as it was at one moment; a writer waits to commit meanwhile (SQLite's rollback
journal, which Chroma uses, lets a reader hold a commit back), at most for one sync's read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragmon.collectors.catalog_sources.base import SourceError

_VALUES = ("string_value", "int_value", "float_value", "bool_value")
#: table -> the columns read (``embedding_metadata_array`` may be absent: a Chroma before lists)
SCHEMA: dict[str, tuple[str, ...]] = {
    "databases": ("id", "name", "tenant_id"),
    "collections": ("id", "name", "database_id"),
    "segments": ("id", "scope", "collection"),
    "embeddings": ("id", "segment_id", "embedding_id"),
    "embedding_metadata": ("id", "key", *_VALUES),
    "max_seq_id": ("segment_id", "seq_id"),
    "embeddings_queue": ("seq_id", "topic"),
}
_OPTIONAL = {"embedding_metadata_array": ("id", "key", *_VALUES)}
BUSY_TIMEOUT_SECONDS = 10.0  # a writer holding the file: wait this long, then fail the sync


class ChromaFiles:
    """One read of a persistent directory: ``with ChromaFiles(path) as store: store.chunks(...)``."""

    def __init__(self, path: Path, tenant: str, database: str, max_chunks: int) -> None:
        self._file = path.expanduser() / "chroma.sqlite3"
        self._tenant, self._database, self._max_chunks = tenant, database, max_chunks
        self._db: sqlite3.Connection | None = None
        self._arrays = False

    def __enter__(self) -> ChromaFiles:
        if not self._file.is_file():
            raise SourceError("unavailable", f"{self._file}: no such file (is path a Chroma persistent directory?)")
        try:
            self._db = sqlite3.connect(f"file:{quote(str(self._file))}?mode=ro", uri=True,
                                       timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
            self._db.execute("BEGIN")  # one snapshot of the file for the whole read
            self._arrays = self._check_schema()
        except sqlite3.Error as error:
            self.__exit__()
            raise SourceError("unavailable", f"{self._file}: {error}") from None
        return self

    def __exit__(self, *_: object) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def chunks(self, collection: str, keys: list[str]) -> list[dict[str, Any]]:
        """The metadata (of ``keys`` alone) of every chunk of ``collection``, in the order the
        chunks were first added."""
        try:
            return list(self._chunks(collection, keys))
        except sqlite3.Error as error:
            raise SourceError("unavailable", f"{self._file}: {error}") from None

    def _chunks(self, collection: str, keys: list[str]) -> Iterator[dict[str, Any]]:
        db = self._db
        assert db is not None
        found = db.execute(
            "SELECT c.id, s.id FROM collections c JOIN databases d ON d.id = c.database_id "
            "JOIN segments s ON s.collection = c.id AND s.scope = 'METADATA' "
            "WHERE c.name = ? AND d.name = ? AND d.tenant_id = ?",
            (collection, self._database, self._tenant)).fetchall()
        if len(found) != 1:
            raise SourceError("unavailable", f"collection {collection!r} not found in Chroma's {self._tenant}/"
                              f"{self._database}" + (" (several metadata segments)" if found else ""))
        [(collection_id, segment)] = found
        self._check_applied(collection, collection_id, segment)
        [count] = db.execute("SELECT count(*) FROM embeddings WHERE segment_id = ?", (segment,)).fetchone()
        if count > self._max_chunks:
            raise SourceError("too_large", f"collection {collection!r} holds {count} chunks, more than max_chunks "
                              f"({self._max_chunks})")
        marks = ",".join("?" * len(keys))
        metadata: dict[int, dict[str, Any]] = {}
        rows = db.execute(f"SELECT e.id, m.key, m.string_value, m.int_value, m.float_value, m.bool_value "  # noqa: S608
                          f"FROM embeddings e LEFT JOIN embedding_metadata m ON m.id = e.id AND m.key IN ({marks}) "
                          f"WHERE e.segment_id = ? ORDER BY e.id", (*keys, segment))
        for row_id, key, *values in rows:
            chunk = metadata.setdefault(row_id, {})
            if key is not None:
                chunk[key] = _value(*values)
        if self._arrays:
            rows = db.execute(f"SELECT a.id, a.key, a.string_value, a.int_value, a.float_value, a.bool_value "  # noqa: S608
                              f"FROM embedding_metadata_array a JOIN embeddings e ON e.id = a.id "
                              f"WHERE e.segment_id = ? AND a.key IN ({marks}) ORDER BY a.rowid", (segment, *keys))
            for row_id, key, *values in rows:
                if row_id in metadata:
                    held = metadata[row_id].setdefault(key, [])
                    if isinstance(held, list):
                        held.append(_value(*values))
        yield from metadata.values()

    def _check_applied(self, collection: str, collection_id: str, segment: str) -> None:
        """Fail when Chroma's write log holds writes of the collection its metadata segment has not applied."""
        db = self._db
        assert db is not None
        applied = db.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (segment,)).fetchone()
        # the topic is persistent://default/default/ID in 1.5 (not the tenant's and database's names)
        [logged] = db.execute("SELECT max(seq_id) FROM embeddings_queue WHERE topic LIKE ?",
                              (f"persistent://%/{collection_id}",)).fetchone()
        done = applied[0] if applied is not None else None
        if isinstance(logged, int) and (not isinstance(done, int) or done < logged):
            raise SourceError("unavailable", f"collection {collection!r}: Chroma's log holds writes its metadata "
                              "segment has not applied yet; open the store with Chroma once, or sync later")

    def _check_schema(self) -> bool:
        """Whether list metadata is kept; SourceError naming the first table or column missing."""
        db = self._db
        assert db is not None
        for table, columns in {**SCHEMA, **_OPTIONAL}.items():
            held = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if not held and table in _OPTIONAL:
                return False
            if not held:
                raise SourceError("bad_format", f"{self._file}: no table {table}; not a Chroma store ragmon reads "
                                  "(it reads chromadb 1.x's)")
            for column in columns:
                if column not in held:
                    raise SourceError("bad_format", f"{self._file}: table {table} has no column {column}; not a "
                                      "Chroma store ragmon reads (it reads chromadb 1.x's)")
        return True


def _value(string: str | None, integer: int | None, real: float | None, flag: int | None) -> Any:
    if string is not None:
        return string
    if integer is not None:
        return integer
    if real is not None:
        return real
    return bool(flag) if flag is not None else None
