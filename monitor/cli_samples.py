"""``ragmon samples``: the labeling queue."""

from __future__ import annotations

import json
from collections import Counter

import click
from rich.console import Console
from rich.table import Table

from monitor.config import ConfigError, load_settings
from monitor.sample_store import STATUSES, SampleStore
from monitor.store import make_engine, prepare

console = Console()


def _store(ctx: click.Context) -> SampleStore:
    try:
        settings = load_settings(ctx.obj.get("config"))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    engine = make_engine(settings.database.url)
    prepare(engine)
    return SampleStore(engine)


@click.group()
def samples() -> None:
    """The labeling queue: sampled traces, redacted."""


@samples.command("list")
@click.option("--week", help="ISO week, e.g. 2026-W48.")
@click.option("--tenant", help="Only this tenant.")
@click.option("--status", type=click.Choice(STATUSES), help="Only this status.")
@click.option("--limit", default=50, show_default=True, help="Rows at most.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per sample (redacted trace included).")
@click.pass_context
def list_samples(ctx: click.Context, week: str | None, tenant: str | None, status: str | None, limit: int,
                 as_json: bool) -> None:
    """Samples in a stable order (week, tenant, trace id)."""
    rows = _store(ctx).find(week=week, tenant=tenant, status=status, limit=limit)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row.model_dump()))
        return
    table = Table(title=f"{len(rows)} samples")
    for column in ("week", "tenant", "trace id", "strata", "split", "status"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.week, row.tenant, row.trace_id, ", ".join(row.strata), row.split, row.status)
    console.print(table)


@samples.command("stats")
@click.option("--week", help="ISO week, e.g. 2026-W48.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def stats(ctx: click.Context, week: str | None, as_json: bool) -> None:
    """Samples per week, tenant and stratum, and per status."""
    rows = _store(ctx).find(week=week)
    by_stratum = Counter((r.week, r.tenant, s) for r in rows for s in r.strata)
    by_status = Counter(r.status for r in rows)
    if as_json:
        click.echo(json.dumps({"statuses": dict(by_status), "strata": [
            {"week": w, "tenant": t, "stratum": s, "samples": n} for (w, t, s), n in sorted(by_stratum.items())]}))
        return
    table = Table(title="samples per week, tenant and stratum")
    for column in ("week", "tenant", "stratum", "samples"):
        table.add_column(column, justify="right" if column == "samples" else "left")
    for (w, t, s), n in sorted(by_stratum.items()):
        table.add_row(w, t, s, str(n))
    console.print(table)
    console.print("by status: " + ", ".join(f"{s} {by_status.get(s, 0)}" for s in STATUSES))
