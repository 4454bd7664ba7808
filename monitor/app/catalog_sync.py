"""Syncing the catalog from its sources (``catalog.sources``): read a source whole, plan against its last
snapshot, apply the events the way every catalog event is applied, then keep the new snapshot.

::

    source.read() --Snapshot--> plan_sync(last snapshot, catalog) --events--> CatalogApply --> store.replace

- :class:`PipelineApply` hands the events to this process's pipeline as trusted records (source
  ``catalog_source``): decoded and checked like any catalog event (join rule, limits), applied to the
  catalog, persisted by the catalog sink in one transaction, a rejected one dead-lettered.
- :class:`TopicApply`, with Kafka configured, sends them to the catalog topic every replica reads
  (documents keyed by document id, index entries by index and document id), after checking them
  with the same decoder.

A sync changes nothing unless it gets through whole: a source that cannot be read, or events that
cannot be applied, leave the catalog and the snapshot as they were; a sync that would delete more
than the source's ``max_deletion_share`` is held. Each sync is counted per source
(``ragmon_catalog_source_*``) and logged with counts and reasons, never an id, a credential or content.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import msgspec

from ragmon.collectors.catalog_sources.base import CatalogSource, SourceError
from ragmon.collectors.catalog_sources.plan import change_kind, plan_sync
from ragmon.exporters.instruments import Metrics
from ragmon.monitor.config.catalog_sources import SourceEntry
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import InvalidInput, Retryable
from ragmon.monitor.core.model import DocumentEvent, IndexEvent
from ragmon.monitor.core.pipeline import Processor
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.storage.catalog_source_store import SourceStateStore

log = logging.getLogger(__name__)

RECORD_SOURCE = "catalog_source"  # the `source` of the records a sync hands the pipeline
Outcome = Literal["ok", "failed", "held"]
CatalogEvent = DocumentEvent | IndexEvent

_encode = msgspec.json.Encoder().encode


class CatalogApply(Protocol):
    """Applies a sync's events as catalog events. Returns, per event in order, None when it was taken,
    else the catalog's reason for refusing it (a ``Reason`` value); raises :class:`Retryable` when
    nothing could be applied (the sync then fails and changes nothing). ``levels_local_catalog``:
    the events reach this process's catalog, which a sync then also brings level (see
    ``collectors/catalog_sources/plan.py``)."""

    levels_local_catalog: bool

    def apply(self, source: str, events: Sequence[CatalogEvent]) -> list[str | None]: ...


class PipelineApply:
    """Through this process's pipeline (:meth:`Pipeline.process`)."""

    levels_local_catalog = True

    def __init__(self, process: Processor) -> None:
        self._process = process

    def apply(self, source: str, events: Sequence[CatalogEvent]) -> list[str | None]:
        if not events:
            return []
        records = [RawRecord(RECORD_SOURCE, _encode(event), {"catalog_source": source, "item": position},
                             privilege=Privilege.TRUSTED) for position, event in enumerate(events)]
        result = self._process(records)
        outcome: list[str | None] = [None] * len(events)
        for rejection in result.rejections:
            outcome[rejection.position] = rejection.reason
        return outcome


class TopicApply:
    """To the Kafka catalog topic through ``send(value, key)`` and ``flush(timeout)`` (an emitter
    ``KafkaTransport``); each event is checked by ``decoder`` first, and one it rejects is not sent."""

    levels_local_catalog = False  # every replica's catalog reader applies what the topic holds

    def __init__(self, send: Callable[[bytes, str], None], flush: Callable[[float], None], decoder: Decoder,
                 timeout: float = 30.0) -> None:
        self._send = send
        self._flush = flush
        self._decoder = decoder
        self._timeout = timeout

    def apply(self, source: str, events: Sequence[CatalogEvent]) -> list[str | None]:
        outcome: list[str | None] = []
        try:
            for event in events:
                data = _encode(event)
                try:
                    self._decoder.decode(data)
                except InvalidInput as error:
                    outcome.append(error.reason.value)
                    continue
                self._send(data, topic_key(event))
                outcome.append(None)
            self._flush(self._timeout)
        except Exception as error:  # the producer's errors: nothing is known to be applied
            raise Retryable(f"catalog topic: {type(error).__name__}") from error
        return outcome


def topic_key(event: CatalogEvent) -> str:
    """The key of a catalog event on the compacted catalog topic: the document id for a document, the
    index and the document id (joined by U+001F) for an index entry, so compaction keeps the newest
    record of each."""
    if isinstance(event, DocumentEvent):
        return event.doc_id
    return f"{event.index}\x1f{event.doc_id}"


@dataclass
class SyncReport:
    """What one sync of one source did (or, with ``dry_run``, would do)."""

    source: str
    outcome: Outcome
    items: int = 0  # live documents and index entries of the snapshot (the new one when applied)
    changes: Counter[str] = field(default_factory=Counter)  # document, tombstone, index, removal
    refused: Counter[str] = field(default_factory=Counter)  # reason -> items
    deletions: int = 0
    deletion_share: float = 0.0
    error: str | None = None
    dry_run: bool = False
    seconds: float = 0.0


