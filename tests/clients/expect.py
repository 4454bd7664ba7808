"""What ragmon must report for a client app's traces, computed from what the framework returned
and the documents and catalog the test made, by the rules of docs/events.md and docs/signals.md Nothing
here calls ragmon's code: it is the second, independent reading the comparison needs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

PASSAGE_ID_RULES = ("id", "chunk_id", "doc_id+span", "doc_id+start_char_idx", "source+page", "source+start_index")
DOC_ID_KEYS = ("doc_id", "document_id", "ref_doc_id", "source", "file_path")


def _part(value: Any) -> str | None:
    if value is None or value == "" or value == [] or isinstance(value, bool | dict):
        return None
    if isinstance(value, list | tuple):
        return ":".join(str(v) for v in value)
    return str(value)


def passage_id(document: dict[str, Any]) -> tuple[str, str | None]:
    """The id ragmon must give a document, and how it is derived (None: the framework's own)."""
    if document.get("id") not in (None, ""):
        return str(document["id"]), None
    metadata = document.get("metadata") or {}
    for rule in PASSAGE_ID_RULES:
        parts = [_part(metadata.get(key)) for key in rule.split("+")]
        if all(parts):
            return "#".join(parts), "metadata"
    return "sha:" + hashlib.blake2b(document["content"].encode(), digest_size=16).hexdigest(), "content_hash"


def doc_id(document: dict[str, Any]) -> str | None:
    metadata = document.get("metadata") or {}
    return next((str(metadata[k]) for k in DOC_ID_KEYS if _part(metadata.get(k))), None)


@dataclass
class Catalog:
    """The document events the test sent: newest version, ACL and tenant per document id, and
    the version each index last reported embedding."""

    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    indexed: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> Catalog:
        catalog = cls()
        for event in events:
            if event["type"] == "document":
                catalog.documents[event["doc_id"]] = event
            elif event["type"] == "index":
                catalog.indexed[(event["index"], event["doc_id"])] = event["version"]
        return catalog


@dataclass
class Expected:
    """Per trace: passage ids per list (in order), the context, and the judged sets."""

    lists: list[list[str]]
    context: list[str]
    leaked_candidates: set[str]
    leaked_context: set[str]
    stale_candidates: set[str]
    stale_context: set[str]
    unknown_acl: set[str]
    derived: dict[str, int]


def principals(tenant: str, caller: dict[str, Any] | None) -> set[str]:
    found = {f"tenant:{tenant}"}
    if caller:
        if caller.get("id"):
            found.add(f"user:{caller['id']}")
        found.update(f"group:{g}" for g in caller.get("groups", []))
    return found


def _document_of(document: dict[str, Any], catalog: Catalog) -> str | None:
    named = doc_id(document)
    if named is not None:
        return named
    own, _ = passage_id(document)
    return own if own in catalog.documents else None


def leaked(document: dict[str, Any], tenant: str, allowed: set[str], catalog: Catalog) -> bool | None:
    """True: the caller may not read it; False: may; None: no ACL is known (docs/signals.md: the catalog
    first, for it reflects revocations; another tenant's document is always a violation)."""
    known = catalog.documents.get(_document_of(document, catalog) or "")
    if known is not None:
        if known.get("tenant", "default") != tenant:
            return True
        if known.get("acl") is not None:
            return "*" not in known["acl"] and not allowed & set(known["acl"])
    acl = (document.get("metadata") or {}).get("acl")
    if acl is None:
        return None
    if isinstance(acl, str):  # stores with scalar metadata only (Chroma) keep a comma-separated list
        acl = [p.strip() for p in acl.split(",") if p.strip()]
    return "*" not in acl and not allowed & set(acl)


def stale(document: dict[str, Any], index: str, catalog: Catalog) -> bool:
    """The catalog knows a newer version than the one served (the passage's own ``doc_version``,
    else the one the index last embedded)."""
    name = _document_of(document, catalog)
    known = catalog.documents.get(name or "")
    if known is None:
        return False
    served = (document.get("metadata") or {}).get("doc_version") or catalog.indexed.get((index, name))
    return served is not None and str(served) != known["version"]


def expected(question: dict[str, Any], tenant: str, index: str, catalog: Catalog) -> Expected:
    """``question``: what the app reported — ``lists`` (the documents of each retrieval list, in
    order) and ``context`` (the documents the model was given), plus ``caller``."""
    allowed = principals(tenant, question.get("caller"))
    derived: dict[str, int] = {}
    lists = []
    for documents in question["lists"]:
        ids = []
        for document in documents:
            pid, how = passage_id(document)
            ids.append(pid)
            if how is not None:
                derived[how] = derived.get(how, 0) + 1
        lists.append(ids)
    context = [passage_id(d)[0] for d in question["context"]]
    candidates = [d for documents in question["lists"] for d in documents]
    verdicts = {passage_id(d)[0]: leaked(d, tenant, allowed, catalog) for d in [*candidates, *question["context"]]}
    staleness = {passage_id(d)[0]: stale(d, index, catalog) for d in [*candidates, *question["context"]]}
    candidate_ids = {passage_id(d)[0] for d in candidates}
    return Expected(
        lists=lists, context=context,
        leaked_candidates={p for p in candidate_ids if verdicts[p]},
        leaked_context={p for p in context if verdicts[p]},
        stale_candidates={p for p in candidate_ids if staleness[p]},
        stale_context={p for p in context if staleness[p]},
        unknown_acl={p for p, verdict in verdicts.items() if verdict is None},
        derived=derived,
    )
