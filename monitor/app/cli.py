"""The ``ragmon`` command line. Commands stay thin: they load config, ask ``ragmon.monitor.app.wiring`` for
the parts, run them, and print results as tables (or JSON)."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from pathlib import Path

import click
import yaml
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn
from rich.table import Table

from ragmon.collectors.files import JsonlSource, SourceStopped
from ragmon.monitor.app import logs
from ragmon.monitor.app.cli_backup import backup, restore
from ragmon.monitor.app.cli_catalog import catalog
from ragmon.monitor.app.cli_db import db
from ragmon.monitor.app.cli_dead_letters import dead_letters
from ragmon.monitor.app.cli_erase import erase_command
from ragmon.monitor.app.cli_eval import eval_command
from ragmon.monitor.app.cli_events import events
from ragmon.monitor.app.cli_findings import findings, trace
from ragmon.monitor.app.cli_keys import keys
from ragmon.monitor.app.cli_labels import labels
from ragmon.monitor.app.cli_numbers import FINITE_FLOAT
from ragmon.monitor.app.cli_output import (
    FOUND,
    PORT_IN_USE,
    SOURCE_STOPPED,
    USAGE,
    error,
    errors,
    output_option,
    shown,
    stdout,
    visible,
)
from ragmon.monitor.app.cli_reconcile import reconcile_command  # noqa: F401  (registers catalog reconcile)
from ragmon.monitor.app.cli_samples import samples
from ragmon.monitor.app.cli_unread import otlp
from ragmon.monitor.app.findings_view import ReadView
from ragmon.monitor.app.wiring import (
    build_jobs,
    build_otlp,
    build_runtime,
    build_scheduler,
    build_sources,
    settle_start_up_objects,
)
from ragmon.monitor.config.settings import (
    ConfigError,
    Settings,
    check_telemetry_target,
    effective_config,
    load_settings,
)
from ragmon.monitor.core.retry import GaveUp, RetryPolicy, until_accepted

EXAMPLE_EVENTS = Path(__file__).parent / "examples" / "events.jsonl"

console = stdout()  # full-width lines when stdout is not a terminal
log = logging.getLogger(__name__)


def _settings(ctx: click.Context) -> Settings:
    try:
        settings = load_settings(ctx.obj.get("config"))
    except ConfigError as problem:
        error(problem)
        ctx.exit(2)
    logs.configure(settings.log.level, settings.log.format)
    return settings


def _exposure(ctx: click.Context, settings: Settings, host: str) -> bool:
    """Whether the port will be open to anyone on purpose (``http.allow_unauthenticated``); a
    non-loopback address without a token that was not allowed ends the command with status 2."""
    from ragmon.collectors.http_access import ExposureRefused, check_exposure

    token = settings.http.token.get_secret_value() if settings.http.token else None
    try:
        unauthenticated = check_exposure(host, token, settings.http.allow_unauthenticated)
    except ExposureRefused as problem:
        error(problem)
        ctx.exit(2)
    if unauthenticated:
        readers = "" if settings.http.read_token or settings.http.read_tokens else (
            " and read every tenant's findings, traces and the status page (set http.read_token to guard reads)")
        log.warning("serving %s without a token (http.allow_unauthenticated): anyone who can reach the port "
                    "can send events%s", host, readers)
    return unauthenticated


def _http_options(settings: Settings, host: str) -> dict:
    """The options of the HTTP app that come from the ``http`` section and the address served."""
    from ragmon.collectors.http_access import is_loopback
    from ragmon.monitor.app.read_side import host_allowlist, tokens_of

    http = settings.http
    return {"token": tokens_of(settings, "token"), "catalog_token": tokens_of(settings, "catalog_token"),
            "guard_catalog": not is_loopback(host), "metrics_token": tokens_of(settings, "metrics_token"),
            "hosts": host_allowlist(settings, host),
            "allowed_origins": http.allowed_origins, "max_body_bytes": http.max_body_bytes,
            "max_records": http.max_records_per_request, "max_pending": http.max_pending_requests,
            "body_timeout": http.body_timeout_seconds, "max_inflight_bytes": http.max_inflight_bytes,
            "saturation_seconds": http.saturation_seconds}


def _bind(ctx: click.Context, host: str, port: int) -> socket.socket:
    """The listening address, bound before anything else starts (and before any banner): a port
    in use or an address this machine does not have ends the command with status 4."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a restart need not wait
    try:
        sock.bind((host, port))
    except OSError as problem:
        sock.close()
        error(f"cannot listen on {host}:{port}: {problem.strerror or problem}")
        ctx.exit(PORT_IN_USE)
    sock.set_inheritable(True)
    return sock


