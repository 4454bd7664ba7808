"""A finding in words, as every surface shows it (docs/signals.md, "Findings").

The words name ids by their shown id (:meth:`Redactor.shown_id`: the id itself, or its redacted
text and a keyed hash), principals as stored samples show them (``user:`` ones as pseudonyms, the
others through the detectors) and other names (versions) redacted. A list of principals is cut to
its first :data:`PRINCIPALS_IN_REASON` and a count of the rest, and the whole reason to
:data:`MAX_REASON_CHARS`: a caller with hundreds of long groups once made a reason of 255 KB on
every row, and every page of findings carried it. The whole lists are kept apart
(:meth:`Wording.full_lists`), bounded as well, for ``ragmon trace show --full``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragmon.monitor.core.signals.explain import Finding
from ragmon.monitor.core.signals.terms import content_words
from ragmon.monitor.labeling.redact import Redactor

PRINCIPALS_IN_REASON = 5  # of each list; the rest are counted
MAX_PRINCIPAL_CHARS = 80  # of one principal in the reason (a group may hold 256); whole in the full lists
MAX_REASON_CHARS = 1024
# The full lists of one finding, as JSON: a caller of 400 groups of 256 characters and an ACL beside
# it fit; past this, a list's last principals are counted, not kept.
MAX_FULL_LISTS_BYTES = 256 * 1024
ELLIPSIS = "…"
_LIST_FRAME = len(': {"values": [], "omitted": 00000000}, ')
_PLACEHOLDER = re.compile(r"\[[A-Z][A-Z0-9_]*\]")  # the redactor's typed placeholders, [EMAIL], [PERSON] ...

ShownLists = dict[str, list[str]]


class Wording:
    """Fills a finding's words and lists its principals, shown as every surface shows them."""

    def __init__(self, redactor: Redactor) -> None:
        """``redactor`` must hold the caller key (``user:`` principals become pseudonyms)."""
        self._redactor = redactor

    def shown_principals(self, finding: Finding) -> ShownLists:
        """Every list of the finding, each principal shown as stored samples show it. Made once
        per finding: :meth:`reason` and :meth:`full_lists` take it."""
        return {name: [self._redactor.principal(p) for p in principals]
                for name, principals in finding.principals.items()}

    def reason(self, finding: Finding, lists: ShownLists) -> str:
        """The rule in words: ids shown, terms redacted, each list cut to its first few principals
        and a count of the rest, and the whole at most :data:`MAX_REASON_CHARS` characters."""
        shown = {name: _brief(principals) for name, principals in lists.items()}
        shown.update((name, self._redactor.shown_id(value)) for name, value in finding.ids.items())
        shown.update((name, self._redactor.redact(value)) for name, value in finding.terms.items())
        shown.update((name, self._words(text, keep)) for name, (text, keep) in finding.words.items())
        return _cut(finding.reason.format(**shown), MAX_REASON_CHARS)

    def _words(self, text: str, keep: frozenset[str]) -> str:
        """The content terms of ``text`` among ``keep``, taken from the text once redacted whole (a
        word of an e-mail address or a name is never shown: the detectors see the text as it was
        written, and what they replace is gone), as a list cut like the principals'."""
        redacted = _PLACEHOLDER.sub(" ", self._redactor.redact(text))
        return _brief([word for word in content_words(redacted) if word in keep])

    @staticmethod
    def full_lists(lists: ShownLists) -> dict[str, dict[str, Any]]:
        """``{name: {"values": [...], "omitted": n}}``: every list whole while the lists together
        hold at most :data:`MAX_FULL_LISTS_BYTES` as JSON; past that, the principals left out
        are counted in ``omitted``."""
        # what the JSON holds besides the principals: each list's name, keys and count
        budget = MAX_FULL_LISTS_BYTES - sum(len(json.dumps(name).encode()) + _LIST_FRAME for name in lists) - 2
        out: dict[str, dict[str, Any]] = {}
        for name, principals in lists.items():
            kept: list[str] = []
            for principal in principals:
                size = len(json.dumps(principal).encode()) + 2  # the separator beside it
                if size > budget:
                    break
                budget -= size
                kept.append(principal)
            out[name] = {"values": kept, "omitted": len(principals) - len(kept)}
            if len(kept) < len(principals):
                budget = 0  # a list cut short: the lists after it are counted, not partly kept
        return out


def _brief(principals: list[str]) -> str:
    """``[a, b, c, d, e … and 7 more]``."""
    shown = ", ".join(_cut(p, MAX_PRINCIPAL_CHARS) for p in principals[:PRINCIPALS_IN_REASON])
    more = len(principals) - PRINCIPALS_IN_REASON
    return "[" + shown + (f" {ELLIPSIS} and {more} more" if more > 0 else "") + "]"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
