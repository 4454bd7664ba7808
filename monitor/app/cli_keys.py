"""``ragmon keys rotate``: after a key changed, re-seal what can be re-sealed and say which previous
keys are still needed (``monitor/app/key_rotation.py``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from ragmon.monitor.app.cli_context import existing_engine_of, settings_of
from ragmon.monitor.app.cli_output import output_option
from ragmon.monitor.app.key_rotation import KeyRows, Rotation, rotate
from ragmon.monitor.config.settings import ConfigError


@click.group()
def keys() -> None:
    """The caller key and the dead-letter encryption key, rotated (docs/deployment.md)."""


@keys.command("rotate")
@click.option("--dry-run", is_flag=True, help="Count what would be re-sealed; change nothing.")
@output_option("text", "json")
@click.pass_context
def rotate_command(ctx: click.Context, dry_run: bool, output: str) -> None:
    """Run after moving a key to `previous_caller_keys` or `previous_encryption_keys`: dead letters
    sealed under a previous encryption key are sealed again under the current one, and the stored
    rows are counted per caller key, saying which previous caller key no row needs any more (drop
    it from the configuration) and which are still needed (a pseudonym is an HMAC: it cannot be
    re-keyed; such rows keep their key until they age out). Counts only: no id is printed."""
    from ragmon.monitor.app.wiring import caller_key  # noqa: PLC0415 - the server's wiring, for its key only

    settings = settings_of(ctx)
    engine = existing_engine_of(settings)
    try:
        key = caller_key(settings)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    rotation = rotate(settings, engine, key, dry_run=dry_run)
    if output == "json":
        click.echo(json.dumps({"dry_run": dry_run, **rotation.as_dict()}))
        return
    for line in _words(rotation, dry_run):
        click.echo(line)


def _words(rotation: Rotation, dry_run: bool) -> list[str]:
    lines = []
    letters = rotation.letters
    if letters is None:
        lines.append("dead letters: raw bytes are not kept (dead_letter.keep_raw): nothing to re-seal")
    else:
        verb = "would re-seal" if dry_run else "re-sealed"
        lines.append(f"dead letters: {verb} {letters.resealed} under dead_letter.encryption_key; "
                     f"{letters.unopened} open under no configured key and are left as they are")
        if letters.topic_untouched:
            lines.append("the dead-letter topic is not rewritten: keep previous_encryption_keys until its retention "
                         "(retention.ms) has passed since the rotation")
        elif not letters.unopened and not dry_run:
            lines.append("no letter in the files needs dead_letter.previous_encryption_keys any more")
    lines.append("stored rows by the caller key that made their pseudonyms and keyed ids:")
    lines += [f"  {_count(key)}" for key in rotation.caller_keys]
    if rotation.unrecorded.total:
        lines.append(f"  {_count(rotation.unrecorded)}: made under a key of the ring, which one is not recorded; "
                     "every previous key stays needed until they age out")
    if rotation.foreign.total:
        lines.append(f"  {_count(rotation.foreign)}: no longer matched by id (their key was dropped)")
    droppable = rotation.droppable()
    for key in rotation.caller_keys[1:]:
        if key.setting in droppable:
            lines.append(f"{key.setting}: no stored row needs it: drop it from the configuration")
        elif key.total or rotation.unrecorded.total:
            lines.append(f"{key.setting}: still needed (pseudonyms cannot be re-keyed: keep it until these rows "
                         "age out or are erased)")
    return lines


def _count(key: KeyRows) -> str:
    tables = ", ".join(f"{table} {rows}" for table, rows in sorted(key.rows.items()) if rows)
    oldest = "" if key.oldest is None else \
        f", the oldest written {datetime.fromtimestamp(key.oldest, UTC).isoformat(timespec='seconds')}"
    return f"{key.setting}: {key.total} rows" + (f" ({tables}{oldest})" if key.total else "")