def _announce(settings: Settings, line: str) -> None:
    """What a serving command says once it listens: a line for people, or with ``log.format:
    json`` a log record like every other line (a log pipeline takes no decorative text)."""
    if settings.log.format == "json":
        log.info(line)
    else:
        errors.print(shown(line))


def _serving(settings: Settings, host: str, port: int) -> Settings:
    """The settings with the address actually served (``--host``, ``--port``) in ``http``: what the
    runtime checks ``telemetry.otlp_endpoint`` against."""
    if (host, port) == (settings.http.host, settings.http.port):
        return settings
    return settings.model_copy(update={"http": settings.http.model_copy(update={"host": host, "port": port})})


def _scheme(settings: Settings) -> str:
    return "https" if settings.http.tls_cert_file else "http"


def _tls_options(settings: Settings) -> dict:
    """uvicorn's TLS options from ``http.tls_*``: HTTPS with a certificate, and with a client CA a
    client certificate required on every connection (mutual TLS)."""
    import ssl

    http = settings.http
    if http.tls_cert_file is None:
        return {}
    for key in ("tls_cert_file", "tls_key_file", "tls_client_ca_file"):
        path = getattr(http, key)
        if path is not None and not path.is_file():
            raise ConfigError(f"http.{key}: no file at {path}")
    options = {"ssl_certfile": str(http.tls_cert_file), "ssl_keyfile": str(http.tls_key_file)}
    if http.tls_client_ca_file is not None:
        options |= {"ssl_ca_certs": str(http.tls_client_ca_file), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


class _Main(click.Group):
    """Unusable configuration or schema, or a database out of reach, found while a command builds
    its parts, ends the command with the reason and status 2 instead of a traceback."""

    def invoke(self, ctx: click.Context):
        from ragmon.monitor.core.errors import Retryable
        from ragmon.monitor.storage.store import SchemaOutdated

        try:
            return super().invoke(ctx)
        except click.ClickException as problem:  # click prints it: a value it names is made visible first
            problem.message = visible(problem.message)
            raise
        except (ConfigError, SchemaOutdated, Retryable) as problem:
            error(problem)
            ctx.exit(USAGE)
        except OSError as problem:
            if problem.filename is None:  # not a file the user named: a bug or the machine, with its traceback
                raise
            error(f"{problem.filename}: {problem.strerror or ''}")
            ctx.exit(USAGE)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "-c", type=click.Path(path_type=Path), envvar="RAGMON_CONFIG",
              help="YAML config file (default: $RAGMON_CONFIG, else built-in defaults).")
@click.version_option(package_name="ragmon")
@click.pass_context
def main(ctx: click.Context, config: Path | None) -> None:
    """ragmon: production monitor for retrieval-augmented generation."""
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@main.group()
def config() -> None:
    """Inspect the configuration."""


@config.command("check")
@output_option("yaml", "json")
@click.pass_context
def config_check(ctx: click.Context, output: str) -> None:
    """Validate the configuration and print the effective values, secrets masked."""
    settings = _settings(ctx)
    check_telemetry_target(settings)  # an error ends the command with status 2 (see _Main)
    data = effective_config(settings)
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())
    errors.print("[green]configuration is valid[/green]")


EVENTS_FILE = click.Path(exists=True, dir_okay=False, readable=True, allow_dash=True, path_type=Path)


@main.command()
@click.argument("file", type=EVENTS_FILE)
@click.option("--batch-size", default=500, show_default=True, help="Records per processed batch.")
@click.option("--retries", default=8, show_default=True,
              help="Tries of a batch refused by an unavailable store before giving up (with back-off).")
