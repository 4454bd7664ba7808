"""The Chroma source: what a Chroma vector store holds of each document, as index entries (docs/catalog.md,
"A Chroma vector store").

Each configured collection is read whole, from a persistent directory (``chroma_files``: its SQLite
file, read-only, no Chroma needed) or a ``chroma run`` server (``chroma_server``: HTTP API v2), and
its chunks fold into one index entry per document (``chunk_fold``) under the collection's index
name. A collection that cannot be read whole fails the sync: a store read in part is not a list of
removals.
"""

from __future__ import annotations

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext
from ragmon.collectors.catalog_sources.chroma_files import ChromaFiles
from ragmon.collectors.catalog_sources.chroma_server import ChromaServer
from ragmon.collectors.catalog_sources.chunk_fold import ChunkKeys, fold_collections
from ragmon.monitor.config.catalog_sources import ChromaSourceConfig


class ChromaSource:
    """A Chroma store as index entries (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: ChromaSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context
        self._keys = ChunkKeys.of(config)

    def read(self) -> Snapshot:
        with self._store() as store:
            return fold_collections(self._config, self._keys, lambda name: store.chunks(name, self._keys.all),
                                    self._context.clock())

    def _store(self) -> ChromaFiles | ChromaServer:
        config = self._config
        if config.path is not None:
            return ChromaFiles(config.path, config.chroma_tenant, config.chroma_database, config.max_chunks)
        authorization = self._context.secret(config.name, "auth_header", config.auth_header)
        return ChromaServer(config, authorization, self._context.http_transport)  # type: ignore[arg-type]
