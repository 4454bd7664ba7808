"""The composition root: the one place that names concrete classes and joins them.

Everything else receives its parts. This module (with ``monitor.cli``) is the only part of
``monitor/`` allowed to import transports and exporters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, disable_created_metrics
from sqlalchemy import Engine, text

from collectors.files import JsonlDeadLetterSink
from exporters.prometheus import PrometheusSink
from monitor.catalog import Catalog
from monitor.catalog_store import CatalogPersistence, load_catalog
from monitor.config import Settings
from monitor.decode import Decoder
from monitor.pipeline import Pipeline, PipelineStats, Sink
from monitor.signals import SignalEngine
from monitor.store import make_engine, prepare

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything one ragmon process runs on."""

    settings: Settings
    clock: Callable[[], float]
    engine: Engine
    catalog: Catalog
    signals: SignalEngine
    registry: CollectorRegistry
    metrics: PrometheusSink
    pipeline: Pipeline

    def ready(self) -> bool:
        """Ready to take traffic: the database answers."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("select 1"))
            return True
        except Exception:
            return False

    def close(self) -> None:
        self.pipeline.shutdown()
        self.engine.dispose()


def build_runtime(
    settings: Settings,
    clock: Callable[[], float] = time.time,
    registry: CollectorRegistry | None = None,
    extra_sinks: Sequence[Sink] = (),
) -> Runtime:
    """Open the store (migrating SQLite in place), load the catalog, and build the pipeline with
    its signals and sinks: catalog persistence and Prometheus metrics."""
    disable_created_metrics()  # *_created series double the exposition and no dashboard uses them
    engine = make_engine(settings.database.url)
    prepare(engine)
    catalog = Catalog()
    load_catalog(engine, catalog)
    stats = PipelineStats()
    registry = registry if registry is not None else CollectorRegistry()
    metrics = PrometheusSink(registry, settings.labels, stats, catalog, clock)
    signals = SignalEngine(settings.signals, catalog)
    dead_letters = JsonlDeadLetterSink(settings.dead_letter.path, settings.dead_letter.max_raw_bytes, clock=clock)
    pipeline = Pipeline(
        Decoder(settings.limits, clock),
        [CatalogPersistence(engine, catalog), metrics, *extra_sinks],
        dead_letters,
        clock,
        analyze=signals.observe,
        stats=stats,
    )
    log.info("runtime ready: %d documents and %d index entries in the catalog",
             len(catalog.documents), len(catalog.indexed))
    return Runtime(settings, clock, engine, catalog, signals, registry, metrics, pipeline)
