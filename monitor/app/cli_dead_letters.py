"""``ragmon dead-letters list|replay`` (also ``ragmon dlq``): the records ragmon refused, and once
the sender or the config is fixed, the same records fed back through the pipeline.

Letters are read from the dead-letter file (``dead_letter.path`` and its rotated files) or, in
scaled mode, the dead-letter topic (``kafka.dead_letter_topic``, read whole without a consumer
group). Only a letter whose raw bytes were kept (``dead_letter.keep_raw``, encrypted) in full can
be replayed: the keyed hash and redacted text are not the record. Each replayed letter is noted
in ``<dead_letter.path>.replayed`` (0600) where the command runs, with what became of it, so it is
not replayed twice; a letter that fails again is written again by the pipeline (to the file or
the topic), with its new reason.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.kafka_dead_letter_reader import read_topic_letters
from ragmon.collectors.letter_body import decrypt_raw
from ragmon.monitor.app.cli_context import settings_of
from ragmon.monitor.app.cli_output import FOUND, output_option, stdout
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.core.records import RawRecord
from ragmon.monitor.findings.query import QueryError, parse_since

BATCH = 500


def replay_log(letters_path: Path) -> Path:
    return letters_path.with_name(letters_path.name + ".replayed")


def letter_key(letter: dict[str, Any]) -> str:
    """What names a letter across reads: its place on the topic, or for the file, when it was
    written and the (keyed) hash of its bytes."""
    if "at" in letter:
        return f"{letter['at']['topic']}:{letter['at']['partition']}:{letter['at']['offset']}"
    return f"{letter['time']}|{letter.get('raw_hmac') or letter.get('raw_sha256')}"


FROM = click.option("--from", "where", type=click.Choice(["file", "topic"]),
                    help="The dead-letter file (dead_letter.path) or topic (kafka.dead_letter_topic); "
                         "default: the topic when kafka.bootstrap_servers is set, else the file.")


def _letters(settings: Settings, where: str | None) -> tuple[list[dict[str, Any]], str]:
    """The letters, oldest first, and where they were read, in words."""
    if (where or ("topic" if settings.kafka.bootstrap_servers else "file")) == "topic":
        if not settings.kafka.bootstrap_servers:
            raise click.UsageError("--from topic needs kafka.bootstrap_servers (RAGMON_KAFKA__BOOTSTRAP_SERVERS)")
        topic = settings.kafka.dead_letter_topic
        letters = read_topic_letters(settings.kafka.client_options(), topic, settings.dead_letter.max_raw_bytes)
        return letters, f"on topic {topic}"
    return read_dead_letters(settings.dead_letter.path), f"in {settings.dead_letter.path}"


def _replayed(letters_path: Path) -> dict[str, dict]:
    path = replay_log(letters_path)
    if not path.exists():
        return {}
    noted = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn last line: that letter counts as not replayed
        noted[entry["key"]] = entry
    return noted


@dataclass
class _Selection:
    reason: str | None
    since: float | None

    def __call__(self, letter: dict[str, Any]) -> bool:
        if self.reason is not None and letter["reason"] != self.reason:
            return False
        return self.since is None or datetime.fromisoformat(letter["time"]).timestamp() >= self.since


def _selection(reason: str | None, since: str | None) -> _Selection:
    try:
        return _Selection(reason, parse_since(since, time.time()) if since else None)
    except QueryError as error:
        raise click.BadParameter(str(error).removeprefix("since: "), param_hint="--since") from None


def _why_not(letter: dict[str, Any], replayed: dict[str, dict]) -> str | None:
    """Why a letter cannot be replayed, or None when it can."""
    if letter_key(letter) in replayed:
        return "replayed already"
    if letter.get("raw_encrypted") is None:
        return "raw bytes not kept (dead_letter.keep_raw)"
    if letter.get("truncated"):
        return "raw bytes truncated (dead_letter.max_raw_bytes)"
    return None


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
    """The dead letters, newest first, each with its reason, detail, origin and whether it can be
    replayed (or was)."""
    settings = settings_of(ctx)
    path = settings.dead_letter.path
    letters, read_where = _letters(settings, where)
    selected = [letter for letter in reversed(letters) if _selection(reason, since)(letter)]
    replayed = _replayed(path)
    shown = [{"time": letter["time"], "source": letter["source"], "reason": letter["reason"],
              "detail": letter["detail"], "origin": letter["origin"], "size": letter["size"],
              "replay": _why_not(letter, replayed) or "possible",
              "replayed": replayed.get(letter_key(letter), {}).get("outcome")} for letter in selected[:limit]]
    if output == "json":
        click.echo(json.dumps({"letters": shown, "total": len(selected)}))
        return
    table = Table(title=Text(f"{len(shown)} of {len(selected)} dead letters {read_where}, newest first"))
    for column in ("time", "source", "reason", "detail", "origin", "replay"):
        table.add_column(column)
    for letter in shown:
        replay = letter["replay"] if letter["replayed"] is None else f"replayed: {letter['replayed']}"
        table.add_row(*(Text(str(cell)) for cell in (letter["time"], letter["source"], letter["reason"],
                                                     letter["detail"], json.dumps(letter["origin"]), replay)))
    console = stdout()
    console.print(table)
    by_reason = Counter(letter["reason"] for letter in selected)
    console.print(Text("by reason: " + (", ".join(f"{r} {n}" for r, n in by_reason.most_common()) or "none")))


@dead_letters.command("replay")
@click.option("--reason", help="Only letters with this reason.")
@click.option("--since", help="Only letters written since then: 30m, 24h, 7d, an ISO-8601 time or Unix seconds.")
@FROM
@output_option("table", "json")
@click.pass_context
def replay_letters(ctx: click.Context, reason: str | None, since: str | None, where: str | None, output: str) -> None:
    """Feed the selected letters' records back through the pipeline, oldest first. Exit 1 when
    any was rejected again (it is a dead letter again, with its new reason)."""
    from ragmon.monitor.app.wiring import build_runtime

    settings = settings_of(ctx)
    path = settings.dead_letter.path
    raw_key = settings.dead_letter.raw_key()
    selection = _selection(reason, since)
    replayed = _replayed(path)
    chosen, skipped = [], Counter()
    letters, _ = _letters(settings, where)
    for letter in letters:
        if not selection(letter):
            continue
        why = _why_not(letter, replayed)
        if why is None and raw_key is None:
            why = "raw bytes cannot be read (dead_letter.keep_raw is off, so no key)"
        if why is None:
            chosen.append(letter)
        else:
            skipped[why] += 1
    outcomes: Counter[str] = Counter()
    if chosen:
        settings = settings.model_copy(update={  # no page for what is replayed: as `ragmon replay`
            "alerts": settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})})
        runtime = build_runtime(settings, command="replay")
        try:
            with os.fdopen(open_private(replay_log(path)), "a") as log:
                for start in range(0, len(chosen), BATCH):
                    batch = chosen[start:start + BATCH]
                    records = [RawRecord("file", decrypt_raw(raw_key, letter["raw_encrypted"]),
                                         {"dead_letter": letter_key(letter)}) for letter in batch]
                    result = runtime.pipeline.process(records)
                    again = {rejection.position: rejection.reason for rejection in result.rejections}
                    for position, letter in enumerate(batch):
                        outcome = f"rejected: {again[position]}" if position in again else "accepted"
                        outcomes["rejected again" if position in again else "accepted"] += 1
                        log.write(json.dumps({"key": letter_key(letter), "replayed_at": time.time(),
                                              "outcome": outcome}) + "\n")
                    log.flush()
        finally:
            runtime.close()
    summary = {"replayed": len(chosen), "accepted": outcomes["accepted"], "rejected_again": outcomes["rejected again"],
               "skipped": dict(skipped)}
    if output == "json":
        click.echo(json.dumps(summary))
    else:
        skipped_words = ", ".join(f"{n} {why}" for why, n in skipped.items()) or "none"
        stdout().print(Text(f"{len(chosen)} letters replayed: {outcomes['accepted']} accepted, "
                            f"{outcomes['rejected again']} rejected again (dead letters again, with their new "
                            f"reason); skipped: {skipped_words}"))
    if outcomes["rejected again"]:
        ctx.exit(FOUND)
