"""Names a sender chose, as a metric label, a log line and a stored digest show them: the
instrumentation scope's name and version, span names and attribute keys.

Each is shown as the redactor shows an id (``Redactor.shown_id``: itself when no detector fires,
else its redacted text and a keyed hash, so an e-mail address in a span name is never stored),
then made visible (a control or invisible character as its escape: a label or a log line cannot
steer a terminal) and bounded: a longer name keeps its first characters and a hash of the whole,
so two long names stay apart. Only the first :data:`MAX_INPUT_CHARS` characters of a name are
looked at: the detectors' work is bounded too.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable

from ragmon.monitor.core.visible import visible

MAX_INPUT_CHARS = 512  # of a name, read at all; names longer are told apart by these only
MAX_NAME_CHARS = 128  # of a name as shown
CUT_HASH_CHARS = 12  # hex digits of the hash ending a cut name
UNNAMED = "(unnamed)"  # a scope, span or key with an empty name
_POSITION = re.compile(r"(?<=\.)[0-9]+(?=\.|$)")  # the n of retrieval.documents.n.document.id


class ShownNames:
    """``name(raw)``: a name as shown; ``key(raw)``: an attribute key as shown, its positions
    written ``N`` (``retrieval.documents.N.document.id``: a span with a thousand documents has a
    handful of keys, not thousands). Remembers the last :data:`CACHE` names it showed."""

    CACHE = 4096

    def __init__(self, shown: Callable[[str], str]) -> None:
        """``shown``: ``Redactor.shown_id`` of the serving process."""
        self._shown = shown
        self.name = functools.lru_cache(maxsize=self.CACHE)(self._name)
        self.key = functools.lru_cache(maxsize=self.CACHE)(self._key)

    def _name(self, raw: str) -> str:
        if not raw:
            return UNNAMED
        text = visible(self._shown(raw[:MAX_INPUT_CHARS]))
        if len(text) <= MAX_NAME_CHARS and len(raw) <= MAX_INPUT_CHARS:
            return text
        whole = hashlib.blake2b(text.encode(), digest_size=CUT_HASH_CHARS // 2).hexdigest()
        return f"{text[:MAX_NAME_CHARS - CUT_HASH_CHARS - 2]}…#{whole}"

    def _key(self, raw: str) -> str:
        return self.name(_POSITION.sub("N", raw[:MAX_INPUT_CHARS]) if "." in raw else raw)
