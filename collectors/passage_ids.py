"""Naming the passages that spans report without a usable id.

Frameworks differ in what they put on a retrieved document: LlamaIndex and Haystack give ids,
LangChain's OpenInference spans carry only content and metadata, DSPy's ``Retrieve`` only
content. A passage is named, in this order:

1. its own id (``document.id``, or the id a framework reported elsewhere on the span);
2. the first rule of ``passage_id_keys`` whose metadata keys are all present: a rule is one key
   (``chunk_id``) or several joined by ``+`` (``source+page``); the values are joined by ``#``,
   a list value's items by ``:`` (``doc_id+span`` gives ``leave#1200:1680``);
3. ``sha:`` and the BLAKE2b-128 hex digest of its UTF-8 content.

A passage with none of these cannot be named: the caller drops it from its list and counts it.
Its document id is the first of ``doc_id_keys`` present in the metadata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragmon.collectors.span_reading import RawDocument

DEFAULT_PASSAGE_ID_KEYS = ("id", "chunk_id", "doc_id+span", "doc_id+start_char_idx", "source+page",
                           "source+start_index")
DEFAULT_DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source", "file_path")

#: How a passage got its id, when it did not carry one: a label of ragmon_derived_passage_ids_total.
Derivation = Literal["metadata", "content_hash"]


def content_id(text: str) -> str:
    """The id of a passage known only by its content."""
    return "sha:" + hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


_NO_PART = (bool, dict)  # tuples made once: a union in isinstance is built anew at each call
_SEQUENCES = (list, tuple)


def _part(value: Any) -> str | None:
    if value is None or isinstance(value, _NO_PART):
        return None
    if isinstance(value, _SEQUENCES):
        return ":".join(str(v) for v in value) if value else None
    text = str(value)
    return text or None


@dataclass(frozen=True)
class PassageNamer:
    """Applies the key orders of the ``otlp`` config section."""

    passage_id_keys: Sequence[str] = DEFAULT_PASSAGE_ID_KEYS
    doc_id_keys: Sequence[str] = DEFAULT_DOC_ID_KEYS

    def passage_id(self, document: RawDocument) -> tuple[str | None, Derivation | None]:
        """The passage's id and how it was derived (None when it carried its own); (None, None)
        when nothing names it."""
        if document.id:  # the first rule: SpanMapper._passages applies it itself, before calling this
            return document.id, None
        metadata = document.metadata
        for rule in self.passage_id_keys:
            parts = [_part(metadata.get(key)) for key in rule.split("+")]
            if all(parts):
                return "#".join(parts), "metadata"  # type: ignore[arg-type]
        if document.content:
            return content_id(document.content), "content_hash"
        return None, None

    def doc_id(self, metadata: dict[str, Any]) -> str | None:
        for key in self.doc_id_keys:
            value = _part(metadata.get(key))
            if value:
                return value
        return None
