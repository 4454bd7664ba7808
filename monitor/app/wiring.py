"""The composition root: the one place that names concrete classes and joins them.

Everything else receives exactly the parts it uses. This module (with the CLI and the jobs, in the
same ``app`` room) is the only part of ``monitor/`` that imports collectors, exporters and alerts.
"""

from __future__ import annotations

import gc
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, disable_created_metrics
from pydantic import SecretStr
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from ragmon.alerts.dispatch import AlertDispatcher
from ragmon.alerts.notifiers import AlertmanagerNotifier, WebhookNotifier
from ragmon.alerts.sink import AlertSink
from ragmon.alerts.state import AlertBook
from ragmon.collectors.files import JsonlDeadLetterSink
from ragmon.collectors.letter_body import LetterBody
from ragmon.exporters.coverage import CoverageWindow
from ragmon.exporters.instruments import Metrics
from ragmon.exporters.prometheus import PrometheusSink, register_scrape_time
from ragmon.monitor.app.catalog_sync import CatalogApply, CatalogSync, ConfiguredSource, PipelineApply, TopicApply
from ragmon.monitor.app.jobs import Jobs
from ragmon.monitor.app.leader import leader_lock
from ragmon.monitor.app.scheduler import SchedulerRunner
from ragmon.monitor.config.settings import ConfigError, Settings, check_telemetry_target, mask_url
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.dedupe import SeenTraces
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.core.pipeline import DeadLetterSink, Pipeline, PipelineStats, Sink, Stages
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.core.reconcile import Reconciler
from ragmon.monitor.core.signals import SignalEngine
from ragmon.monitor.core.signals.catalog_audit import CatalogAudit
from ragmon.monitor.core.signals.late import LateJudge
from ragmon.monitor.core.times import TimeReader
from ragmon.monitor.findings.sink import FindingsSink
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.labeling.sampler import Sampler, SampleWriter
from ragmon.monitor.storage.catalog_refresh import CatalogRefresh
from ragmon.monitor.storage.catalog_source_store import SourceStateStore
from ragmon.monitor.storage.catalog_store import CatalogPersistence, load_catalog
from ragmon.monitor.storage.score_share import BaselineSharing, ScoreShare, replica_name
from ragmon.monitor.storage.served_documents import ServedDocuments
from ragmon.monitor.storage.store import await_schema, make_engine
from ragmon.monitor.storage.unread_store import UnreadStore

if TYPE_CHECKING:
    from ragmon.monitor.app.telemetry import SelfTelemetry

log = logging.getLogger(__name__)


