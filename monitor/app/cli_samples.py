"""``ragmon samples``: the labeling queue."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from ragmon.monitor.app.cli_context import label_studio_of, settings_of, store_of
from ragmon.monitor.app.cli_output import output_option, shown, stdout
from ragmon.monitor.app.findings_view import stored_ids_for
from ragmon.monitor.findings.query import QueryError
from ragmon.monitor.labeling.sample_store import STATUSES, SampleStore

console = stdout()  # full-width lines when stdout is not a terminal


def _store(ctx: click.Context) -> SampleStore:
    return store_of(settings_of(ctx))


def _stored_tenant(ctx: click.Context, store: SampleStore, tenant: str | None) -> tuple[str, ...] | None:
    """``--tenant`` as samples store it: a tenant is stored by its shown id (docs/sampling.md,
    "Shown ids"), under whichever caller key was the newest when its samples were stored, so a raw
    name maps through every key of the ring; a shown id copied from a listing is taken as it is
    when samples hold it. The values samples hold, or the newest shown id when they hold none."""
    if tenant is None:
        return None
    try:
        candidates = stored_ids_for(settings_of(ctx)).of(tenant, "tenant")
    except QueryError as error:
        raise click.BadParameter(str(error), param_hint="--tenant") from None
    return tuple(c for c in candidates if store.count(tenant=c)) or candidates[:1]


def _batch_directory(week: str, tenant: str | None) -> Path:
    """The default directory of a batch: ``ragmon-data/batches/WEEK[-TENANT]``, the tenant's
    characters other than letters, digits, ``.``, ``_``, ``~`` and ``-`` replaced by ``_`` (a tenant
    is whatever a sender named it: a ``/`` or ``..`` in it must not pick another directory)."""
    if tenant is None:
        return Path("ragmon-data") / "batches" / week
    return Path("ragmon-data") / "batches" / f"{week}-{re.sub(r'[^A-Za-z0-9._~-]', '_', tenant)}"


def _check_week(week: str) -> None:
    from ragmon.monitor.labeling.weeks import week_monday

    try:
        week_monday(week)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--week") from None


@click.group()
def samples() -> None:
    """The labeling queue: sampled traces, redacted."""


@samples.command("list")
@click.option("--week", help="ISO week, e.g. 2026-W48.")
@click.option("--tenant", help="Only this tenant.")
@click.option("--status", type=click.Choice(STATUSES), help="Only this status.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Rows at most.")
@output_option("table", "json")
@click.pass_context
def list_samples(ctx: click.Context, week: str | None, tenant: str | None, status: str | None, limit: int,
                 output: str) -> None:
    """Samples in a stable order (week, tenant, trace id), with how many earlier turns of its
    conversation each carries; with `-o json`, one JSON object per line and sample (its redacted
    trace included, the earlier turns in its `history`)."""
    store = _store(ctx)
    tenant = _stored_tenant(ctx, store, tenant)
    rows = store.find(week=week, tenant=tenant, status=status, limit=limit)
    if output == "json":
        for row in rows:
            click.echo(json.dumps(row.model_dump()))
        return
    total = store.count(week=week, tenant=tenant, status=status)
    table = Table(title=f"{len(rows)} of {total} samples")
    for column in ("week", "tenant", "trace id", "strata", "split", "status", "turn", "earlier turns"):
        table.add_column(column)
    for row in rows:
        turn, history = row.payload.get("turn"), row.payload.get("history")
        table.add_row(*(shown(cell) for cell in (row.week, row.tenant, row.trace_id, ", ".join(row.strata),
                                                 row.split, row.status)),
                      "" if turn is None else str(turn), "" if history is None else str(len(history)))
    stdout().print(table)


@samples.command("stats")
@click.option("--week", help="ISO week, e.g. 2026-W48.")
@output_option("table", "json")
@click.pass_context
def stats(ctx: click.Context, week: str | None, output: str) -> None:
    """Samples per week, tenant and stratum, and per status."""
    by_stratum: Counter[tuple[str, str, str]] = Counter()
    by_status: Counter[str] = Counter()
    for tally in _store(ctx).tallies(week=week):  # counted in the database: no sample read whole
        by_status[tally.status] += tally.samples
        for stratum in tally.strata:
            by_stratum[tally.week, tally.tenant or "", stratum] += tally.samples
    if output == "json":
        click.echo(json.dumps({"statuses": dict(by_status), "strata": [
            {"week": w, "tenant": t, "stratum": s, "samples": n} for (w, t, s), n in sorted(by_stratum.items())]}))
        return
    table = Table(title="samples per week, tenant and stratum")
    for column in ("week", "tenant", "stratum", "samples"):
        table.add_column(column, justify="right" if column == "samples" else "left")
    for (w, t, s), n in sorted(by_stratum.items()):
        table.add_row(shown(w), shown(t), shown(s), shown(n))
    console.print(table)
    console.print(shown("by status: " + ", ".join(f"{s} {by_status.get(s, 0)}" for s in STATUSES)))


@samples.command("pull")
@click.option("--week", required=True, help="ISO week, e.g. 2026-W48.")
@click.option("--tenant", help="Only this tenant's samples.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Directory for the batch (default: ragmon-data/batches/WEEK[-TENANT]).")
@click.pass_context
def pull(ctx: click.Context, week: str, tenant: str | None, out_dir: Path | None) -> None:
    """Write the week's batch: cases.jsonl (test-set schema, empty labels), tasks.json and
    label-config.xml (Label Studio). Queued samples become exported; the same week again gives
    the same batch."""
    from ragmon.monitor.labeling.weekly import pull_week

    _check_week(week)
    store = _store(ctx)
    stored = _stored_tenant(ctx, store, tenant)
    tenant = stored[0] if stored else None  # as shown now (under the newest key)
    out_dir = out_dir or _batch_directory(week, tenant)
    pulled = pull_week(store, week, tenant=stored, directory=out_dir)
    console.print(shown(f"{pulled.cases} cases for {week}{' / ' + tenant if tenant else ''} in {out_dir} "
                        f"({pulled.exported} newly exported)"))


@samples.command("push")
@click.option("--week", required=True, help="ISO week, e.g. 2026-W48.")
@click.option("--tenant", help="Only this tenant's samples.")
@click.option("--project", help="Label Studio project title (default: label_studio.project).")
@click.pass_context
def push(ctx: click.Context, week: str, tenant: str | None, project: str | None) -> None:
    """Send the week's batch to Label Studio: the project is created with ragmon's labeling config
    when missing, and each case is imported once (pushing again adds only new cases). Queued
    samples become exported."""
    from ragmon.exporters.label_studio import LabelStudioError, Pushed, push_batch
    from ragmon.monitor.labeling.weekly import pull_week

    _check_week(week)
    settings = settings_of(ctx)
    title = project or settings.label_studio.project
    pushes: list[Pushed] = []
    try:
        with label_studio_of(settings) as studio:
            def push_to_studio(batch) -> int:
                pushes.append(push_batch(studio, title, batch))
                return pushes[-1].imported

            store = store_of(settings)
            pulled = pull_week(store, week, tenant=_stored_tenant(ctx, store, tenant), push=push_to_studio)
    except LabelStudioError as error:
        raise click.ClickException(str(error)) from None
    where = f"{week}{' / ' + tenant if tenant else ''}"
    if not pushes:
        console.print(shown(f"no cases for {where}: nothing pushed to project {title!r}"))
        return
    pushed = pushes[0]
    console.print(shown(f"{pushed.imported} of {pulled.cases} cases for {where} imported into "
                        f"project {title!r} (id {pushed.project_id}{', created' if pushed.created else ''}); "
                        f"{pulled.cases - pushed.imported} were there already; {pulled.exported} newly exported"))
