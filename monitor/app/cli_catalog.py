"""``ragmon catalog sync`` and ``ragmon catalog check`` (docs/catalog.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict

import click
from rich.table import Table

from ragmon.monitor.app.catalog_check import CheckReport, check_catalog
from ragmon.monitor.app.catalog_sync import SyncReport
from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_numbers import FINITE_FLOAT
from ragmon.monitor.app.cli_output import FOUND, errors, output_option, shown, stdout
from ragmon.monitor.config.settings import Settings

CHANGE_KINDS = ("document", "tombstone", "index", "removal")


@click.group()
def catalog() -> None:
    """The catalog's sources (catalog.sources) and whether traffic's documents match it."""


@catalog.command("sync")
@click.option("--source", "names", multiple=True, help="Only this source (by its name; repeatable). Default: all.")
@click.option("--dry-run", is_flag=True, help="Read the sources and say what would change; change nothing.")
@click.option("--accept-deletions", is_flag=True,
              help="Apply a sync even when it deletes more than the source's max_deletion_share.")
@output_option("table", "json")
@click.pass_context
def sync(ctx: click.Context, names: tuple[str, ...], dry_run: bool, accept_deletions: bool, output: str) -> None:
    """Read each catalog source whole and apply what changed since its last sync as document and index
    events: the catalog moves from one complete snapshot to the next. Exit 1 when a sync failed or was
    held (it would delete more than max_deletion_share)."""
    from ragmon.monitor.app.wiring import build_catalog_sync, build_runtime

    settings = settings_of(ctx)
    configured = [source.name for source in settings.catalog.sources]
    if not configured:
        raise click.UsageError("no catalog sources are configured (catalog.sources)")
    unknown = [name for name in names if name not in configured]
    if unknown:
        raise click.UsageError(f"--source: no source named {', '.join(unknown)} (configured: {', '.join(configured)})")
    # catalog events raise no leak alert of their own; a sync must not page anyone either way
    settings = settings.model_copy(update={
        "alerts": settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})})
    runtime = build_runtime(settings)
    try:
        syncing = build_catalog_sync(runtime)
        reports = [syncing.sync(name, dry_run=dry_run, accept_deletions=accept_deletions)
                   for name in (names or configured)]
    finally:
        runtime.close()
    if output == "json":
        click.echo(json.dumps([_plain(report) for report in reports]))
    else:
        _print_sync(reports)
    if any(report.outcome != "ok" for report in reports):
        ctx.exit(FOUND)


def _plain(report: SyncReport) -> dict:
    data = asdict(report)
    data["changes"] = {kind: report.changes.get(kind, 0) for kind in CHANGE_KINDS}
    data["refused"] = dict(sorted(report.refused.items()))
    data["seconds"] = round(report.seconds, 3)
    data["deletion_share"] = round(report.deletion_share, 4)
    return data


def _print_sync(reports: list[SyncReport]) -> None:
    dry = any(report.dry_run for report in reports)
    table = Table(title="catalog sync" + (" (dry run: nothing changed)" if dry else ""))
    for column in ("source", "outcome", "items", *CHANGE_KINDS, "refused", "seconds"):
        table.add_column(column, justify="left" if column in ("source", "outcome", "refused") else "right")
    for report in reports:
        colour = {"ok": "green", "failed": "red", "held": "yellow"}[report.outcome]
        refused = ", ".join(f"{reason} {n}" for reason, n in sorted(report.refused.items()))
        table.add_row(shown(report.source), shown(report.outcome, colour), str(report.items),
                      *(str(report.changes.get(kind, 0)) for kind in CHANGE_KINDS), shown(refused or "-"),
                      f"{report.seconds:.2f}")
    stdout().print(table)
    for report in reports:
        if report.error:
            errors.print(shown(f"{report.source}: {report.outcome}: {report.error}"))


@catalog.command("check")
@click.option("--days", type=FINITE_FLOAT, help="Traffic of the last DAYS days (default: catalog.served_days).")
@click.option("--min-known", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="Share of served passages whose document the catalog must know, per index.")
@output_option("table", "json")
@click.pass_context
def check(ctx: click.Context, days: float | None, min_known: float, output: str) -> None:
    """Hold what traffic served (the digest `serve` keeps) against the catalog: per index, the share of
    passages whose document the catalog knows, the unknown ids most served, versions the catalog never
    knew, and documents without a tenant under traffic of several. Exit 1 when one of these fails."""
    from ragmon.monitor.core.catalog import Catalog
    from ragmon.monitor.storage.catalog_store import load_catalog
    from ragmon.monitor.storage.served_documents import ServedDocuments

    settings = settings_of(ctx)
    engine = existing_engine_of(settings)
    config = settings.catalog
    since = time.time() - (config.served_days if days is None else days) * 86400
    try:
        catalog = Catalog()
        load_catalog(engine, catalog)
        served = ServedDocuments(engine, time.time, config.served_days, config.served_max_rows).read(since)
    finally:
        engine.dispose()
    report = check_catalog(served, catalog, since, _shown_ids(settings), min_known)
    if output == "json":
        click.echo(json.dumps(asdict(report) | {"indexes": [
            asdict(i) | {"known_share": round(i.known_share, 4)} for i in report.indexes]}))
    else:
        _print_check(report, len(catalog.documents))
    if report.problems:
        ctx.exit(FOUND)


def _shown_ids(settings: Settings) -> Callable[[str], str]:
    """Ids as every surface shows them, keyed as ``serve`` keys them; one that needs a key this
    process lacks is shown as ``[hidden]``."""
    from ragmon.monitor.app.wiring import reading_redactor

    redactor = reading_redactor(settings)

    def shown_id(value: str) -> str:
        try:
            return redactor.shown_id(value)
        except ValueError:
            return "[hidden]"

    return shown_id


def _print_check(report: CheckReport, documents: int) -> None:
    console = stdout()
    if not report.indexes:
        since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(report.since))
        console.print(shown(f"no served passages recorded since {since} UTC: nothing to check (the digest is kept "
                            "by `ragmon serve`)"))
    table = Table(title=f"catalog check: {documents} documents in the catalog, traffic of tenants "
                        f"{', '.join(report.tenants) or '-'}")
    for column in ("index", "passages", "known", "share", "unknown documents", "versions served", "versions unknown",
                   "index entries", "entry versions unknown"):
        table.add_column(column, justify="left" if column == "index" else "right")
    for check in report.indexes:
        colour = "green" if check.known == check.passages else "red"
        table.add_row(shown(check.index), str(check.passages), str(check.known),
                      shown(f"{check.known_share:.1%}", colour), str(check.unmatched_documents),
                      str(check.versions_checked), str(check.versions_unknown), str(check.entries_checked),
                      str(check.entries_unknown))
    console.print(table)
    for check in report.indexes:
        for example in check.unmatched:
            hint = f"; {example['hint']}" if example["hint"] else ""
            n = example["passages"]
            console.print(shown(f"{check.index}: not in the catalog: {example['doc_id']} "
                                f"({n} passage{'' if n == 1 else 's'}{hint})"))
        for example in check.version_examples:
            console.print(shown(f"{check.index}: {example['doc_id']}: served version {example['served']} is unknown "
                                f"to the catalog (current {example['catalog']})"))
        for example in check.entry_examples:
            console.print(shown(f"{check.index}: {example['doc_id']}: the index holds version {example['indexed']}, "
                                f"one the document source never had (current {example['catalog']})"))
    for example in report.tenantless_examples:
        tenants = ", ".join(example["served_to"])
        console.print(shown(f"no tenant in the catalog: {example['doc_id']}, served to {tenants}"))
    for problem in report.problems:
        errors.print(shown(f"problem: {problem}", "red"))
