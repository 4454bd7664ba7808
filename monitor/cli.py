"""The ``ragmon`` command line. Commands stay thin: they load config, ask ``monitor.wiring`` for
the parts, run them, and print results as tables (or JSON)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn
from rich.table import Table

from collectors.files import JsonlSource, RetryPolicy, SourceStopped
from monitor import logs
from monitor.config import ConfigError, Settings, effective_config, load_settings
from monitor.wiring import build_pipeline

EXAMPLE_EVENTS = Path(__file__).parent / "examples" / "events.jsonl"

console = Console()
errors = Console(stderr=True)


def _settings(ctx: click.Context) -> Settings:
    try:
        settings = load_settings(ctx.obj.get("config"))
    except ConfigError as error:
        errors.print(f"[red]error:[/red] {error}", highlight=False)
        ctx.exit(2)
    logs.configure(settings.log.level, settings.log.format)
    return settings


@click.group()
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
@click.pass_context
def config_check(ctx: click.Context, as_json: bool) -> None:
    """Validate the configuration and print the effective values, secrets masked."""
    settings = _settings(ctx)
    data = effective_config(settings)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())
    errors.print("[green]configuration is valid[/green]")


@main.command()
@click.argument("file", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--batch-size", default=500, show_default=True, help="Records per processed batch.")
@click.option("--retries", default=8, show_default=True,
              help="Tries of a batch refused by an unavailable store before giving up (with back-off).")
@click.option("--json", "json_out", type=click.Path(path_type=Path),
              help="Also write the summary as JSON to this file.")
@click.pass_context
def replay(ctx: click.Context, file: Path, batch_size: int, retries: int, json_out: Path | None) -> None:
    """Feed native events from a JSONL FILE (or - for stdin) through the pipeline.

    Rejected records go to the dead-letter file; a table of accepted and rejected counts follows.
    """
    settings = _settings(ctx)
    pipeline = build_pipeline(settings)
    stdin = str(file) == "-"
    total = None if stdin else file.stat().st_size
    stream = sys.stdin.buffer if stdin else file.open("rb")
    progress = Progress(
        TextColumn("[bold]replay[/bold] {task.description}"), BarColumn(), TransferSpeedColumn(),
        TextColumn("line {task.fields[line]}"), TimeElapsedColumn(), console=errors, transient=True,
    )
    task = progress.add_task(str(file), total=total, line=0)
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
    except SourceStopped as error:
        errors.print(f"[red]error:[/red] {error}", highlight=False)
        ctx.exit(1)
    finally:
        pipeline.shutdown()
        if not stdin:
            stream.close()
    elapsed = time.perf_counter() - started
    accepted, rejected = pipeline.stats.snapshot()
    summary = _replay_summary(accepted, rejected, elapsed, settings)
    _print_replay(summary)
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=2) + "\n")


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
    console.print(f"{summary['records']} records in {summary['seconds']:.2f} s "
                  f"({rate if rate is not None else '-'} records/s)")
    if summary["dead_letter_file"]:
        console.print(f"rejected records are in {summary['dead_letter_file']}")


if __name__ == "__main__":
    main()
