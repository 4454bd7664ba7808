"""The one rule by which a value a sender chose is made safe to show as text: every character that
would steer a terminal, reorder what is shown around it, or hide itself is written as its escape.
The CLI prints through it (``monitor/app/cli_output.py``), and the OTLP receiver names the
instrumentation scopes and spans of a trace it cannot read through it (``collectors/unread``), so a
metric label or a log line never carries such a character either."""

from __future__ import annotations

import re

# Every C0 control (newline and tab too: a value is one cell, one line), DEL, every C1 control (CSI
# U+009B and OSC U+009D act like ESC sequences on many terminals), the Unicode bidirectional marks,
# embeddings, overrides and isolates (they reorder what is shown around them), the line and
# paragraph separators, and the invisible format characters (zero-width spaces and joiners, word
# joiner, byte-order mark, tag characters), with which two different ids would look the same.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff"
                     "\U000e0000-\U000e007f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(value: object) -> str:
    """``value`` as text a terminal shows and does not obey: each unsafe character becomes its
    escape as Python writes it (``\\x1b``, ``\\x9b``, ``\\n``, ``\\t``, ``\\u202e``); everything
    else is kept, a backslash too."""
    text = str(value)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text