@click.option("--json-file", "json_out", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Also write the summary as JSON to this file.")
@click.option("--allow-rejects", is_flag=True, help="Exit 0 even when records were rejected.")
@output_option("table", "json")
@click.pass_context
def replay(ctx: click.Context, file: Path, batch_size: int, retries: int, json_out: Path | None,
           allow_rejects: bool, output: str) -> None:
    """Feed native events from a JSONL FILE (or - for stdin) through the pipeline.

    Rejected records go to the dead-letter file; a table of accepted and rejected counts follows.
    Exit 1 when records were rejected, unless --allow-rejects.
    """
    settings = _settings(ctx)
    # a replay of past traffic must not page anyone for leaks long over: no direct push
    settings = settings.model_copy(update={
        "alerts": settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})})
    runtime = build_runtime(settings, command="replay")
    settle_start_up_objects()
    pipeline = runtime.pipeline
    stdin = str(file) == "-"
    total = None if stdin else file.stat().st_size
    stream = sys.stdin.buffer if stdin else file.open("rb")
    progress = Progress(
        TextColumn("[bold]replay[/bold] {task.description}"), BarColumn(), TransferSpeedColumn(),
        TextColumn("line {task.fields[line]}"), TimeElapsedColumn(), console=errors, transient=True,
    )
    task = progress.add_task(escape(visible(file)), total=total, line=0)  # the column reads markup
    source = JsonlSource(
        stream, pipeline.process, path=str(file), batch_size=batch_size,
        max_record_bytes=settings.limits.max_event_bytes, keep_bytes=settings.dead_letter.max_raw_bytes,
        retry=RetryPolicy(attempts=max(1, retries)),
        on_commit=lambda line, read: progress.update(task, completed=read, line=line),
    )
    started = time.perf_counter()
    try:
        with progress:
            source.run()
        # what the file's catalog events showed of its earlier traces, without waiting for an interval
        until_accepted(lambda: pipeline.tick(force=True), RetryPolicy(attempts=max(1, retries)),
                       lambda delay: time.sleep(delay) or True)
    except SourceStopped as problem:
        error(problem)
        ctx.exit(1)
    except GaveUp as gave_up:
        error(f"the catalog's changes were not judged against the file's earlier traces: {gave_up.last}")
        ctx.exit(1)
    finally:
        runtime.close()
        if not stdin:
            stream.close()
    elapsed = time.perf_counter() - started
    accepted, rejected = pipeline.stats.snapshot()
    summary = _replay_summary(accepted, rejected, elapsed, settings)
    if output == "json":
        click.echo(json.dumps(summary))
    else:
        _print_replay(summary)
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=2) + "\n")
    if summary["rejected"] and not allow_rejects:
        ctx.exit(FOUND)


def _replay_summary(accepted, rejected, elapsed: float, settings: Settings) -> dict:
    n_accepted = sum(accepted.values())
    n_rejected = sum(rejected.values())
    return {
        "accepted": {event_type: n for (_, event_type), n in sorted(accepted.items())},
        "rejected": {reason: n for (_, reason), n in sorted(rejected.items())},
        "records": n_accepted + n_rejected,
        "seconds": round(elapsed, 3),
        "records_per_second": round((n_accepted + n_rejected) / elapsed) if elapsed > 0 else None,
        "dead_letter_file": str(settings.dead_letter.path) if n_rejected else None,
    }


def _print_replay(summary: dict) -> None:
    console = stdout()
    table = Table(title="replay summary", show_footer=True)
    table.add_column("outcome")
    table.add_column("kind / reason", footer="total")
    table.add_column("records", justify="right", footer=str(summary["records"]))
    for event_type, n in summary["accepted"].items():
        table.add_row("[green]accepted[/green]", event_type, str(n))
    for reason, n in summary["rejected"].items():
        table.add_row("[red]rejected[/red]", reason, str(n))
    console.print(table)
    rate = summary["records_per_second"]
    console.print(shown(f"{summary['records']} records in {summary['seconds']:.2f} s "
                        f"({rate if rate is not None else '-'} records/s)"))
    if summary["dead_letter_file"]:
        console.print(shown(f"rejected records are in {summary['dead_letter_file']}"))


