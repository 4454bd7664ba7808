"""Dead letters as they are stored, and as ``ragmon dead-letters list|replay`` reads them back.

A letter is written by ragmon, but what is read back may not be one: a line torn by a crash or
edited by hand, a message on the dead-letter topic that another producer sent. Reading checks each
letter against the shape ragmon writes; one that fails is :class:`Unusable`, named by where it
lies and what is wrong with it, and every other letter is read as if it were not there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec

from ragmon.collectors.letter_body import raw_problem
from ragmon.monitor.core.records import Privilege

NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class LetterBodyFields(msgspec.Struct, omit_defaults=True):
    """What :class:`~ragmon.collectors.letter_body.LetterBody` keeps of a record's bytes: the whole
    value of a message on the dead-letter topic. Other keys are ignored: the letter's own fields
    come from elsewhere (the Kafka record and its headers), never from the value."""

    raw_hmac: str | None = None
    raw_sha256: str | None = None
    text: str | None = None
    text_omitted: bool = False
    raw_encrypted: str | None = None


class StoredLetter(msgspec.Struct, omit_defaults=True):
    """One line of the dead-letter file. ``privilege`` is the sender's (:class:`Privilege`); a
    letter written before it was recorded has none, and counts as ``ingest``, the least."""

    time: str
    source: str
    reason: str
    detail: str
    origin: dict
    size: NonNegative
    truncated: bool
    privilege: str | None = None
    raw_hmac: str | None = None
    raw_sha256: str | None = None
    text: str | None = None
    text_omitted: bool = False
    raw_encrypted: str | None = None


class LetterProblem(ValueError):
    """What makes a letter unusable, in words that name a field and never quote its content."""


@dataclass(frozen=True, slots=True)
class Letter:
    """A dead letter read back. ``where`` names it for a person (``<file>:<line>``, or
    ``<topic>[<partition>]@<offset>``); ``key`` names it across reads (the ``.replayed`` note)."""

    where: str
    key: str
    time: str  # ISO 8601 with an offset
    source: str
    reason: str
    detail: str
    origin: dict[str, Any]
    size: int
    truncated: bool
    privilege: Privilege
    body: LetterBodyFields

    def written_at(self) -> float:
        """When the letter was written, in Unix seconds."""
        return datetime.fromisoformat(self.time).timestamp()


@dataclass(frozen=True, slots=True)
class Unusable:
    """A letter that could not be read: where it lies and what is wrong with it."""

    where: str
    problem: str


@dataclass(slots=True)
class LettersRead:
    """The letters read, oldest first, and those that could not be read, in the order met."""

    letters: list[Letter] = field(default_factory=list)
    unusable: list[Unusable] = field(default_factory=list)


def privilege_named(value: str | None, name: str) -> Privilege:
    """The privilege a letter records in ``value`` (``name`` says where it was read); none recorded
    is the least. Raises :class:`LetterProblem` for a value outside the closed set."""
    if value is None:
        return Privilege.INGEST
    try:
        return Privilege(value)
    except ValueError:
        raise LetterProblem(f"{name} is not one of {', '.join(Privilege)}") from None


def checked_time(value: str, name: str) -> str:
    """``value`` when it is an ISO-8601 time with an offset; raises :class:`LetterProblem`."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise LetterProblem(f"{name} is not an ISO-8601 time with an offset")
    return value


def checked_body(body: LetterBodyFields) -> LetterBodyFields:
    """``body`` when its raw bytes, if any, can be decrypted at all; raises :class:`LetterProblem`."""
    if body.raw_encrypted is not None and (problem := raw_problem(body.raw_encrypted)) is not None:
        raise LetterProblem(problem)
    return body


def decoded_object(data: bytes, prefix: str = "") -> Any:
    """``data`` decoded as a JSON object; raises :class:`LetterProblem` (its words after
    ``prefix``) when it is not JSON or not an object."""
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise LetterProblem(f"{prefix}not JSON ({error})") from None
    if not isinstance(value, dict):
        raise LetterProblem(f"{prefix}not a JSON object")
    return value


def file_letter(data: bytes, where: str) -> Letter:
    """The letter on one line of the dead-letter file; raises :class:`LetterProblem`."""
    try:
        stored = msgspec.convert(decoded_object(data), StoredLetter)
    except msgspec.ValidationError as error:
        raise LetterProblem(str(error)) from None
    body = checked_body(LetterBodyFields(raw_hmac=stored.raw_hmac, raw_sha256=stored.raw_sha256, text=stored.text,
                                         text_omitted=stored.text_omitted, raw_encrypted=stored.raw_encrypted))
    return Letter(
        where=where, key=f"{stored.time}|{stored.raw_hmac or stored.raw_sha256}",
        time=checked_time(stored.time, "`time`"), source=stored.source, reason=stored.reason, detail=stored.detail,
        origin=stored.origin, size=stored.size, truncated=stored.truncated,
        privilege=privilege_named(stored.privilege, "`privilege`"), body=body)


def dead_letter_files(path: Path) -> list[Path]:
    """The dead-letter file at ``path`` and its rotated files (``path.1``, ``path.2`` ...) that
    exist, newest first."""
    rotated = sorted((p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit()),
                     key=lambda p: int(p.suffix[1:]))
    return [*([path] if path.exists() else []), *rotated]


def read_letter_files(path: Path) -> LettersRead:
    """The letters of the dead-letter file at ``path`` and of its rotated files, oldest first,
    each line checked on its own (blank lines are skipped)."""
    read = LettersRead()
    for file in reversed(dead_letter_files(path)):
        with file.open("rb") as handle:
            for number, line in enumerate(handle, start=1):  # streamed: a file may be large
                if not line.strip():
                    continue
                where = f"{file}:{number}"
                try:
                    read.letters.append(file_letter(line, where))
                except LetterProblem as problem:
                    read.unusable.append(Unusable(where, str(problem)))
    return read
