"""``ragmon keys rotate``: what is left to do after a key changed, done where it can be, and said
where it cannot (docs/deployment.md, "Rotating secrets").

- **Dead letters** (``dead_letter.previous_encryption_keys``): a letter's raw bytes sealed under a
  previous key are opened and sealed again under ``dead_letter.encryption_key``, in the dead-letter
  file and its rotated files, under the lock the writers take. Afterwards no letter of the files
  needs a previous key (but those under no configured key, which stay as they are, and the letters
  on a Kafka dead-letter topic, which cannot be rewritten: its retention bounds them).
- **Caller pseudonyms and keyed shown ids** (``redaction.previous_caller_keys``): an HMAC of an id
  ragmon never stored cannot be re-keyed. The rows say which key made them (migration 0014), so
  they are counted per key of the ring: a previous key no row needs can be dropped from the
  configuration; one still needed stays until its rows age out (or are erased). Rows written before
  key ids were recorded count for every previous key; rows under a key not in the ring can no
  longer be matched by id.

Counts only: no id, pseudonym or key is printed or logged.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from sqlalchemy import Engine, text

from ragmon.collectors.files import JsonlDeadLetterSink
from ragmon.collectors.letter_body import UnreadableRaw, open_raw, seal_raw
from ragmon.collectors.letters import StoredLetter, privilege_named
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.labeling.keyring import key_id

log = logging.getLogger(__name__)

# the tables whose rows hold keyed ids, and the column that says when each row was last written
KEYED_TABLES = {"sample": "created_at", "sample_claim": "updated_at", "finding": "recorded_at",
                "unread_trace": "recorded_at", "conversation_turn": "recorded_at"}
UNRECORDED = ""  # the key id of a row written before 0014, or by code older than it


@dataclass(frozen=True)
class KeyRows:
    """The rows one key of the ring is needed by: how many per table, and the oldest one's time."""

    setting: str  # redaction.caller_key, redaction.previous_caller_keys[i]
    rows: dict[str, int] = field(default_factory=dict)
    oldest: float | None = None  # Unix seconds of the oldest such row

    @property
    def total(self) -> int:
        return sum(self.rows.values())


@dataclass(frozen=True)
class LettersResealed:
    """What happened to the dead-letter files' raw bytes."""

    resealed: int  # opened under a previous key, sealed again under the newest (or would be: dry run)
    unopened: int  # under no configured key, or altered: left as they are
    topic_untouched: bool  # letters on a Kafka topic cannot be rewritten


@dataclass(frozen=True)
class Rotation:
    """What ``keys rotate`` found and did."""

    caller_keys: list[KeyRows]  # the newest key first
    unrecorded: KeyRows  # rows of before key ids: any key of the ring may have made them
    foreign: KeyRows  # rows under a key the ring does not hold
    letters: LettersResealed | None  # None: raw bytes are not kept (dead_letter.keep_raw off)

    def droppable(self) -> list[str]:
        """The previous caller keys no row needs: safe to drop from the configuration."""
        if self.unrecorded.total:
            return []  # any previous key may have made those
        return [key.setting for key in self.caller_keys[1:] if not key.total]

    def as_dict(self) -> dict:
        return {"caller_keys": [_rows(key) for key in self.caller_keys], "unrecorded": _rows(self.unrecorded),
                "foreign": _rows(self.foreign), "droppable": self.droppable(),
                "letters": None if self.letters is None else asdict(self.letters)}


def _rows(key: KeyRows) -> dict:
    return {"setting": key.setting, "rows": key.total, "by_table": key.rows, "oldest": key.oldest}


def rotate(settings: Settings, engine: Engine, newest_caller_key: str, *, dry_run: bool = False) -> Rotation:
    """Re-seal the dead letters under the newest encryption key and count the rows each caller key
    is needed by (``newest_caller_key``: the key in use, ``wiring.caller_key``)."""
    letters = reseal_letters(settings, dry_run=dry_run)
    ring = [("redaction.caller_key", key_id(newest_caller_key))]
    ring += [(f"redaction.previous_caller_keys[{i}]", key_id(key.get_secret_value()))
             for i, key in enumerate(settings.redaction.previous_caller_keys)]
    counted = _rows_by_key(engine)
    keys, seen = [], set()
    for setting, ident in ring:
        keys.append(_key_rows(setting, counted.get(ident, {}) if ident not in seen else {}))
        seen.add(ident)
    others = {}
    for ident, tables in counted.items():
        if ident != UNRECORDED and ident not in seen:
            for table, (rows, oldest) in tables.items():
                total, first = others.get(table, (0, None))
                others[table] = (total + rows, oldest if first is None else min(first, oldest))
    rotation = Rotation(keys, _key_rows("rows of before key ids", counted.get(UNRECORDED, {})),
                        _key_rows("a key not in the ring", others), letters)
    log.info("keys rotate%s: %s", " (dry run)" if dry_run else "", rotation.as_dict())  # counts, never ids
    return rotation


def _key_rows(setting: str, tables: dict[str, tuple[int, float]]) -> KeyRows:
    oldest = [first for _, first in tables.values() if first is not None]
    return KeyRows(setting, {table: rows for table, (rows, _) in tables.items()}, min(oldest) if oldest else None)


def _rows_by_key(engine: Engine) -> dict[str, dict[str, tuple[int, float]]]:
    """{key id: {table: (rows, oldest row's time)}} over the tables with keyed ids."""
    counted: dict[str, dict[str, tuple[int, float]]] = {}
    with engine.connect() as connection:
        for table, when in KEYED_TABLES.items():  # names from the constant above, never from input
            for ident, rows, oldest in connection.execute(text(
                    f"SELECT caller_key_id, count(*), min({when}) FROM {table} GROUP BY caller_key_id")):  # noqa: S608
                counted.setdefault(ident, {})[table] = (rows, oldest)
    return counted


def reseal_letters(settings: Settings, *, dry_run: bool = False) -> LettersResealed | None:
    """Seal again under ``dead_letter.encryption_key`` the raw bytes of the letters in the
    dead-letter files that only a previous key opens; None when raw bytes are not kept."""
    keys = settings.dead_letter.raw_keys()
    if keys is None:
        return None
    newest, previous = keys[0], keys[1:]
    unopened = 0

    def resealed(letter: StoredLetter) -> StoredLetter | None:
        nonlocal unopened
        if not letter.raw_encrypted:
            return None
        try:
            recorded = privilege_named(letter.privilege, "privilege")
            open_raw(newest, letter.raw_encrypted, recorded)
            return None  # under the newest key already
        except UnreadableRaw:
            pass
        except ValueError:  # a privilege no sender has: an edited letter, left as it is
            unopened += 1
            return None
        try:
            raw, privilege = open_raw(previous, letter.raw_encrypted, recorded)
        except UnreadableRaw:
            unopened += 1
            return None
        # sealed with the privilege it opens with: a letter of before privileges were sealed
        # (opened as ``ingest``, the least) keeps replaying as ``ingest``, whatever it records
        letter.raw_encrypted = seal_raw(newest, raw, privilege)
        letter.privilege = privilege.value
        return letter

    count = 0
    if settings.dead_letter.path.exists():
        sink = JsonlDeadLetterSink(settings.dead_letter.path, settings.dead_letter.max_raw_bytes)
        try:
            count = sink.rewrite(resealed, dry_run=dry_run)
        finally:
            sink.shutdown()
    return LettersResealed(count, unopened, bool(settings.kafka.bootstrap_servers))
