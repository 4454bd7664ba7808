"""A running process follows the catalog changes other processes write to the store.

``ragmon replay`` of catalog events into the database of a running ``serve``, another replica, or
a catalog sync write catalog rows that this process's in-memory catalog would not see before a
restart. :class:`CatalogRefresh` polls the store's catalog revision (one row, one cheap query) at
most every ``catalog.refresh_seconds``; when it moved, it reads the rows written since the
revision it last saw (``catalog_store.changes_since``, an index on the revision column), merges
them (``Catalog.merge``) and reports the documents whose state changed, so that the recent traces
that served them are judged again. Its own process's writes come back too; merging them changes
nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.storage.catalog_store import changes_since

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60.0  # a store that cannot be read is logged at most this often


class CatalogRefresh:
    """Polls the store for catalog changes; :meth:`poll` is called before each batch and by the
    process's idle ticker (the pipeline's lock keeps them one at a time)."""

    def __init__(self, engine: Engine, catalog: Catalog, revision: int, interval: float,
                 on_change: Callable[[set[str]], None] = lambda ids: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``revision``: the store's revision the catalog was loaded at (``load_catalog``);
        ``on_change`` gets the ids of the documents a refresh changed."""
        self._engine = engine
        self._catalog = catalog
        self.revision = revision
        self._interval = interval
        self._on_change = on_change
        self._clock = clock
        self._next = clock() + interval
        self._warned = -WARN_EVERY_SECONDS

    def poll(self, force: bool = False) -> set[str]:
        """Take in the changes written since the last poll, when ``catalog.refresh_seconds`` has
        passed (or ``force``); return the ids of the documents that changed. A store that cannot
        be read leaves the catalog as it is (logged; tried again at the next interval)."""
        now = self._clock()
        if not force and now < self._next:
            return set()
        self._next = now + self._interval
        try:
            revision, documents, indexed = changes_since(self._engine, self.revision)
        except SQLAlchemyError as error:
            if now - self._warned >= WARN_EVERY_SECONDS:
                self._warned = now
                log.warning("catalog refresh: the store could not be read (%s); the catalog stays as it is",
                            type(error).__name__)
            return set()
        self.revision = revision
        if not documents and not indexed:
            return set()
        changed = self._catalog.merge(documents, indexed)
        if changed:
            log.info("catalog refresh: %d documents changed in the store (revision %d)", len(changed), revision)
            self._on_change(changed)
        return changed
