"""Dead letters fed back through the pipeline (``ragmon dead-letters replay``): each record with
the privilege its letter records and no more, and a note of what became of each, so none is fed twice.

The note, ``<dead_letter.path>.replayed`` (0600) where the command runs, holds one JSON object a
line: the letter's ``key``, ``replayed_at`` (Unix seconds), the ``outcome`` (``accepted`` or
``rejected: <reason>``) and, for a record the operator granted the catalog right,
``"granted": "catalog"``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragmon.collectors.letter_body import UnreadableRaw, open_raw
from ragmon.collectors.letters import Letter, Unusable
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.core.errors import Reason
from ragmon.monitor.core.private_files import open_private
from ragmon.monitor.core.records import Privilege, RawRecord

BATCH = 500


def replay_log(letters_path: Path) -> Path:
    """The note of the letters replayed from ``letters_path`` (or the topic, beside that path)."""
    return letters_path.with_name(letters_path.name + ".replayed")


def replay_notes(letters_path: Path) -> dict[str, dict]:
    """The note's entries by letter key. A line that is not such an entry (a torn last line) is
    passed over: its letter counts as not replayed."""
    path = replay_log(letters_path)
    if not path.exists():
        return {}
    noted = {}
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            noted[entry["key"]] = entry
    return noted


@dataclass
class ReplayResult:
    """What became of the letters fed back: ``outcomes`` counts ``accepted`` and ``rejected again``;
    ``granted``: records fed with the catalog right their senders lacked; ``refused_catalog``:
    records refused ``not_permitted`` again; ``unusable``: letters whose raw bytes could not be read."""

    outcomes: Counter[str] = field(default_factory=Counter)
    granted: int = 0
    refused_catalog: int = 0
    unusable: list[Unusable] = field(default_factory=list)


def replay_records(settings: Settings, letters: Sequence[Letter], raw_keys: Sequence[bytes], *,
                   grant_catalog: bool = False) -> ReplayResult:
    """Feed the records of ``letters`` (oldest first, each replayable) through a pipeline built
    from ``settings``, in batches, and note each. A record has its letter's privilege; with
    ``grant_catalog``, one whose sender lacked the catalog right is given it for this pass (the new
    letter of a record refused again still records its sender's privilege). A letter whose raw
    bytes cannot be read is not fed: it is returned among ``unusable``, and the others go on."""
    from ragmon.monitor.app.wiring import build_runtime

    settings = settings.model_copy(update={  # no page for what is replayed: as `ragmon replay`
        "alerts": settings.alerts.model_copy(update={"alertmanager_url": None, "webhook_url": None})})
    result = ReplayResult()
    runtime = build_runtime(settings, command="replay")
    try:
        with os.fdopen(open_private(replay_log(settings.dead_letter.path)), "a") as log:
            for start in range(0, len(letters), BATCH):
                fed: list[tuple[Letter, bool]] = []
                records: list[RawRecord] = []
                for letter in letters[start:start + BATCH]:
                    try:
                        data, privilege = open_raw(raw_keys, letter.body.raw_encrypted or "", letter.privilege)
                    except UnreadableRaw as error:
                        result.unusable.append(Unusable(letter.where, str(error)))
                        continue
                    granted = grant_catalog and privilege is Privilege.INGEST
                    fed.append((letter, granted))
                    records.append(RawRecord("file", data, {"dead_letter": letter.key}, privilege=privilege,
                                             catalog_granted=granted))
                if records:
                    _note(log, fed, runtime.pipeline.process(records), result)
    finally:
        runtime.close()
    return result


def _note(log, fed: list[tuple[Letter, bool]], processed, result: ReplayResult) -> None:
    """Count and note what became of one batch (``processed``: its pipeline result)."""
    again = {rejection.position: rejection.reason for rejection in processed.rejections}
    for position, (letter, granted) in enumerate(fed):
        reason = again.get(position)
        result.outcomes["accepted" if reason is None else "rejected again"] += 1
        result.granted += granted
        result.refused_catalog += reason == Reason.NOT_PERMITTED.value
        note = {"key": letter.key, "replayed_at": time.time(),
                "outcome": "accepted" if reason is None else f"rejected: {reason}"}
        if granted:
            note["granted"] = "catalog"
        log.write(json.dumps(note) + "\n")
    log.flush()