@main.command()
@click.option("--host", help="Address to listen on (default from config: http.host).")
@click.option("--port", type=int, help="Port to listen on (default from config: http.port).")
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Run the monitor: HTTP ingest, /metrics, health and the read side on one port (embedded
    mode), or the read side on a port of its own (http.read_port).

    Stops gracefully on SIGTERM or Ctrl-C: requests in flight finish and are persisted first.
    Reads its tokens again on SIGHUP, and when a file they come from changes (docs/deployment.md,
    "Rotating secrets").
    """
    import uvicorn

    from ragmon.collectors.http import build_app
    from ragmon.collectors.http_credentials import CredentialSwitch
    from ragmon.monitor.app.secret_watch import watch_token_files
    from ragmon.monitor.app.token_reload import TokenReload, http_credentials

    settings = _settings(ctx)
    host = host or settings.http.host
    port = port or settings.http.port
    read_port = settings.http.read_port
    if read_port == port:
        raise ConfigError(f"http.read_port {read_port} is the port served (--port): give the read side a port of "
                          "its own, or leave http.read_port unset")
    unauthenticated = _exposure(ctx, settings, host)
    credentials = CredentialSwitch(http_credentials(settings, host, unauthenticated))
    settings = _serving(settings, host, port)
    listening = [_bind(ctx, host, port), *([_bind(ctx, host, read_port)] if read_port else [])]
    runtime = build_runtime(settings, schema_wait=settings.database.schema_wait_seconds, command="serve")
    runtime.metrics.http_unauthenticated.set(1 if unauthenticated else 0)
    otlp = build_otlp(runtime)
    sources = [*build_sources(runtime), *([otlp] if otlp is not None else [])]
    scheduler = build_scheduler(runtime, build_jobs(runtime)) if settings.scheduler.embedded else None
    settle_start_up_objects()
    server: uvicorn.Server

    def start_sources() -> None:
        for source in sources:
            source.start()
        if scheduler is not None:
            scheduler.start()
        # A source that stops on its own (e.g. too many dead letters) stops the whole process, loudly.
        threading.Thread(target=watch, name="source-watch", daemon=True).start()

    def watch() -> None:
        while not server.should_exit:
            if any(source.error is not None for source in sources):
                server.should_exit = True
            time.sleep(0.5)

    def stop() -> None:
        if scheduler is not None:
            scheduler.shutdown()
        for source in sources:
            source.shutdown(timeout=30)
        runtime.close()

    def ready() -> bool:
        """Not ready while a source is not (the Kafka catalog reader before it reached the catalog
        topic's end, the traces consumer while it waits for the catalog, at start and after a
        rebalance), nor while the database is down."""
        return all(source.ready() for source in sources) and runtime.ready()

    app = build_app(runtime.pipeline.process, runtime.registry, ready, **_http_options(settings, host),
                    on_startup=start_sources, on_shutdown=stop, otlp=otlp,
                    observe_request=runtime.metrics.http_requests.observe,
                    read_api=ReadView(runtime), credentials=credentials, read_port=read_port)
    kafka = f", consuming {settings.kafka.traces_topic}" if settings.kafka.bootstrap_servers else ""
    routes = ("POST /v1/events" + (", POST /v1/traces" if otlp is not None else "") + ", GET /metrics, /healthz, "
              "/readyz")
    reading = "GET / (status), /traces/{id}, /api/v1/findings, /api/v1/traces/{id}, /api/v1/unread" + (
        " (closed: see the warning above)" if credentials.current.reads.closed else "")
    where = (f"{routes}; reads on port {read_port}: {reading}" if read_port else f"{routes}, {reading}")
    _announce(settings, f"ragmon serving on {_scheme(settings)}://{host}:{port}{kafka} ({where})")
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                                           timeout_graceful_shutdown=30, **_tls_options(settings)))
    reload = TokenReload(credentials, lambda: load_settings(ctx.obj.get("config")), host,
                         on_exposure=lambda open_to_all: runtime.metrics.http_unauthenticated.set(
                             1 if open_to_all else 0))
    reload.on_sighup()
    file_watch = watch_token_files(reload, settings, ctx.obj.get("config"))
    server.run(sockets=listening)
    if file_watch is not None:
        file_watch.stop()
    failed = [source.error for source in sources if source.error is not None]
    if failed:
        error(f"a source stopped: {failed[0]}")
        ctx.exit(SOURCE_STOPPED)


@main.command("scheduler")
@click.option("--host", help="Address for /metrics and health (default: http.host).")
@click.option("--port", type=int, help="Port for /metrics and health (default: http.port).")
@click.pass_context
def scheduler_command(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Run the periodic jobs (weekly pull, staleness scan, canary probes, retention) in a process of
    their own, with /metrics and health; set scheduler.embedded to false on the collectors. Only
    the process holding the scheduler lock runs jobs; others stand by and take over."""
    import uvicorn

    from ragmon.collectors.http import build_app

    settings = _settings(ctx)
    host = host or settings.http.host
    port = port or settings.http.port
    unauthenticated = _exposure(ctx, settings, host)
    settings = _serving(settings, host, port)
    listening = _bind(ctx, host, port)
    runtime = build_runtime(settings, schema_wait=settings.database.schema_wait_seconds, command="scheduler")
    runtime.metrics.http_unauthenticated.set(1 if unauthenticated else 0)
    runner = build_scheduler(runtime, build_jobs(runtime, standalone=True))

    def stop() -> None:
        runner.shutdown()
        runtime.close()

    app = build_app(runtime.pipeline.process, runtime.registry, runtime.ready, **_http_options(settings, host),
                    ingest=False, on_startup=runner.start, on_shutdown=stop,
                    observe_request=runtime.metrics.http_requests.observe)
    _announce(settings, f"ragmon scheduler on {_scheme(settings)}://{host}:{port} (GET /metrics, /healthz, /readyz)")
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False,
                                  timeout_graceful_shutdown=30, **_tls_options(settings))).run(sockets=[listening])


