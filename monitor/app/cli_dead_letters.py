"""``ragmon dead-letters list|replay`` (also ``ragmon dlq``): the records ragmon refused, and once
the sender or the config is fixed, the same records fed back through the pipeline.

Letters are read from the dead-letter file (``dead_letter.path`` and its rotated files) or, in
scaled mode, the dead-letter topic (``kafka.dead_letter_topic``, read whole without a consumer
group). Only a letter whose raw bytes were kept (``dead_letter.keep_raw``, encrypted) in full can
be replayed: the keyed hash and redacted text are not the record. Each replayed letter is noted
in ``<dead_letter.path>.replayed`` (0600) where the command runs, with what became of it, so it is
not replayed twice; a letter that fails again is written again by the pipeline (to the file or
the topic), with its new reason.

A replayed record has the privilege its letter records, never more: a catalog event its sender
could not write stays refused (``not_permitted``) unless the operator grants the catalog right
with ``--grant-catalog``, which the command says and the note records. A letter that cannot be read
(``collectors/letters.py``) is skipped and named by where it lies; both commands handle the others
and exit 1.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ragmon.collectors.kafka_dead_letter_reader import read_topic_letters
from ragmon.collectors.letter_body import UnreadableRaw, open_raw
from ragmon.collectors.letters import Letter, LettersRead, Unusable, read_letter_files
from ragmon.monitor.app.cli_context import settings_of
from ragmon.monitor.app.cli_output import FOUND, output_option, shown, stdout
from ragmon.monitor.app.letter_replay import replay_notes, replay_records
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.findings.query import QueryError, parse_since

NAMED = 50  # unusable letters named one by one; the rest are counted


FROM = click.option("--from", "where", type=click.Choice(["file", "topic"]),
                    help="The dead-letter file (dead_letter.path) or topic (kafka.dead_letter_topic); "
                         "default: the topic when kafka.bootstrap_servers is set, else the file.")


def _letters(settings: Settings, where: str | None) -> tuple[LettersRead, str]:
    """The letters, oldest first (and those that cannot be read), and where they were read, in words."""
    if (where or ("topic" if settings.kafka.bootstrap_servers else "file")) == "topic":
        if not settings.kafka.bootstrap_servers:
            raise click.UsageError("--from topic needs kafka.bootstrap_servers (RAGMON_KAFKA__BOOTSTRAP_SERVERS)")
        topic = settings.kafka.dead_letter_topic
        read = read_topic_letters(settings.kafka.client_options(), topic, settings.dead_letter.max_raw_bytes)
        return read, f"on topic {topic}"
    return read_letter_files(settings.dead_letter.path), f"in {settings.dead_letter.path}"


@dataclass
class _Selection:
    reason: str | None
    since: float | None

    def __call__(self, letter: Letter) -> bool:
        if self.reason is not None and letter.reason != self.reason:
            return False
        return self.since is None or letter.written_at() >= self.since


def _selection(reason: str | None, since: str | None) -> _Selection:
    try:
        return _Selection(reason, parse_since(since, time.time()) if since else None)
    except QueryError as error:
        raise click.BadParameter(str(error).removeprefix("since: "), param_hint="--since") from None


def _why_not(letter: Letter, replayed: dict[str, dict]) -> str | None:
    """Why a letter cannot be replayed, or None when it can."""
    if letter.key in replayed:
        return "replayed already"
    if letter.body.raw_encrypted is None:
        return "raw bytes not kept (dead_letter.keep_raw)"
    if letter.truncated:
        return "raw bytes truncated (dead_letter.max_raw_bytes)"
    return None


def _unusable_json(unusable: list[Unusable]) -> dict[str, Any]:
    return {"unusable": [{"where": u.where, "problem": u.problem} for u in unusable[:NAMED]],
            "unusable_total": len(unusable)}


def _print_unusable(console: Console, unusable: list[Unusable]) -> None:
    """The letters that could not be read, by where they lie, at most :data:`NAMED` of them."""
    if not unusable:
        return
    console.print(shown(f"{len(unusable)} letters unusable, skipped (fix or remove them; the others are unaffected):"))
    for entry in unusable[:NAMED]:
        console.print(shown(f"  {entry.where}: {entry.problem}"))
    if len(unusable) > NAMED:
        console.print(shown(f"  and {len(unusable) - NAMED} more"))


@click.group("dead-letters")
def dead_letters() -> None:
    """Rejected records: what was refused and why; feed them back once fixed."""


@dead_letters.command("list")
@click.option("--reason", help="Only letters with this reason (e.g. missing_field).")
@click.option("--since", help="Only letters written since then: 30m, 24h, 7d, an ISO-8601 time or Unix seconds.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="Letters at most, newest first.")
@FROM
@output_option("table", "json")
@click.pass_context
def list_letters(ctx: click.Context, reason: str | None, since: str | None, limit: int, where: str | None,
                 output: str) -> None:
    """The dead letters, newest first, each with its reason, detail, origin, its sender's privilege
    and whether it can be replayed (or was). Letters that cannot be read are named by file and line
    (or topic, partition and offset), and the command exits 1."""
    settings = settings_of(ctx)
    raw_keys = settings.dead_letter.raw_keys()
    read, read_where = _letters(settings, where)
    selection = _selection(reason, since)
    selected = [letter for letter in reversed(read.letters) if selection(letter)]
    replayed = replay_notes(settings.dead_letter.path)

    def replay(letter: Letter) -> str:
        why = _why_not(letter, replayed)
        if why is None and raw_keys is not None:
            try:
                open_raw(raw_keys, letter.body.raw_encrypted, letter.privilege)  # only those shown: --limit
            except UnreadableRaw as error:
                why = str(error)
        return why or "possible"

    listed = [{"time": letter.time, "source": letter.source, "reason": letter.reason, "detail": letter.detail,
              "origin": letter.origin, "size": letter.size, "privilege": letter.privilege.value,
              "where": letter.where, "replay": replay(letter),
              "replayed": replayed.get(letter.key, {}).get("outcome")} for letter in selected[:limit]]
    if output == "json":
        click.echo(json.dumps({"letters": listed, "total": len(selected), **_unusable_json(read.unusable)}))
    else:
        table = Table(title=shown(f"{len(listed)} of {len(selected)} dead letters {read_where}, newest first"))
        for column in ("time", "source", "reason", "detail", "origin", "privilege", "replay"):
            table.add_column(column)
        for letter in listed:
            replay_cell = letter["replay"] if letter["replayed"] is None else f"replayed: {letter['replayed']}"
            table.add_row(*(shown(cell) for cell in (
                letter["time"], letter["source"], letter["reason"], letter["detail"], json.dumps(letter["origin"]),
                letter["privilege"], replay_cell)))
        console = stdout()
        console.print(table)
        by_reason = Counter(letter.reason for letter in selected)
        console.print(shown("by reason: " + (", ".join(f"{r} {n}" for r, n in by_reason.most_common()) or "none")))
        _print_unusable(console, read.unusable)
    if read.unusable:
        ctx.exit(FOUND)


@dead_letters.command("replay")
@click.option("--reason", help="Only letters with this reason.")
@click.option("--since", help="Only letters written since then: 30m, 24h, 7d, an ISO-8601 time or Unix seconds.")
@click.option("--grant-catalog", is_flag=True,
              help="Replay with the catalog right (document and index events) the letters whose senders lacked "
                   "it, e.g. those refused not_permitted. Only for records you have checked: it is what the "
                   "catalog credential guards.")
@FROM
@output_option("table", "json")
@click.pass_context
def replay_letters(ctx: click.Context, reason: str | None, since: str | None, grant_catalog: bool,
                   where: str | None, output: str) -> None:
    """Feed the selected letters' records back through the pipeline, oldest first, each with the
    privilege its letter records (see --grant-catalog). Exit 1 when any was rejected again (it is a
    dead letter again, with its new reason) or could not be read."""
    settings = settings_of(ctx)
    path: Path = settings.dead_letter.path
    raw_keys = settings.dead_letter.raw_keys()
    selection = _selection(reason, since)
    replayed = replay_notes(path)
    chosen, skipped = [], Counter()
    read, _ = _letters(settings, where)
    for letter in read.letters:
        if not selection(letter):
            continue
        why = _why_not(letter, replayed)
        if why is None and raw_keys is None:
            why = "raw bytes cannot be read (dead_letter.keep_raw is off, so no key)"
        if why is None:
            chosen.append(letter)
        else:
            skipped[why] += 1
    unusable = list(read.unusable)
    result = replay_records(settings, chosen, raw_keys, grant_catalog=grant_catalog) if chosen else None
    if result is not None:
        unusable += result.unusable
    outcomes = result.outcomes if result is not None else Counter()
    granted = result.granted if result is not None else 0
    summary = {"replayed": sum(outcomes.values()), "accepted": outcomes["accepted"],
               "rejected_again": outcomes["rejected again"], "skipped": dict(skipped), "granted_catalog": granted,
               **_unusable_json(unusable)}
    if output == "json":
        click.echo(json.dumps(summary))
    else:
        console = stdout()
        if grant_catalog:
            console.print(shown(f"--grant-catalog: {granted} letters replayed with the catalog right, "
                               "which their senders lacked"))
        skipped_words = ", ".join(f"{n} {why}" for why, n in skipped.items()) or "none"
        console.print(shown(f"{summary['replayed']} letters replayed: {outcomes['accepted']} accepted, "
                           f"{outcomes['rejected again']} rejected again (dead letters again, with their new "
                           f"reason); skipped: {skipped_words}"))
        if result is not None and result.refused_catalog:
            console.print(shown(f"{result.refused_catalog} refused not_permitted: their senders lacked the catalog "
                               "right; once you have checked them, replay them with --grant-catalog"))
        _print_unusable(console, unusable)
    if outcomes["rejected again"] or unusable:
        ctx.exit(FOUND)
