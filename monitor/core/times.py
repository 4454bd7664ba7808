"""Event times: the one reader every time of an event goes through (docs/events.md, "Times").

The native decoder (every ``time``, ``modified_at``, ``indexed_at`` and ``source_modified_at``) and
the OTLP span reader (the time fields of a document's metadata) both read by these rules, so a time
a source writes means the same wherever it arrives (the span reader has no zone: there a time
without an offset is of the wrong kind, named in the answer's ``partial_success``). Accepted:

- a number: Unix **seconds** below :data:`MILLISECONDS_FROM` (1e11, the year 5138 in seconds),
  Unix **milliseconds** from there up to :data:`TOO_LARGE` (1e14, the year 5138 in milliseconds).
  The two ranges cannot overlap for any time after 3 March 1973, and a time in seconds past 5138
  is refused as in the future anyway;
- an ISO 8601 / RFC 3339 string with an offset (``2026-12-01T10:00:00Z``,
  ``2026-12-01T10:00:00.123+01:00``, ``t`` and ``z`` in either case), as Python's
  :meth:`datetime.fromisoformat` reads it (so also ``+0100``, basic ``20261201T100000Z``);
- git's ``%ci`` / ``%ai`` form, ``2026-12-01 10:00:00 +0100``;
- a time or a date without an offset (``2026-12-01T10:00:00``, ``2026-12-01``: a date is its
  00:00), read in the configured zone (``events.time_zone``); without one it is refused, since
  guessing UTC would shift every such time by the sources' offset.

Anything else is refused with a :class:`BadTime` whose message names the accepted forms; the
caller adds the field's path. Messages never quote the value.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

MILLISECONDS_FROM = 1e11  # a number at or above this is Unix milliseconds
TOO_LARGE = 1e14  # no accepted unit reaches here before the year 5138
ACCEPTED = ("an ISO 8601 time with an offset (2026-12-01T10:00:00Z), git's %ci form (2026-12-01 10:00:00 +0100), "
            "a time or date without an offset once events.time_zone is set, Unix seconds, or Unix milliseconds "
            "(numbers from 1e11)")
_GIT = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) ([+-]\d{4})")
_CACHED_STRINGS = 4096  # the same time recurs in many passages (a document's indexed_at)


class BadTime(ValueError):
    """A value no accepted form reads; the message says why and names the forms."""


def read_seconds(value: object, zone: tzinfo | None = None) -> float:
    """``value`` as Unix seconds, by the forms above, ``zone`` deciding times without an offset
    (None: refused); raises :class:`BadTime`. :class:`TimeReader` is the same with a cache."""
    if value.__class__ is str:
        return _read_string(value, zone)  # type: ignore[arg-type]
    if value.__class__ is float or value.__class__ is int:
        return _number(value)  # type: ignore[arg-type]
    if isinstance(value, datetime):  # events built in code rather than decoded
        if value.tzinfo is None:
            raise BadTime("has no UTC offset")
        return value.timestamp()
    raise BadTime(f"must be a string or a number: {ACCEPTED}")


class TimeReader:
    """Reads event times as Unix seconds (float, UTC). ``zone``: an IANA name for times written
    without an offset (``events.time_zone``), or None to refuse them. Thread-safe."""

    def __init__(self, zone: str | None = None) -> None:
        self.zone = zone
        self._zone: tzinfo | None = ZoneInfo(zone) if zone else None
        # bound per reader (its zone decides naive times); lru_cache is thread-safe
        self._string = functools.lru_cache(maxsize=_CACHED_STRINGS)(self._read_string)

    def seconds(self, value: object) -> float:
        """``value`` as Unix seconds (:func:`read_seconds`); raises :class:`BadTime`. Range checks
        (before 1970, in the future) are the caller's: they depend on its clock and limits."""
        if value.__class__ is str:
            return self._string(value)
        return read_seconds(value)

    def _read_string(self, text: str) -> float:
        return _read_string(text, self._zone)


def _read_string(text: str, zone: tzinfo | None) -> float:
    git = _GIT.fullmatch(text)
    candidate = f"{git[1]}T{git[2]}{git[3]}" if git else text.upper()
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        raise BadTime(f"is not a time ragmon reads: {ACCEPTED}") from None
    if parsed.tzinfo is None:
        if zone is None:
            raise BadTime("has no UTC offset: add one (Z, +01:00), or set events.time_zone to the zone the "
                          f"source writes local times in; accepted: {ACCEPTED}")
        parsed = parsed.replace(tzinfo=zone)
    return parsed.timestamp()


def _number(value: float | int) -> float:
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        raise BadTime(f"is too large for Unix seconds or milliseconds: {ACCEPTED}") from None
    if not math.isfinite(seconds) or abs(seconds) >= TOO_LARGE:
        raise BadTime(f"is too large for Unix seconds or milliseconds: {ACCEPTED}")
    return seconds / 1000.0 if seconds >= MILLISECONDS_FROM else seconds
