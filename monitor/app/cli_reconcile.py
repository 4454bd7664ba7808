"""``ragmon catalog reconcile`` (docs/catalog.md, "Reconciliation"): what the indexes serve against
their sources now, from the stored catalog, without any traffic."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import click
from rich.table import Table

from ragmon.monitor.app.cli_catalog import catalog
from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_output import FOUND, errors, output_option, shown, stdout
from ragmon.monitor.core.reconcile import Drift, NotJudged


@catalog.command("reconcile")
@click.option("--tenant", help="Only this tenant (as the metrics and findings show it).")
@click.option("--index", help="Only this index (as the metrics and findings show it).")
@click.option("--kind", type=click.Choice([kind.value for kind in Drift]), help="Only this kind of drift.")
@output_option("table", "json")
@click.pass_context
def reconcile_command(ctx: click.Context, tenant: str | None, index: str | None, kind: str | None,
                      output: str) -> None:
    """Per tenant and index, the documents an index serves stale, deleted at the source, or with an ACL
    narrower (a revocation pending) or wider than the source's, the oldest ones named with the rule,
    and the entries that could not be judged. Exit 1 when a revocation is pending, or when the catalog
    holds no index entry to reconcile."""
    from ragmon.monitor.app.cli_catalog import _shown_ids
    from ragmon.monitor.app.reconcile_view import drift_findings, drift_rows
    from ragmon.monitor.app.wiring import reading_redactor
    from ragmon.monitor.core.catalog import Catalog
    from ragmon.monitor.core.reconcile import reconcile
    from ragmon.monitor.storage.catalog_store import load_catalog

    settings = settings_of(ctx)
    engine = existing_engine_of(settings)
    try:
        held = Catalog()
        load_catalog(engine, held)
    finally:
        engine.dispose()
    result = reconcile(held.documents, held.indexed.values(), time.time())
    show = _shown_ids(settings)
    redactor = reading_redactor(settings)  # user: principals as pseudonyms, keyed as `serve` keys them

    def principal(value: str) -> str:
        try:
            return redactor.principal(value)
        except ValueError:  # no caller key here: a user is not shown
            return value.split(":", 1)[0] + ":[hidden]"

    rows = [r for r in drift_rows(result, show) if (tenant is None or r.tenant == tenant)
            and (index is None or r.index == index)]
    findings = drift_findings(result, show, principal, tenant, index, kind)
    if output == "json":
        click.echo(json.dumps({"indexes": [asdict(r) for r in rows], "findings": [asdict(f) for f in findings]}))
    else:
        _print(rows, findings)
    if not rows:  # nothing held is nothing judged, not an index level with its sources
        scope = "" if tenant is None and index is None else " for this tenant and index"
        errors.print(shown(f"no index entries in the catalog{scope}: nothing was reconciled. Configure a source "
                           "of index entries (docs/catalog.md) or send index events; `ragmon catalog sync` says "
                           "whether a source failed", "red"))
        ctx.exit(FOUND)
    if any(r.documents[Drift.ACL_NARROWER] for r in rows):
        ctx.exit(FOUND)


def _print(rows, findings) -> None:
    console = stdout()
    table = Table(title="catalog reconcile: what the indexes serve against their sources")
    columns = ("tenant", "index", "entries", *(f"{k.value} (oldest h)" for k in Drift),
               *(f"not judged: {r.value}" for r in NotJudged))
    for column in columns:
        table.add_column(column, justify="left" if column in ("tenant", "index") else "right")
    for row in rows:
        cells = [f"{row.documents[k]} ({row.oldest_seconds[k] / 3600:.1f})" if row.documents[k] else "0"
                 for k in Drift]
        table.add_row(shown(row.tenant), shown(row.index), str(row.entries),
                      *(shown(c, "red" if c != "0" and k in (Drift.ACL_NARROWER, Drift.DELETED) else "")
                        for c, k in zip(cells, Drift, strict=True)),
                      *(str(row.not_judged[r]) for r in NotJudged))
    console.print(table)
    for finding in findings:
        console.print(shown(f"{finding.tenant}/{finding.index}: {finding.kind}: {finding.doc_id} "
                            f"({finding.age_seconds / 3600:.1f} h): {finding.rule}"))