def caller_key(settings: Settings) -> str:
    """The key of the caller-id hash: ``redaction.caller_key``; with SQLite and no key configured,
    one made once and kept in ``caller.key`` beside the database file (embedded mode needs no
    set-up, and pseudonyms stay stable across restarts). Elsewhere a missing key is an error."""
    configured = settings.redaction.caller_key.get_secret_value()
    if configured:
        return configured
    url = make_url(settings.database.url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        raise ConfigError("redaction.caller_key: must be set (at least 16 characters) where samples are stored "
                          "in a shared database")
    path = Path(url.database).parent / "caller.key"
    if not path.exists():
        with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as handle:
            handle.write(secrets.token_hex(32))
    return path.read_text().strip()


def reading_redactor(settings: Settings) -> Redactor:
    """The redactor of a command that reads what ``serve`` stored: keyed as ``serve`` is, so that ids and
    ``user:`` principals show as they do everywhere; without a key (a shared database and no
    ``redaction.caller_key``) one that raises ValueError where a key is needed."""
    try:
        return Redactor(settings.redaction.model_copy(update={"caller_key": SecretStr(caller_key(settings))}),
                        require_key=False)
    except ConfigError:
        return Redactor(settings.redaction, require_key=False)


def _alert_dispatcher(settings: Settings, metrics: Metrics, clock: Callable[[], float],
                      shown: Callable[[str], str]) -> AlertDispatcher | None:
    """The direct push of leak, staleness and probe alerts, when a target is configured (else
    None: the Prometheus rules still alert). ``shown``: how they name the ids a sender chose."""
    config = settings.alerts
    notifiers: list = []
    if config.alertmanager_url:
        notifiers.append(AlertmanagerNotifier(config.alertmanager_url, config.timeout_seconds,
                                              config.alertmanager_resend_seconds))
    if config.webhook_url:
        token = config.webhook_token.get_secret_value() if config.webhook_token else None
        notifiers.append(WebhookNotifier(config.webhook_url, config.timeout_seconds, config.repeat_minutes * 60,
                                         token=token))
    if not notifiers:
        return None
    dispatcher = AlertDispatcher(
        AlertBook(config, shown), notifiers, clock,
        record=lambda notifier, outcome, n: metrics.alert_notifications.labels(notifier, outcome).inc(n))
    dispatcher.start()
    return dispatcher


def build_jobs(runtime: Runtime, standalone: bool = False) -> Jobs:
    """The scheduled jobs over ``runtime``'s parts. ``standalone``: a scheduler process of its own,
    which re-reads the catalog table before each staleness scan (the collectors keep it current)."""
    from ragmon.monitor.app.probe_clients import build_retrieval
    from ragmon.monitor.app.probes import ProbeError

    settings = runtime.settings
    push = None
    if settings.scheduler.weekly_pull_push and settings.label_studio.url and settings.label_studio.token:
        push = _label_studio_push(settings)
    reload = (lambda: load_catalog(runtime.engine, runtime.catalog)) if standalone else None
    try:
        retrieve = build_retrieval(settings.probes)
    except ProbeError as error:
        raise ConfigError(str(error)) from None
    prune = runtime.dead_letters.prune if isinstance(runtime.dead_letters, JsonlDeadLetterSink) else None
    return Jobs(settings.scheduler, settings.sampling.time_zone, settings.probes.probes, runtime.samples,
                runtime.catalog, runtime.metrics, runtime.alerts, prune, runtime.clock, retrieve, push, reload,
                tracer=runtime.telemetry.jobs if runtime.telemetry is not None else None,
                prune_findings=runtime.findings.prune, findings_retention_days=settings.findings.retention_days,
                catalog_sync=build_catalog_sync(runtime) if settings.catalog.sources else None,
                prune_unread=runtime.unread.prune, unread_retention_days=settings.otlp.unread_retention_days,
                history_retention_days=settings.sampling.history_retention_days)


def build_catalog_sync(runtime: Runtime, environ: Mapping[str, str] | None = None,
                       http_transport: Any = None) -> CatalogSync:
    """The configured catalog sources (``catalog.sources``), synced into this process's pipeline, or
    into the catalog topic when Kafka is configured (every replica reads it). ``environ``: where
    ``env:`` references of the sources are read (default the process's); ``http_transport``: an
    httpx transport for the manifests' downloads (tests)."""
    from ragmon.collectors.catalog_sources import build_source
    from ragmon.collectors.catalog_sources.base import SourceContext

    settings = runtime.settings
    context = SourceContext(runtime.clock, os.environ if environ is None else environ, http_transport)
    sources = [ConfiguredSource(config, build_source(config, context)) for config in settings.catalog.sources]
    apply: CatalogApply
    if settings.kafka.bootstrap_servers and sources:
        transport = _kafka_transport(settings, settings.kafka.catalog_topic, "ragmon-catalog-sync")
        apply = TopicApply(transport.send_encoded, transport.flush, Decoder(settings.limits, runtime.clock))
    else:
        apply = PipelineApply(runtime.pipeline.process)
    return CatalogSync(sources, SourceStateStore(runtime.engine), runtime.catalog, apply, runtime.clock,
                       runtime.metrics)


def build_scheduler(runtime: Runtime, jobs: Jobs) -> SchedulerRunner:
    """The scheduler, run by whichever process holds the scheduler lock of the database."""
    settings = runtime.settings
    metrics, alerts, clock = runtime.metrics, runtime.alerts, runtime.clock

    def on_leader(leading: bool) -> None:
        metrics.scheduler_leader.set(1 if leading else 0)
        if not leading and alerts is not None:
            alerts.resolve_scanned(clock())

    return SchedulerRunner(settings.scheduler, jobs, leader_lock(settings.database.url),
                           probes=bool(settings.probes.probes), on_leader=on_leader)


def _label_studio_push(settings: Settings):
    """The weekly job's push: each batch into the configured Label Studio project."""
    from ragmon.exporters.label_studio import LabelStudio, push_batch

    config = settings.label_studio

    def push(batch: list) -> int:
        with LabelStudio(config.url, config.token.get_secret_value(), timeout=config.timeout_seconds) as studio:
            return push_batch(studio, config.project, batch).imported

    return push


def _publisher(settings: Settings):
    """Publishes new samples to the samples topic when Kafka is configured."""
    kafka = settings.kafka
    if not kafka.bootstrap_servers:
        return None
    from kafka.errors import KafkaError

    from ragmon.collectors.kafka_calls import POLL_THREAD_CALL_MS

    # Runs inside a batch on the traces consumer's thread: sends and flush wait briefly, then refuse
    # the batch (retried, the consumer polling meanwhile) rather than keep the member from polling.
    transport = _kafka_transport(settings, kafka.samples_topic, "ragmon-samples", max_block_ms=POLL_THREAD_CALL_MS)

    def publish(samples: list[dict]) -> None:
        try:
            for sample in samples:
                transport.send(sample, sample["tenant"])
            transport.flush(POLL_THREAD_CALL_MS / 1000)
        except KafkaError as error:
            raise Retryable(f"samples topic: {type(error).__name__}") from error

    return publish


def _kafka_transport(settings: Settings, topic: str, client_id: str, **producer_options: Any):
    """An idempotent keyed producer to ``topic`` with the configured connection options."""
    from ragmon.collectors.emitter import KafkaTransport

    options = {k: v for k, v in settings.kafka.client_options().items() if k != "bootstrap_servers"}
    return KafkaTransport(KafkaTransport.producer(settings.kafka.bootstrap_servers, client_id=client_id,
                                                  **options, **producer_options), topic)


def _dead_letters(settings: Settings, clock: Callable[[], float], metrics: Metrics,
                  body: LetterBody) -> DeadLetterSink:
    """The dead-letter topic when Kafka is configured, else the JSONL file."""
    if settings.kafka.bootstrap_servers:
        from kafka import KafkaProducer

        from ragmon.collectors.kafka_calls import POLL_THREAD_CALL_MS
        from ragmon.collectors.kafka_dead_letters import KafkaDeadLetterSink

        # A batch's letters go to one partition; kafka-python sends one producer batch per partition
        # per request, so the 16 KB default took a round trip per five 3 KB letters (400 letters:
        # 160 ms, against 35 ms with 256 KB). Letters are written on the traces consumer's thread:
        # sends and the flush wait briefly (see POLL_THREAD_CALL_MS).
        producer = KafkaProducer(acks="all", retries=5, linger_ms=5, batch_size=256 * 1024,
                                 max_block_ms=POLL_THREAD_CALL_MS, client_id="ragmon-dead-letters",
                                 **settings.kafka.client_options())
        return KafkaDeadLetterSink(producer, settings.kafka.dead_letter_topic, settings.dead_letter.max_raw_bytes,
                                   timeout=POLL_THREAD_CALL_MS / 1000, body=body)
    config = settings.dead_letter
    return JsonlDeadLetterSink(config.path, config.max_raw_bytes, clock=clock, max_file_bytes=config.max_file_bytes,
                               keep_files=config.keep_files, on_dropped=metrics.dead_letters_dropped.inc,
                               body=body)


def _letter_body(settings: Settings, key: str, redactor: Redactor) -> LetterBody:
    """Dead letters keep a hash keyed like the caller pseudonyms, the redacted text, and the raw
    bytes only encrypted (``dead_letter.keep_raw``)."""
    config = settings.dead_letter
    return LetterBody(hash_key=key.encode(), redact=redactor.redact, raw_key=config.raw_key(),
                      max_bytes=config.max_raw_bytes, max_text_bytes=config.max_text_bytes,
                      texts_per_second=config.texts_per_second)


def build_sources(runtime: Runtime) -> list:
    """The background sources of `ragmon serve`: the catalog follower (the catalog changes other
    processes write, and the recent traces they change the verdicts of, between batches) and, with
    Kafka configured, the catalog reader, the traces consumer group, which waits for the reader
    before it judges traces, and the probe that measures the group's lag (HTTP ingest is always
    there)."""
    from ragmon.monitor.app.catalog_follower import CatalogFollower

    kafka = runtime.settings.kafka
    follower = CatalogFollower(runtime.pipeline.tick, runtime.settings.catalog.refresh_seconds)
    if not kafka.bootstrap_servers:
        return [follower]
    from kafka import KafkaConsumer

    from ragmon.collectors.kafka import DeadLetterGuard, KafkaSource
    from ragmon.collectors.kafka_catalog import KafkaCatalogReader
    from ragmon.collectors.kafka_lag import KafkaLagProbe

    def group_consumer() -> KafkaConsumer:
        return KafkaConsumer(group_id=kafka.group_id, enable_auto_commit=False, auto_offset_reset="earliest",
                             max_poll_records=kafka.max_batch, client_id="ragmon-traces", **kafka.group_options(),
                             **kafka.client_options())

    def catalog_consumer() -> KafkaConsumer:
        return KafkaConsumer(group_id=None, enable_auto_commit=False, client_id="ragmon-catalog",
                             **kafka.client_options())

    def lag_consumer() -> KafkaConsumer:
        # the group's id to read its committed offsets; it never subscribes, so it never joins
        return KafkaConsumer(group_id=kafka.group_id, enable_auto_commit=False, client_id="ragmon-lag",
                             **kafka.client_options())

    metrics = runtime.metrics

    def assignment(held: dict[str, int]) -> None:
        metrics.rebalances.inc()
        for topic, count in held.items():
            metrics.assigned_partitions.labels(topic).set(count)

    reader = KafkaCatalogReader(catalog_consumer, kafka.catalog_topic, runtime.pipeline.process,
                                max_batch=kafka.max_batch)
    # catalog first: no trace is judged before the reader reached the catalog topic's end
    traces = KafkaSource(group_consumer, [kafka.traces_topic], runtime.pipeline.process, max_batch=kafka.max_batch,
                         guard=DeadLetterGuard(kafka.max_dead_letter_ratio, kafka.dead_letter_window),
                         report_assignment=assignment, catalog=reader, warm=runtime.pipeline.warm,
                         warmup_records=kafka.warmup_records,
                         report_warmup=lambda topic, n: metrics.warmup_records.labels(topic).inc(n))
    return [
        follower,
        reader,
        traces,
        # off the traces consumer's thread: reading offsets waits on brokers, a member must keep polling
        KafkaLagProbe(lag_consumer, [kafka.traces_topic], traces.held, interval=kafka.lag_interval_seconds,
                      report_lag=lambda topic, value: metrics.consumer_lag.labels(topic).set(value),
                      report_group_lag=lambda topic, value: metrics.consumer_group_lag.labels(topic).set(value)),
    ]


def build_otlp(runtime: Runtime):
    """The OTLP receiver, delivering assembled traces to this process's pipeline, or to the
    Kafka traces topic when ``otlp.forward_to_kafka`` is set."""
    config = runtime.settings.otlp
    if not config.enabled:
        return None
    from ragmon.collectors.dialects import CallerKeys, Dialects
    from ragmon.collectors.otlp import OtlpReceiver, TraceAssembler
    from ragmon.collectors.passage_ids import PassageNamer
    from ragmon.collectors.span_mapping import SpanMapper
    from ragmon.collectors.unread.closest import RegistryDialects
    from ragmon.collectors.unread.watch import UnreadWatch

    caller_keys = CallerKeys(**{kind: tuple(keys) for kind, keys in config.caller_keys.items()})
    mapper = SpanMapper(PassageNamer(config.passage_id_keys, config.doc_id_keys), Dialects(caller_keys))
    watch = UnreadWatch(runtime.redactor.shown_id, runtime.metrics, runtime.unread.add,
                        per_minute=config.unread_digests_per_minute, dialects=RegistryDialects(mapper.dialects),
                        clock=runtime.clock)
    mapping = {"mapper": mapper, "report": runtime.metrics, "watch": watch}
    assembler = TraceAssembler(config.assembly_wait_seconds, config.max_pending_traces, config.max_spans_per_trace,
                               root_grace=config.root_grace_seconds, max_bytes=config.max_pending_bytes)
    if config.forward_to_kafka and runtime.settings.kafka.bootstrap_servers:
        from kafka.errors import KafkaError

        from ragmon.collectors.emitter import event_key

        kafka = runtime.settings.kafka
        transport = _kafka_transport(runtime.settings, kafka.traces_topic, "ragmon-otlp")

        def forward(records, events) -> None:
            try:
                for record, event in zip(records, events, strict=True):  # the JSON the receiver encoded once
                    transport.send_encoded(record.data, event_key(event))
                transport.flush(30)
            except KafkaError as error:
                raise Retryable(f"forwarding to {kafka.traces_topic}: {type(error).__name__}") from error

        return OtlpReceiver(assembler, forward, **mapping)
    return OtlpReceiver(assembler, lambda records, events: runtime.pipeline.process(records), **mapping)


@dataclass
class Runtime:
    """Everything one ragmon process runs on."""

    settings: Settings
    clock: Callable[[], float]
    engine: Engine
    catalog: Catalog
    signals: SignalEngine
    registry: CollectorRegistry
    metrics: Metrics
    pipeline: Pipeline
    samples: SampleStore
    dead_letters: DeadLetterSink
    findings: FindingsStore
    redactor: Redactor  # the one the stores were written with: how an id is shown (shown_id)
    unread: UnreadStore  # digests of the OTLP traces ragmon could not read (collectors/unread)
    alerts: AlertDispatcher | None = None  # the direct push, when a target is configured
    telemetry: SelfTelemetry | None = None  # ragmon's own spans, when telemetry.otlp_endpoint is set
    reconciler: Reconciler | None = None  # the catalog's last reconciliation (monitor/core/reconcile.py)

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
        if self.telemetry is not None and not self.telemetry.shutdown():
            log.warning("ragmon's own spans not all exported within telemetry.timeout_seconds; left behind")


# Allocations (less deallocations) between two collections of the youngest generation; Python's
# default is 700. Objects that live a fraction of a second (the spans an OTLP trace is assembled
# from, a batch's events and observations) outlived the young collections at that pace and were
# scanned and promoted again and again: `ragmon serve` spent about a fifth of its CPU on OTLP
# traffic collecting them. At 50,000, deliveries of 500 OTLP traces still met about one young
# collection each, which scanned the objects of the batch in flight (7% of the CPU of
# `python -m bench.otlp_cpu`); at 200,000 they meet almost none. The cycles a collection frees
# (few: most objects go by reference counting) wait longer: 2 MB more at peak there
# (docs/performance.md).
YOUNG_COLLECTION_THRESHOLD = 200_000


def settle_start_up_objects() -> None:
    """Move every object alive at start-up (modules, functions, the loaded catalog) out of the
    cyclic garbage collector's reach: those live as long as the process, and a full collection
    would otherwise scan all of them again and again while traffic flows (about 10% of the time
    per event, measured in docs/performance.md). Then collect the youngest generation every
    :data:`YOUNG_COLLECTION_THRESHOLD` allocations instead of every 700 (the older generations
    keep their default pace relative to it). Call once, in a long-running process, after the
    runtime is built."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, older, oldest)


def build_runtime(
    settings: Settings,
    clock: Callable[[], float] = time.time,
    registry: CollectorRegistry | None = None,
    extra_sinks: Sequence[Sink] = (),
    schema_wait: float = 0.0,
    command: str | None = None,
    span_exporter: Any = None,
) -> Runtime:
    """Open the store (migrating SQLite in place; waiting up to ``schema_wait`` seconds for any
    other database to come up at the code's schema, see :func:`await_schema`), load the catalog,
    and build the pipeline with its signals and sinks: catalog persistence and Prometheus metrics.

    ``command`` (serve, scheduler, replay) names the process in its own spans, which are made
    only for a command and only with ``telemetry.otlp_endpoint`` set (or a ``span_exporter``,
    an SDK ``SpanExporter`` standing in for OTLP/HTTP in tests). The endpoint is checked against
    ``http.host`` and ``http.port``; a command serving another address checks it first."""
    disable_created_metrics()  # *_created series double the exposition and no dashboard uses them
    engine = make_engine(settings.database.url)
    await_schema(engine, schema_wait)
    catalog = Catalog(settings.catalog.max_documents, settings.catalog.max_index_entries)
    revision = load_catalog(engine, catalog)
    stats = PipelineStats()
    registry = registry if registry is not None else CollectorRegistry()
    # one redactor for samples, dead letters and label values; the key may refuse the config:
    # before any thread (e.g. a Kafka producer's) is started
    key = caller_key(settings)
    redactor = Redactor(settings.redaction.model_copy(update={"caller_key": SecretStr(key)}))
    samples = SampleStore(engine, clock, key_id=redactor.key_id,  # rows say which key made their ids
                          history_turns=settings.sampling.history_turns,
                          history_bytes=settings.sampling.history_bytes)
    # tenant, index and retriever labels and exemplars' trace ids as every surface shows them
    metrics = Metrics(registry, settings.labels, shown=redactor.shown_id)
    coverage = CoverageWindow(settings.signals.coverage_window_seconds)
    reconciler = Reconciler(catalog, clock)
    register_scrape_time(metrics, stats, catalog, clock, sample_queue=samples.counts_by_status, coverage=coverage,
                         reconciler=reconciler)
    signals = SignalEngine(settings.signals, catalog, explain=settings.findings.enabled,
                           audit=CatalogAudit(catalog, settings.catalog.unseen_after_seconds, clock))
    sharing = _baseline_sharing(settings, engine, signals, clock)
    findings = FindingsStore(engine, key_id=redactor.key_id)
    dead_letters = _dead_letters(settings, clock, metrics, _letter_body(settings, key, redactor))
    decoder = Decoder(settings.limits, clock, TimeReader(settings.events.time_zone))
    sampler = Sampler(settings.sampling, redactor, decoder=decoder, recent_traces=settings.sampling.late_window_traces)
    prometheus = PrometheusSink(metrics, coverage)
    alerts = _alert_dispatcher(settings, metrics, clock, redactor.shown_id)
    telemetry = _telemetry(settings, command, metrics, span_exporter) if command is not None else None
    pipeline = Pipeline(
        decoder,
        [CatalogPersistence(engine, catalog),
         SampleWriter(samples, settings.sampling, _publisher(settings), report=prometheus.count_admission), prometheus,
         *([_findings_sink(settings, findings, redactor, clock, metrics)] if settings.findings.enabled else []),
         *([AlertSink(alerts)] if alerts is not None else []), *([sharing] if sharing is not None else []),
         ServedDocuments(engine, clock, settings.catalog.served_days, settings.catalog.served_max_rows,
                         on_dropped=metrics.served_dropped.inc).start(),
         *extra_sinks],
        dead_letters,
        clock,
        stages=Stages(analyze=signals.observe, decide=sampler.decide, learn=signals.learn, remember=sampler.remember,
                      **_catalog_following(settings, engine, catalog, revision, sharing)),
        stats=stats,
        seen=SeenTraces(settings.dedupe.window),
        observer=telemetry.batches if telemetry is not None else None,
    )
    log.info("runtime ready: %d documents and %d index entries in the catalog",
             len(catalog.documents), len(catalog.indexed))
    return Runtime(settings, clock, engine, catalog, signals, registry, metrics, pipeline, samples, dead_letters,
                   findings, redactor, UnreadStore(engine, key_id=redactor.key_id), alerts, telemetry, reconciler)


def _catalog_following(settings: Settings, engine: Engine, catalog: Catalog, revision: int,
                       sharing: BaselineSharing | None) -> dict[str, Any]:
    """The stages that keep the catalog and the verdicts of recent traces current: the catalog
    update, which tells the late judge what it changed; ``prepare``, which also takes in what other
    processes wrote to the store since ``revision`` (``CatalogRefresh``); and the late judge's
    ``keep`` and ``late`` (docs/signals.md, "Judged again")."""
    config = settings.signals
    late = LateJudge(catalog, config.late_judging_traces, config.late_judging_bytes, settings.catalog.refresh_seconds,
                     explain=settings.findings.enabled) if config.late_judging_traces else None
    refresh = CatalogRefresh(engine, catalog, revision, settings.catalog.refresh_seconds,
                             on_change=late.changed if late is not None else lambda ids: None)

    def update_catalog(event: Any) -> None:
        changed = catalog.apply(event)
        if changed is not None and late is not None:
            late.changed((changed,))

    def prepare() -> None:
        if sharing is not None:
            sharing.prepare()
        refresh.poll()

    return {"update_catalog": update_catalog, "prepare": prepare,
            "keep": late.keep if late is not None else None, "late": late.judge_again if late is not None else None}


def _baseline_sharing(settings: Settings, engine: Engine, signals: SignalEngine,
                      clock: Callable[[], float]) -> BaselineSharing | None:
    """Low-score baselines shared with the other replicas through the database
    (``signals.low_score_sync_seconds``), already holding the newest window of every pair."""
    config = settings.signals
    if not config.low_score_sync_seconds:
        return None
    sharing = BaselineSharing(ScoreShare(engine, replica_name(), config.low_score_window, clock), signals.baselines,
                              config.low_score_thresholds, config.low_score_window, config.low_score_sync_seconds)
    sharing.start()
    return sharing


def _findings_sink(settings: Settings, store: FindingsStore, redactor: Redactor, clock: Callable[[], float],
                   metrics: Metrics) -> FindingsSink:
    return FindingsSink(store, redactor, settings.findings.per_signal_per_second, clock,
                        count=lambda signal, outcome, n: metrics.findings.labels(signal, outcome).inc(n))


def _telemetry(settings: Settings, command: str, metrics: Metrics, exporter: Any) -> SelfTelemetry | None:
    """ragmon's own tracing (``monitor/app/telemetry.py``), when an endpoint is configured; the SDK
    is imported only then."""
    config = settings.telemetry
    if config.otlp_endpoint is None and exporter is None:
        return None
    check_telemetry_target(settings)
    from ragmon.monitor.app.telemetry import build_telemetry

    telemetry = build_telemetry(config, command, lambda outcome, n: metrics.telemetry_spans.labels(outcome).inc(n),
                                exporter)
    target = mask_url(config.otlp_endpoint) if config.otlp_endpoint else type(exporter).__name__
    log.info("tracing ragmon's own batches and jobs to %s", target)
    return telemetry
