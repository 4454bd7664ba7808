"""Catalog events that are accepted but suspicious: counted, and warned about once per process.

Glue that feeds the catalog makes mistakes ragmon accepts without a word, and each leaves the
signals blind or wrong while every gauge looks healthy (docs/signals.md, "Coverage"):

- ``no_tenant``: a document in tenant ``default`` (no ``tenant`` given) while the traffic has
  shown several tenants, none of them ``default``: every other tenant's caller is then judged to
  read another tenant's document, a false leak on every passage. Counted per such event, and once
  for the documents already held when the traffic first shows a second tenant;
- ``bare_principal``: an ACL principal without a ``kind:`` prefix (``staff`` rather than
  ``group:staff``): it matches no caller;
- ``unseen_document``: a document no served passage named within ``catalog.unseen_after_seconds``
  of its event, while passages of documents the catalog does not know were served meanwhile: the
  likely sign of document ids spelt one way in the catalog and another on the chunks.

Ids are never logged: the warning says what to look at (``ragmon findings list --signal
not_judged``, the document events' producer). The memories are bounded: :data:`MAX_TENANTS`
tenants, :data:`MAX_WATCHED` documents waiting for their day (more are not watched).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import StrEnum

from ragmon.monitor.core.acl import bare_principals
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import DocumentEvent, TraceEvent

log = logging.getLogger(__name__)
DEFAULT_TENANT = "default"
MAX_TENANTS = 16  # tenants remembered: "several" needs two
MAX_WATCHED = 100_000  # documents waiting to be seen in traffic


class Suspicion(StrEnum):
    """Why an accepted catalog event is suspicious (the ``reason`` label): a closed set."""

    NO_TENANT = "no_tenant"
    BARE_PRINCIPAL = "bare_principal"
    UNSEEN_DOCUMENT = "unseen_document"


WARNINGS = {
    Suspicion.NO_TENANT: "document events without a tenant (tenant default) while the traffic has several tenants: "
                         "every other tenant's caller reads them as another tenant's documents. Give each document "
                         "event its tenant",
    Suspicion.BARE_PRINCIPAL: "document ACLs hold principals without a kind: prefix (staff, not group:staff); they "
                              "match no caller",
    Suspicion.UNSEEN_DOCUMENT: "documents no served passage named within catalog.unseen_after_seconds, while passages "
                               "of documents the catalog does not know were served: the document ids of the catalog "
                               "and of the chunks likely differ (ragmon findings list --signal not_judged names the "
                               "chunks' documents)",
}


class CatalogAudit:
    """Finds the suspicious catalog events; called by the signal engine, one event at a time."""

    def __init__(self, catalog: Catalog, unseen_after: float, clock: Callable[[], float] = time.time) -> None:
        self._catalog = catalog
        self._unseen_after = unseen_after
        self._clock = clock
        self._tenants: set[str] = set()
        self._several = False  # the traffic showed two tenants or more, none of them default
        self._watched: OrderedDict[str, float] = OrderedDict()  # doc id -> when its event came, oldest first
        self._unknown_served_at = float("-inf")  # when a passage of a document the catalog lacks was last served
        self._warned: set[Suspicion] = set()

    def document(self, event: DocumentEvent) -> dict[str, int]:
        """The suspicions of a document event just applied to the catalog."""
        found: dict[str, int] = {}
        if event.acl and bare_principals(event.acl):
            found[Suspicion.BARE_PRINCIPAL] = 1
        if self._several and event.tenant == DEFAULT_TENANT:
            found[Suspicion.NO_TENANT] = 1
        if not event.deleted and event.doc_id not in self._watched and len(self._watched) < MAX_WATCHED:
            self._watched[event.doc_id] = self._clock()
        return self._warn(found)

    def trace(self, trace: TraceEvent) -> dict[str, int]:
        """Take in what a trace served; the suspicions it reveals (the documents without a tenant
        once the traffic has several tenants, the documents whose day ran out unseen)."""
        found: dict[str, int] = {}
        if not self._several and trace.tenant not in self._tenants and len(self._tenants) < MAX_TENANTS:
            self._tenants.add(trace.tenant)
            if len(self._tenants) >= 2 and DEFAULT_TENANT not in self._tenants:
                self._several = True
                held = sum(1 for d in self._catalog.documents.values() if d.tenant == DEFAULT_TENANT)
                if held:
                    found[Suspicion.NO_TENANT] = held
        now = self._clock()
        watched, document_of = self._watched, self._catalog.document_of
        for passages in (*(r.passages for r in trace.retrievals), trace.context or ()):
            for passage in passages:
                doc_id = document_of(passage)
                if doc_id is None or self._catalog.document(doc_id) is None:
                    self._unknown_served_at = now
                elif watched:
                    watched.pop(doc_id, None)  # seen: no longer watched
        unseen = 0
        while watched:
            doc_id, since = next(iter(watched.items()))
            if now - since < self._unseen_after:
                break
            watched.popitem(last=False)
            unseen += self._unknown_served_at > since
        if unseen:
            found[Suspicion.UNSEEN_DOCUMENT] = unseen
        return self._warn(found)

    def _warn(self, found: dict[str, int]) -> dict[str, int]:
        for reason, n in found.items():
            if reason not in self._warned:
                self._warned.add(reason)  # type: ignore[arg-type]
                log.warning("catalog: %d suspicious (%s): %s; counted in ragmon_suspicious_catalog_events_total "
                            "(warned once)", n, reason, WARNINGS[reason])  # type: ignore[index]
        return found