@main.command()
@click.option("--timeout", type=FINITE_FLOAT, default=3.0, show_default=True, help="Seconds to wait for the answer.")
@click.pass_context
def healthcheck(ctx: click.Context, timeout: float) -> None:
    """Exit 0 when the `serve` or `scheduler` of this configuration answers GET /healthz on
    this machine (the image's HEALTHCHECK), else 1 with the reason."""
    import ssl

    import httpx

    from ragmon.monitor.config.telemetry import WILDCARDS

    settings = _settings(ctx)
    host = settings.http.host
    if host in WILDCARDS:
        host = "127.0.0.1"  # a listener on every address answers on loopback
    url = f"{_scheme(settings)}://{host if ':' not in host else f'[{host}]'}:{settings.http.port}/healthz"
    verify: ssl.SSLContext | bool = True
    if settings.http.tls_cert_file:
        # liveness, not authenticity: the certificate names the service, not the loopback address
        verify = ssl.create_default_context()
        verify.check_hostname = False
        verify.verify_mode = ssl.CERT_NONE
    try:
        status = httpx.get(url, timeout=timeout, verify=verify).status_code
    except httpx.HTTPError as problem:
        errors.print(shown(f"unhealthy: {url}: {type(problem).__name__}"))
        ctx.exit(1)
    if status != 200:
        errors.print(shown(f"unhealthy: {url}: HTTP {status}"))
        ctx.exit(1)


@main.group()
def probe() -> None:
    """Canary permission probes."""


@probe.command("run")
@output_option("table", "json")
@click.pass_context
def probe_run(ctx: click.Context, output: str) -> None:
    """Run every configured probe once against the retrieval endpoint and print the results;
    exit 1 when one fails (a leak, a miss, or an error reaching the retrieval)."""
    from dataclasses import asdict

    from ragmon.monitor.app.probe_clients import build_retrieval
    from ragmon.monitor.app.probes import ProbeError, run_probes

    settings = _settings(ctx)
    if not settings.probes.probes:
        raise click.UsageError("no probes configured (probes.probes)")
    try:
        retrieve = build_retrieval(settings.probes)
        results = run_probes(settings.probes.probes, retrieve)
    except ProbeError as error:
        raise click.ClickException(str(error)) from None
    if hasattr(retrieve, "close"):
        retrieve.close()
    if output == "json":
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        table = Table(title=f"{len(results)} probes")
        for column in ("probe", "tenant", "verdict", "results", "seconds"):
            table.add_column(column, justify="right" if column in ("results", "seconds") else "left")
        table.add_column("detail", overflow="fold")  # document ids in full, wrapped
        for r in results:
            colour = "green" if r.ok else "red"
            detail = (r.error or (f"must not see: {', '.join(r.leaked)}" if r.leaked else "")
                      or (f"nothing matched: {', '.join(r.missing)}" if r.missing else ""))
            table.add_row(shown(r.name), shown(r.tenant), shown(r.verdict, style=colour), str(r.retrieved),
                          f"{r.seconds:.2f}", shown(detail))
        stdout().print(table)
    if any(not r.ok for r in results):
        ctx.exit(FOUND)


@main.command()
@click.option("--traces", default=30_000, show_default=True, help="Simulated traces.")
@click.option("--seconds", type=FINITE_FLOAT, default=45.0, show_default=True,
              help="Wall-clock time to spread them over.")
