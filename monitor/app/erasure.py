"""Erasure of one person's data on request (``ragmon erase``), in every store ragmon writes.

A person is named by their caller id, a conversation id, or both, as the application sent them.
Stored data names them by keyed pseudonym (``Redactor.pseudonymize_caller`` and
``pseudonymize_conversation``), so the ids are matched through the same keys (every key of the
caller keyring, ``redaction.previous_caller_keys`` too: rows stored before a rotation):

- **samples**: those whose trace's caller or conversation has the pseudonym, whatever their
  status, and the weekly-quota claims naming them;
- **conversation turns** kept for samples' histories: those of the caller's or the conversation's
  pseudonym, and every turn of a conversation the caller took part in;
- **findings**: those of the caller's pseudonym, and those of the erased samples' traces;
- **the regression set and the weekly batches**: the cases built from the erased samples (a case's
  id is its trace's shown id);
- **dead letters** in the dead-letter file and its rotated files: the letters whose redacted text,
  or whose raw bytes (with ``dead_letter.keep_raw``, decrypted with its key), hold the id as a JSON
  string. A refused record is not pseudonymised: its letter holds what the sender sent.

The dead-letter topic (with Kafka) cannot have single messages deleted: its retention bounds how long
a letter stays, and the report says it was not rewritten. Label Studio's copies of pushed tasks are
the operator's to delete there. Counts are printed and logged; the ids never are.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from ragmon.collectors.files import JsonlDeadLetterSink
from ragmon.collectors.letter_body import open_raw
from ragmon.collectors.letters import StoredLetter, privilege_named
from ragmon.monitor.config.settings import Settings
from ragmon.monitor.findings.store import FindingsStore
from ragmon.monitor.labeling.batch import erase_from_batches
from ragmon.monitor.labeling.labels import remove_cases
from ragmon.monitor.labeling.redact import Redactor
from ragmon.monitor.labeling.sample_store import SampleStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Erased:
    """What was deleted (or, in a dry run, would be), store by store."""

    samples: int
    conversation_turns: int
    findings: int
    regression_cases: int
    batch_cases: int
    dead_letters: int
    dead_letter_topic_untouched: bool  # letters on a Kafka topic cannot be deleted one by one

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


@dataclass(frozen=True)
class Person:
    """Whom to erase: a caller id, a conversation id, or both, as the application sent them."""

    caller: str | None = None
    conversation: str | None = None

    def __post_init__(self) -> None:
        if not (self.caller or self.conversation):
            raise ValueError("name a caller id or a conversation id to erase")


def erase(person: Person, settings: Settings, samples: SampleStore, findings: FindingsStore, redactor: Redactor,
          *, dry_run: bool = False) -> Erased:
    """Delete ``person``'s data from every store ``settings`` names (see the module docstring)."""
    # under every key of the caller keyring: rows stored before a rotation hold an older pseudonym
    callers = redactor.caller_candidates(person.caller) if person.caller else ()
    conversations = redactor.conversation_candidates(person.conversation) if person.conversation else ()
    trace_ids = samples.erase(callers, conversations, dry_run=dry_run)
    erased = Erased(
        samples=len(trace_ids),
        conversation_turns=samples.erase_turns(callers, conversations, dry_run=dry_run),
        findings=findings.erase(callers, trace_ids, dry_run=dry_run),
        regression_cases=remove_cases(settings.regression.cases, trace_ids, dry_run=dry_run),
        batch_cases=erase_from_batches(settings.scheduler.batch_dir, trace_ids, dry_run=dry_run),
        dead_letters=_erase_letters(person, settings, dry_run),
        dead_letter_topic_untouched=bool(settings.kafka.bootstrap_servers),
    )
    log.info("erasure%s: %s", " (dry run)" if dry_run else "", erased.as_dict())  # counts only, never the ids
    return erased


def _erase_letters(person: Person, settings: Settings, dry_run: bool) -> int:
    path = settings.dead_letter.path
    if not path.exists():
        return 0
    # an id as a JSON string: "u-1" matches the caller "u-1", never "u-12"
    needles = [json.dumps(value, ensure_ascii=False) for value in (person.caller, person.conversation) if value]
    raw_keys = settings.dead_letter.raw_keys()

    def holds_the_person(letter: StoredLetter) -> bool:
        if letter.text and any(needle in letter.text for needle in needles):
            return True
        if raw_keys is None or not letter.raw_encrypted:
            return False
        try:
            raw, _ = open_raw(raw_keys, letter.raw_encrypted, privilege_named(letter.privilege, "privilege"))
        except ValueError:
            return False  # not ours to open (another key, an edited letter): left as it is
        text = raw.decode("utf-8", "replace")
        return any(needle in text for needle in needles)

    sink = JsonlDeadLetterSink(path, settings.dead_letter.max_raw_bytes)
    try:
        return sink.erase(holds_the_person, dry_run=dry_run)
    finally:
        sink.shutdown()
