"""``ragmon findings list`` and ``ragmon trace show``: what fired on which trace, in words, read
from the database ``serve`` writes (the same views as ``GET /api/v1/findings`` and
``GET /api/v1/traces/{trace_id}``)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import click
from rich.table import Table

from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_output import FOUND, output_option, shown, stdout, visible
from ragmon.monitor.app.findings_view import findings_page, stored_ids_for, trace_view
from ragmon.monitor.core.signals.explain import FindingSignal
from ragmon.monitor.findings.query import MAX_LIMIT, QueryError
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.sample_store import SampleStore

OUTPUT = output_option("table", "json")


@click.group()
def findings() -> None:
    """Which passages of which trace broke which rule."""


@findings.command("list")
@click.option("--signal", type=click.Choice([s.value for s in FindingSignal]), help="Only this signal.")
@click.option("--tenant", help="Only this tenant.")
@click.option("--index", help="Only this index.")
@click.option("--since", help="Only traces since then: 30m, 24h, 7d, an ISO-8601 time or Unix seconds.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True, help="Findings at most.")
@OUTPUT
@click.pass_context
def list_findings(ctx: click.Context, signal: str | None, tenant: str | None, index: str | None, since: str | None,
                  limit: int, output: str) -> None:
    """The newest findings first, each with its rule in words."""
    settings = settings_of(ctx)
    store = FindingsStore(existing_engine_of(settings))
    params = {name: value for name, value in (("signal", signal), ("tenant", tenant), ("index", index),
                                               ("since", since), ("limit", str(limit))) if value}
    try:
        page = findings_page(store, params, time.time(), stored_ids_for(settings))
    except QueryError as error:
        raise click.UsageError(str(error)) from None
    if output == "json":
        click.echo(json.dumps(page))
        return
    stdout().print(_table(page["findings"], f"{len(page['findings'])} findings, newest first"))


@click.group()
def trace() -> None:
    """One trace as ragmon saw it."""


@trace.command("show")
@click.argument("trace_id")
@click.option("--full", is_flag=True, help="Also every principal of the lists a reason names only the first few of.")
@OUTPUT
@click.pass_context
def show_trace(ctx: click.Context, trace_id: str, full: bool, output: str) -> None:
    """Every finding of TRACE_ID with its reason, and its sample if one was stored (redacted).
    Exit 1 when ragmon holds neither."""
    settings = settings_of(ctx)
    engine = existing_engine_of(settings)
    try:
        view = trace_view(FindingsStore(engine), SampleStore(engine), trace_id, stored_ids_for(settings))
    except QueryError as error:
        raise click.UsageError(str(error)) from None
    if view is None:
        click.echo(f"ragmon holds no finding and no sample of trace {visible(trace_id)}", err=True)
        ctx.exit(FOUND)
    if full:
        lists = FindingsStore(engine).principals(f["id"] for f in view["findings"])
        for finding in view["findings"]:
            finding["principals"] = lists.get(finding["id"], {})
    if output == "json":
        click.echo(json.dumps(view))
        return
    console = stdout()
    console.print(_table(view["findings"], f"trace {trace_id}: {len(view['findings'])} findings", trace_column=False))
    sample = view["sample"]
    if sample is None:
        console.print("no sample stored")
    else:
        console.print(shown(f"sample: week {sample['week']}, {sample['status']}, strata {', '.join(sample['strata'])}"))
    if full:
        console.print(_principals_table(view["findings"]))


def _table(rows: list[dict], title: str, trace_column: bool = True) -> Table:
    table = Table(title=shown(title))
    columns = ["time", *(["trace id"] if trace_column else []), "tenant", "index", "signal", "stage", "documents",
               "reason"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        documents = ", ".join(d["doc_id"] + (f"@{d['version']}" if d["version"] else "") for d in row["documents"])
        when = datetime.fromtimestamp(row["time"], UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        cells = [when, *([row["trace_id"]] if trace_column else []), row["tenant"], row["index"], row["signal"],
                 row["stage"] or "", documents, row["reason"]]
        table.add_row(*(shown(cell) for cell in cells))  # a `[group:x]` in a reason is not markup
    return table


def _principals_table(rows: list[dict]) -> Table:
    """``--full``: every principal of each finding's lists (rows stored before they were kept have none)."""
    table = Table(title="principals of each finding")
    for column in ("finding", "signal", "stage", "list", "principals"):
        table.add_column(column, overflow="fold")
    for row in rows:
        for name, kept in row["principals"].items():
            count = len(kept["values"]) + kept["omitted"]
            more = f" … and {kept['omitted']} more, past the stored bound" if kept["omitted"] else ""
            cells = [str(row["id"]), row["signal"], row["stage"] or "", f"{name} ({count})",
                     ", ".join(kept["values"]) + more]
            table.add_row(*(shown(cell) for cell in cells))
    return table
