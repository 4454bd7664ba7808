"""``ragmon events check FILE``: would ragmon take these events? Each line decoded and checked as
the pipeline would, and nothing else: no store, no signals, no dead letters."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table

from ragmon.collectors.files import JsonlSource
from ragmon.monitor.app.cli_context import settings_of
from ragmon.monitor.app.cli_output import FOUND, output_option, shown, stdout
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import InvalidInput
from ragmon.monitor.core.pipeline import BatchResult, Rejection
from ragmon.monitor.core.records import RawRecord

SHOWN = 100  # rejections listed; the rest are counted


@click.group()
def events() -> None:
    """Native events (docs/events.md)."""


@events.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True, allow_dash=True, path_type=Path))
@output_option("table", "json")
@click.pass_context
def check(ctx: click.Context, file: Path, output: str) -> None:
    """Validate a JSONL FILE of events (or - for stdin) against the configured limits, without
    storing anything: each rejected line with its reason. Exit 1 on any rejection."""
    settings = settings_of(ctx)
    decoder = Decoder(settings.limits, time.time)
    accepted: Counter[str] = Counter()
    rejected: list[dict] = []

    def decode(records: Sequence[RawRecord]) -> BatchResult:
        result = BatchResult()
        for position, record in enumerate(records):
            try:
                event = decoder.decode(record.data, record.size)
            except InvalidInput as error:
                rejected.append({"line": record.origin["line"], "reason": error.reason.value, "detail": error.detail})
                result.rejections.append(Rejection(position, error.reason.value, error.detail))
                continue
            accepted[type(event).__struct_config__.tag] += 1
        return result

    stdin = str(file) == "-"
    stream = sys.stdin.buffer if stdin else file.open("rb")
    try:
        JsonlSource(stream, decode, path=str(file), max_record_bytes=settings.limits.max_event_bytes,
                    keep_bytes=settings.dead_letter.max_raw_bytes).run()
    finally:
        if not stdin:
            stream.close()
    reasons = Counter(r["reason"] for r in rejected)
    if output == "json":
        click.echo(json.dumps({"accepted": dict(sorted(accepted.items())), "rejected": dict(sorted(reasons.items())),
                               "rejections": rejected[:SHOWN], "rejections_not_listed": max(0, len(rejected) - SHOWN)}))
    else:
        console = stdout()
        if rejected:
            first = f", the first {SHOWN}" if len(rejected) > SHOWN else ""
            table = Table(title=shown(f"{len(rejected)} rejected lines{first}"))
            for column in ("line", "reason", "detail"):
                table.add_column(column, justify="right" if column == "line" else "left")
            for r in rejected[:SHOWN]:
                table.add_row(str(r["line"]), r["reason"], shown(r["detail"]))  # detail may quote the line
            console.print(table)
        taken = ", ".join(f"{n} {kind}" for kind, n in sorted(accepted.items())) or "none"
        console.print(shown(f"{sum(accepted.values())} events would be taken ({taken}), {len(rejected)} rejected"))
    if rejected:
        ctx.exit(FOUND)
