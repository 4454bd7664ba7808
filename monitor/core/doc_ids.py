"""The join key: the one rule by which a document id, wherever it was written, becomes the id the
catalog knows the document by (docs/catalog.md, "The join rule").

A document reaches ragmon by two roads that never meet upstream: a source of the catalog names it
(a document or index event, a catalog source) and a passage names it (``doc_id`` on a native
passage, or the metadata key an OTLP span carries: LangChain's ``source``, LlamaIndex's
``file_path``). Both go through :func:`join_key` before anything compares them, so ``./hr/leave.md``
and ``hr/leave.md`` are one document. The rule is kept small on purpose, because an id that is not
a path (a Confluence page id, a URL) must come out as it went in:

1. an id holding ``://`` (a URL) is taken as it is;
2. a ``.`` segment that leads or sits inside is dropped (``./a`` -> ``a``, ``a/./b`` -> ``a/b``);
3. runs of ``/`` become one ``/``.

Nothing else changes: case, a leading ``/`` (an absolute path stays absolute), ``..`` segments,
backslashes and Unicode forms are kept. An id that would come out empty (``./``) is kept as it is.
"""

from __future__ import annotations


def join_key(doc_id: str) -> str:
    """``doc_id`` by the join rule of this module. Costs two substring tests for an id the rule
    leaves alone (the decoder calls it for every passage)."""
    if "./" not in doc_id and "//" not in doc_id:
        return doc_id
    if "://" in doc_id:
        return doc_id
    absolute = doc_id.startswith("/")
    segments = [segment for segment in doc_id.split("/") if segment not in ("", ".")]
    if not segments:
        return doc_id
    trailing = "/" if doc_id.endswith("/") else ""
    return ("/" if absolute else "") + "/".join(segments) + trailing
