"""What every detector is made of (monitor/labeling/redact.py puts them together).

A *rule* is a pattern that finds candidates and a *check* that looks at one candidate in its text
and returns the span to replace, or None to leave it: shapes find, checks decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

Check = Callable[[str, re.Match[str]], tuple[int, int] | None]

DIGIT = re.compile(r"[0-9]")


def clean_end(text: str, end: int, glue: str) -> bool:
    """The candidate ends at a boundary: not glued to a letter, digit or ``_`` on its right
    (``1.2.3.4rc1``, ``10.0.0.5_snapshot``), nor continued by a ``glue`` character and a digit (`.5`,
    `-7`). Each detector's look-behind refuses the same characters before a candidate, so a
    candidate refused here never makes its neighbour acceptable, or the reverse: what one pass
    leaves, the next leaves too."""
    if end >= len(text):
        return True
    char = text[end]
    if char.isalnum() or char == "_":
        return False
    return not (char in glue and end + 1 < len(text) and text[end + 1].isdigit())


def whole(text: str, m: re.Match[str], glue: str, group: int = 0) -> tuple[int, int] | None:
    return m.span(group) if clean_end(text, m.end(), glue) else None


def count_digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


class Rule(NamedTuple):
    """One way of finding one kind of data. ``needs``: what the text must contain for the pattern
    to be worth running, a substring or a cheap pattern (None: always run)."""

    detector: str
    placeholder: str
    pattern: re.Pattern[str]
    check: Check
    needs: str | re.Pattern[str] | None = None


def whole_match(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The match as it is, for patterns whose shape is the whole test."""
    return m.span()


def replace_all(text: str, pattern: re.Pattern[str], check: Check, placeholder: str, first: re.Match[str]) -> str:
    """``text`` with every candidate of ``pattern`` that ``check`` accepts replaced by
    ``placeholder``. ``first``: the pattern's first match in ``text`` (the redactor searched already,
    to skip the rules that find nothing)."""
    # Each replacement goes into the text before the search goes on, so that what follows sees its
    # neighbour as the placeholder (as a second pass would): "555-123-4567 555-987-6543" is two phones.
    m: re.Match[str] | None = first
    while m is not None:
        span = check(text, m)
        if span is None:
            at = max(m.end(), m.start() + 1)  # a match of nothing must not be found again (none built in can)
        else:
            text = text[: span[0]] + placeholder + text[span[1] :]
            at = span[0] + len(placeholder)
        m = pattern.search(text, at)
    return text