@dataclass
class ConfiguredSource:
    config: SourceEntry
    source: CatalogSource


class CatalogSync:
    """Syncs the configured sources into ``catalog`` through ``apply``, keeping each one's snapshot
    in ``store``. ``metrics`` None: nothing counted (a dry run counts nothing either)."""

    def __init__(self, sources: Sequence[ConfiguredSource], store: SourceStateStore, catalog: Catalog,
                 apply: CatalogApply, clock: Callable[[], float] = time.time, metrics: Metrics | None = None) -> None:
        self.sources = {entry.config.name: entry for entry in sources}
        self._store = store
        self._catalog = catalog
        self._apply = apply
        self._clock = clock
        self._metrics = metrics

    def intervals(self) -> dict[str, float]:
        """Each scheduled source's interval in seconds (0: not scheduled, left out)."""
        return {name: entry.config.interval_seconds for name, entry in self.sources.items()
                if entry.config.interval_seconds > 0}

    def sync(self, name: str, *, dry_run: bool = False, accept_deletions: bool = False) -> SyncReport:
        """One sync of the source ``name`` (KeyError when there is none)."""
        entry = self.sources[name]
        started = time.monotonic()
        report = self._sync(entry, dry_run, accept_deletions)
        report.seconds = time.monotonic() - started
        self._record(report)
        return report

    def _sync(self, entry: ConfiguredSource, dry_run: bool, accept_deletions: bool) -> SyncReport:
        name = entry.config.name
        try:
            snapshot = entry.source.read()
        except SourceError as error:
            return SyncReport(name, "failed", error=f"{error.reason}: {error}", dry_run=dry_run)
        except OSError as error:  # a file gone while read, a folder unreadable
            return SyncReport(name, "failed", error=f"unavailable: {error.strerror or type(error).__name__}",
                              dry_run=dry_run)
        try:
            before = self._store.load(name)
        except Retryable as error:
            return SyncReport(name, "failed", error=str(error), dry_run=dry_run)
        catalog = self._catalog if self._apply.levels_local_catalog else None
        plan = plan_sync(*before, snapshot, catalog, self._clock(),
                         max_deletion_share=entry.config.max_deletion_share, accept_deletions=accept_deletions)
        report = SyncReport(name, "held" if plan.held else "ok", refused=Counter(snapshot.refused),
                            changes=Counter(plan.changes), deletions=plan.deletions,
                            deletion_share=plan.deletion_share, dry_run=dry_run)
        if plan.held:
            report.items = _live(*before)
            report.error = (f"would delete {plan.deletions} of {plan.live_before} items "
                            f"({plan.deletion_share:.0%} > max_deletion_share {entry.config.max_deletion_share:.0%})")
            return report
        if dry_run:
            report.items = _live(plan.documents if plan.documents is not None else before[0],
                                 plan.index_entries if plan.index_entries is not None else before[1])
            return report
        try:
            refused = self._apply.apply(name, plan.events)
            for event, reason in zip(plan.events, refused, strict=True):
                if reason is not None:
                    report.refused[reason] += 1
                    report.changes[change_kind(event)] -= 1
                    plan.keep_last(event, *before)
            self._store.replace(name, before, (plan.documents, plan.index_entries))
        except Retryable as error:
            return SyncReport(name, "failed", error=str(error), refused=Counter(snapshot.refused), dry_run=dry_run)
        report.changes = +report.changes  # drop the kinds brought to zero by refusals
        report.items = _live(plan.documents if plan.documents is not None else before[0],
                             plan.index_entries if plan.index_entries is not None else before[1])
        return report

    def _record(self, report: SyncReport) -> None:
        refused = ", ".join(f"{reason} {n}" for reason, n in sorted(report.refused.items())) or "none"
        changes = ", ".join(f"{kind} {n}" for kind, n in sorted(report.changes.items())) or "none"
        what = "dry run of catalog source" if report.dry_run else "catalog source"
        if report.outcome == "ok":
            log.info("%s %s: %d items, changes: %s; refused: %s (%.1f s)", what, report.source, report.items,
                     changes, refused, report.seconds)
        else:
            log.warning("%s %s: %s: %s", what, report.source, report.outcome, report.error)
        if self._metrics is None or report.dry_run:
            return
        metrics = self._metrics
        metrics.source_syncs.labels(report.source, report.outcome).inc()
        for reason, n in report.refused.items():
            metrics.source_refused.labels(report.source, reason).inc(n)
        if report.outcome == "ok":
            for kind, n in report.changes.items():
                metrics.source_changes.labels(report.source, kind).inc(n)
            metrics.source_items.labels(report.source).set(report.items)
            metrics.source_last_success.labels(report.source).set(self._clock())


def _live(documents, entries) -> int:
    return (sum(1 for event in documents.values() if not event.deleted)
            + sum(1 for entry in entries.values() if entry.chunks != 0))
