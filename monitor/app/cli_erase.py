"""``ragmon erase``: one person's data deleted on request, in every store (``monitor/app/erasure.py``)."""

from __future__ import annotations

import json

import click
from pydantic import SecretStr

from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_output import output_option
from ragmon.monitor.app.erasure import Person, erase
from ragmon.monitor.config.settings import ConfigError
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import SampleStore

_LABELS = {"samples": "samples", "conversation_turns": "conversation turns", "findings": "findings",
           "regression_cases": "regression cases",
           "batch_cases": "cases in weekly batches", "dead_letters": "dead letters (file)"}


@click.command("erase")
@click.option("--caller", help="The caller id as the application sends it (matched through its keyed pseudonym).")
@click.option("--conversation", help="A conversation id as the application sends it.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@output_option("text", "json")
@click.pass_context
def erase_command(ctx: click.Context, caller: str | None, conversation: str | None, dry_run: bool,
                  output: str) -> None:
    """Delete one person's samples (and their quota claims), the conversation turns kept for
    samples' histories, findings, regression cases, weekly batch cases and dead letters, named by
    caller id, conversation id or both. The counts are printed and logged; the ids never are. A
    Kafka dead-letter topic is not rewritten (its retention bounds it), nor are tasks already
    pushed to Label Studio."""
    if not (caller or conversation):
        raise click.UsageError("name whom to erase: --caller, --conversation or both")
    from ragmon.monitor.app.wiring import caller_key  # noqa: PLC0415 - the server's wiring, for its key only

    settings = settings_of(ctx)
    engine = existing_engine_of(settings)
    try:
        key = caller_key(settings)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    redactor = Redactor(settings.redaction.model_copy(update={"caller_key": SecretStr(key)}))
    erased = erase(Person(caller, conversation), settings, SampleStore(engine), FindingsStore(engine), redactor,
                   dry_run=dry_run)
    if output == "json":
        click.echo(json.dumps({"dry_run": dry_run, **erased.as_dict()}))
        return
    verb = "would delete" if dry_run else "deleted"
    for field, label in _LABELS.items():
        click.echo(f"{verb} {getattr(erased, field)} {label}")
    if erased.dead_letter_topic_untouched:
        click.echo("the dead-letter topic is not rewritten: its retention (retention.ms) bounds how long letters stay")
