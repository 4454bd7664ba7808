"""``ragmon otlp unread``: the OTLP traces ragmon could not read, or read without a caller or a
context, each with its instrumentation scope, the closest dialect and what it lacked, read from the
database ``serve`` writes (the same view as ``GET /api/v1/unread``)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table

from ragmon.collectors.unread.closest import MISSING
from ragmon.collectors.unread.names import ShownNames
from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_output import output_option, shown, stdout
from ragmon.monitor.app.findings_view import stored_ids_for
from ragmon.monitor.app.unread_view import unread_page
from ragmon.monitor.findings.query import MAX_LIMIT, QueryError
from ragmon.monitor.storage.unread_store import UnreadStore

SPAN_GROUPS_SHOWN = 3  # of a digest, in the table; all of them with -o json


@click.group()
def otlp() -> None:
    """What ragmon made of the OTLP traces it received."""


@otlp.command("unread")
@click.option("--scope", help="Only this instrumentation scope (as sent or as shown).")
@click.option("--missing", type=click.Choice(MISSING), help="Only traces lacking this.")
@click.option("--tenant", help="Only this tenant.")
@click.option("--since", help="Only traces since then: 30m, 24h, 7d, an ISO-8601 time or Unix seconds.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True, help="Traces at most.")
@output_option("table", "json")
@click.pass_context
def unread(ctx: click.Context, scope: str | None, missing: str | None, tenant: str | None, since: str | None,
           limit: int, output: str) -> None:
    """The newest first: traces with no retrieval ragmon could read (missing retrieval), and traces read
    without a caller or a context, each with the closest dialect, what it lacked, and its spans in short
    (the whole digest with -o json: scopes, span names and kinds, attribute keys; never a value)."""
    settings = settings_of(ctx)
    store = UnreadStore(existing_engine_of(settings))
    params = {name: value for name, value in (("scope", scope), ("missing", missing), ("tenant", tenant),
                                               ("since", since), ("limit", str(limit))) if value}
    ids = stored_ids_for(settings)
    try:
        page = unread_page(store, params, time.time(), ids, ShownNames(ids.shown_id))
    except QueryError as error:
        raise click.UsageError(str(error)) from None
    if output == "json":
        click.echo(json.dumps(page))
        return
    stdout().print(_table(page["unread"]))


def _spans(digest: dict[str, Any]) -> str:
    """The largest span groups of a digest: ``3 × Retriever.retrieve (internal)``."""
    groups = digest.get("groups") or []
    words = [f"{g['spans']} × {g['name']} ({g['kind']})" for g in groups[:SPAN_GROUPS_SHOWN]]
    more = len(groups) - SPAN_GROUPS_SHOWN + digest.get("groups_omitted", 0)
    return "; ".join(words) + (f"; and {more} more groups" if more > 0 else "")


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(rows)} traces ragmon could not read or read in part, newest first")
    for column in ("time", "trace id", "tenant", "scope", "missing", "closest dialect", "lacked", "spans"):
        table.add_column(column, overflow="fold")
    for row in rows:
        when = datetime.fromtimestamp(row["time"], UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        cells = [when, row["trace_id"], row["tenant"] or "", row["scope"], row["missing"],
                 row["closest_dialect"] or "none", row["lacked"], f"{row['spans']}: {_spans(row['digest'])}"]
        table.add_row(*(shown(cell) for cell in cells))  # names hold no markup and no control character
    return table