@click.option("--json-file", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write what the demo found as JSON to this file.")
@click.option("--batch-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("ragmon-data/demo-batches"),
              show_default=True, help="Where the weekly export for labeling is written.")
@click.pass_context
def demo(ctx: click.Context, traces: int, seconds: float, json_out: Path | None, batch_dir: Path) -> None:
    """Run the whole monitor on simulated multi-tenant traffic with injected incidents.

    Needs no external service: the store is a temporary SQLite file. Ends by itself.
    """
    import tempfile

    from ragmon.alerts.demo import DemoAlerts
    from ragmon.exporters.prometheus import metric_reader
    from ragmon.monitor.app.demo import Demo, default_incidents, print_report
    from ragmon.monitor.app.simulate import Simulator

    base = _settings(ctx)
    with tempfile.TemporaryDirectory(prefix="ragmon-demo-") as scratch:
        settings = base.model_copy(update={
            "database": base.database.model_copy(update={"url": f"sqlite:///{scratch}/demo.db"}),
            "dead_letter": base.dead_letter.model_copy(update={"path": Path(scratch) / "dead-letters.jsonl"}),
            # simulated leaks must never page anyone: the demo shows its alerts itself
            "alerts": base.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None}),
        })
        # Simulated time runs faster than the wall clock: a few days pass in under a minute.
        simulator = Simulator(start=time.time() - 5 * 86400, rate=0.1, incidents=default_incidents(traces))
        alerts = DemoAlerts(settings.alerts, lambda: simulator.now)
        runtime = build_runtime(settings, clock=lambda: simulator.now, extra_sinks=[alerts.sink])
        alerts.watch(runtime.catalog)
        try:
            report = Demo(simulator, runtime.pipeline.process,
                          lambda: metric_reader(runtime.registry),
                          console, traces, seconds, alerts=alerts.lines).run()
            exported = _demo_export(runtime.engine, batch_dir)
        finally:
            runtime.close()
    print_report(console, report)
    if exported is not None:
        week, cases, where = exported
        console.print(shown(f"weekly export: {cases} redacted cases of {week} for labeling in {where}/ "
                            "(cases.jsonl, tasks.json, label-config.xml)"))
    if json_out is not None:
        json_out.write_text(json.dumps({
            "traces": report.traces, "simulated_hours": round(report.simulated_hours, 1),
            "findings": [{"incident": f.incident.kind, "tenant": f.incident.tenant, "index": f.incident.index,
                          "detected": f.detected, "evidence": f.evidence} for f in report.findings],
        }, indent=2) + "\n")
    if not report.all_detected:
        ctx.exit(1)


def _demo_export(engine, batch_dir: Path) -> tuple[str, int, Path] | None:
    """The weekly pull of the demo's busiest week, as ``samples pull`` writes it: (week, cases,
    directory), or None when nothing was sampled.

    The demo's few simulated days often cross a Monday, and which side holds the most depends on the
    day it runs: started late on a Sunday five days back, the older week holds minutes of traffic."""
    from ragmon.monitor.labeling.sample_store import SampleStore
    from ragmon.monitor.labeling.weekly import pull_week

    store = SampleStore(engine)
    weeks = store.latest_weeks(2)
    if not weeks:
        return None
    busiest = max(weeks, key=lambda week: store.count(week=week))
    pulled = pull_week(store, busiest, directory=batch_dir / busiest)
    return pulled.week, pulled.cases, batch_dir / pulled.week


@main.group()
def rules() -> None:
    """Alert rules for Prometheus."""


@rules.command("render")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the rules file here instead of printing it.")
@click.pass_context
def rules_render(ctx: click.Context, out_file: Path | None) -> None:
    """Render every alert of ragmon, with the configured thresholds, as a Prometheus rules file."""
    from ragmon.alerts.render import render_rules

    text = render_rules(_settings(ctx).alerts)
    if out_file is None:
        click.echo(text, nl=False)
    else:
        out_file.write_text(text)
        errors.print(shown(f"rules written to {out_file}"))


@main.group()
def dashboard() -> None:
    """Grafana dashboards."""


@dashboard.command("render")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("helm/ragmon/dashboards"), show_default=True, help="Directory for the JSON files.")
def dashboard_render(out_dir: Path) -> None:
    """Write every ragmon dashboard as Grafana JSON (a Prometheus datasource variable, namespace and
    job variables, tenant and index variables); the Helm chart ships them as a ConfigMap for Grafana's
    sidecar."""
    from ragmon.exporters.dashboard import render_dashboards

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in render_dashboards().items():
        (out_dir / name).write_text(text)
        errors.print(shown(out_dir / name))


main.add_command(db)
main.add_command(backup)
main.add_command(restore)
main.add_command(keys)
main.add_command(eval_command)
main.add_command(samples)
main.add_command(findings)
main.add_command(events)
main.add_command(dead_letters)
main.add_command(dead_letters, name="dlq")  # the SPEC's short name
main.add_command(trace)
main.add_command(labels)
main.add_command(erase_command)
main.add_command(catalog)
main.add_command(otlp)

if __name__ == "__main__":
    main()
