"""Catalog sources: the systems of record the catalog is synced from (docs/catalog.md).

One module per kind of source, each with one class that meets
:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`, and one line per kind in
:data:`SOURCE_KINDS` below (its config model lives in ``monitor/config/catalog_sources.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from ragmon.collectors.catalog_sources.base import CatalogSource, SourceContext
from ragmon.collectors.catalog_sources.chroma import ChromaSource
from ragmon.collectors.catalog_sources.docstore import DocstoreSource
from ragmon.collectors.catalog_sources.folder import FolderSource
from ragmon.collectors.catalog_sources.lancedb import LanceDbSource
from ragmon.collectors.catalog_sources.manifest import ManifestSource
from ragmon.collectors.catalog_sources.qdrant import QdrantSource
from ragmon.collectors.catalog_sources.record_manager import RecordManagerSource
from ragmon.collectors.catalog_sources.sql import SqlSource

#: kind (the config entry's ``kind``) -> the source made from the entry and the context
SOURCE_KINDS: dict[str, Callable[..., CatalogSource]] = {
    "folder": FolderSource,
    "manifest": ManifestSource,
    # index-entry sources of vector stores
    "chroma": ChromaSource,
    "qdrant": QdrantSource,
    "lancedb": LanceDbSource,
    # index entries kept in SQL and JSON
    "record_manager": RecordManagerSource,
    "sql": SqlSource,
    "llamaindex_docstore": DocstoreSource,
}


def build_source(config, context: SourceContext) -> CatalogSource:
    """The source a ``catalog.sources`` entry configures."""
    return SOURCE_KINDS[config.kind](config, context)
