"""The documents spans report, in one shape whatever the dialect: :class:`RawDocument`, and the
checks of the passage fields a document's metadata may carry (each field of the wrong kind named in
the answer to the request that brought the span, never failing its trace). The dialects
(``ragmon.collectors.dialects``) build their documents with :func:`make_document`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmon.collectors.semconv import PASSAGE_FIELDS, finite_number, parse_json_text, scalar_text
from ragmon.monitor.core.acl import BadAcl, read_acl
from ragmon.monitor.core.times import BadTime, TimeReader


@dataclass(slots=True)
class RawDocument:
    """One document as a span reports it, before it is named as a passage. ``fields`` holds the
    passage fields of its metadata (:data:`PASSAGE_FIELDS`) in their native types."""

    id: str | None = None
    score: float | None = None
    content: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)


def _name(value: Any) -> str | None:
    if type(value) is str:
        return value or None
    if type(value) is int:
        return str(value)
    return None


def _span(value: Any) -> list[int] | None:
    if type(value) is list and len(value) == 2:  # as JSON metadata gives it: no copy, no generator
        start, end = value
        if type(start) is int and type(end) is int:
            return value if 0 <= start <= end else None
    if isinstance(value, str):
        value = parse_json_text(value)
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and 0 <= value[0] <= value[1]):
        return list(value)
    return None


def _principals(value: Any) -> list[str] | None:
    """An ACL, by the one rule of ``ragmon.monitor.core.acl`` (a string is a JSON array or a
    comma-separated list: stores such as Chroma keep only scalar metadata). A list of strings, as
    ragmon's emitter and most applications write it, is taken as it is."""
    if type(value) is list and set(map(type, value)) <= _STRINGS:
        return value
    if isinstance(value, tuple):
        value = list(value)
    try:
        return read_acl(value)
    except BadAcl:
        return None


_TIMES = TimeReader()  # without a zone; its cache of texts: a document's times recur in many passages


def _time(value: Any) -> float | None:
    """Unix seconds, by the one reader of event times (``ragmon.monitor.core.times``). Without a
    zone: a time without an offset is of the wrong kind here (``events.time_zone`` applies to the
    native events the decoder reads). A non-negative float is taken as it is."""
    if type(value) is float and 0 <= value < math.inf:
        return value
    if isinstance(value, bool):
        return None
    try:
        seconds = _TIMES.seconds(value)
    except BadTime:
        return None
    return seconds if seconds >= 0 else None


_FIELD_NAMES = frozenset(PASSAGE_FIELDS)
_STRINGS = frozenset((str,))
_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "doc_id": _name, "doc_version": _name, "embedding_model": _name, "span": _span, "acl": _principals,
    "indexed_at": _time, "source_modified_at": _time,
}


def passage_fields(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The passage fields (:data:`PASSAGE_FIELDS`) a document's metadata carries, in their native
    types, and the names of those present with a value of the wrong kind (left out, so that one
    odd field never fails the whole trace)."""
    fields: dict[str, Any] = {}
    wrong: list[str] = []
    if not metadata:
        return fields, wrong
    for key in metadata.keys() & _FIELD_NAMES:  # most documents carry few of them, or none
        value = metadata[key]
        if value is not None:
            clean = _FIELD_CHECKS[key](value)
            if clean is None:
                wrong.append(key)
            else:
                fields[key] = clean
    return fields, wrong


#: JSON metadata texts up to this length have their reading remembered (longer ones are read anew)
MAX_CACHED_METADATA_CHARS = 1024
CACHED_METADATA_TEXTS = 4096  # the readings remembered: a few MB at most


def _read_metadata_text(text: str) -> tuple[dict[str, Any] | None, dict[str, Any], tuple[str, ...]]:
    """A JSON metadata text's object (None when it is not one), its passage fields and the names
    of those of the wrong kind."""
    parsed = parse_json_text(text)
    if type(parsed) is not dict:
        return None, {}, ()
    fields, wrong = passage_fields(parsed)
    return parsed, fields, tuple(wrong)


# A document's metadata text recurs in every trace that retrieves it: the reading of a short one is
# remembered, and never changed (make_document hands out copies)
_read_short_metadata_text = functools.lru_cache(maxsize=CACHED_METADATA_TEXTS)(_read_metadata_text)


def make_document(id_: Any, score: Any, content: Any, metadata: Any, where: str, problems: list[tuple[str, str]],
                  metadata_attribute: str = "document.metadata") -> RawDocument:
    """One document from its parts; ``where`` names it in problems (``retrieval.documents.3.document``)."""
    number = finite_number(score) if score is not None else None
    if score is not None and number is None:
        problems.append(("document.score", f"`{where}.score` is not a finite number"))
    if type(metadata) is str:
        read = _read_short_metadata_text if len(metadata) <= MAX_CACHED_METADATA_CHARS else _read_metadata_text
        parsed, fields, wrong = read(metadata)
        if parsed is None:
            problems.append((metadata_attribute, f"`{where}.metadata` is not a JSON object"))
            metadata = {}
        else:
            # the document's own containers (a dialect may take a field out of its metadata); the
            # values inside are shared, and nothing changes them
            metadata, fields = parsed.copy(), fields.copy()
    else:
        metadata = metadata if type(metadata) is dict else {}
        fields, wrong = passage_fields(metadata)
    if wrong:
        problems.extend((metadata_attribute, f"`{where}.metadata`: `{name}` has a value of the wrong kind")
                        for name in wrong)
    return RawDocument(scalar_text(id_), number, content if isinstance(content, str) else None, metadata, fields)
