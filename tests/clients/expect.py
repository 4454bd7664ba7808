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


@dataclass(frozen=True)
class ExpectedFinding:
    """A finding ``GET /api/v1/traces/{id}`` must list: the passages flagged at its stage (in the
    order they first appear there), their documents with the version each passage carried, and
    the rule in the words docs/alerts.md gives. ``caller`` in the words stands for the caller's
    principals as stored (``user:`` pseudonymised), filled in by the caller of :func:`findings`."""

    signal: str
    stage: str
    passage_ids: list[str]
    documents: list[tuple[str, str | None]]
    reason: str


def _listed(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def _leak_words(document: dict[str, Any], tenant: str, catalog: Catalog) -> str:
    known = catalog.documents.get(_document_of(document, catalog) or "")
    if known is not None and known.get("tenant", "default") != tenant:
        owner = known.get("tenant", "default")
        return f"the catalog puts the document in tenant {owner}; the caller is of tenant {tenant}"
    if known is not None and known.get("acl") is not None:
        return f"catalog ACL {_listed(sorted(known['acl']))} excludes the caller {{caller}}"
    acl = (document.get("metadata") or {}).get("acl")
    if isinstance(acl, str):
        acl = [p.strip() for p in acl.split(",") if p.strip()]
    return f"passage ACL {_listed(sorted(acl))} excludes the caller {{caller}}"


def _stale_words(document: dict[str, Any], index: str, catalog: Catalog) -> str:
    name = _document_of(document, catalog)
    served = (document.get("metadata") or {}).get("doc_version") or catalog.indexed.get((index, name))
    return f"version {served} was served; the catalog's current version is {catalog.documents[name]['version']}"


def findings(question: dict[str, Any], tenant: str, index: str, catalog: Catalog) -> list[ExpectedFinding]:
    """The permission-violation and stale-passage findings of a question, per stage: a passage
    is flagged by the rule of :func:`leaked` (:func:`stale`); the words are those of the stage's
    first flagged passage, followed by ``(and N other rule(s))`` when its flagged passages broke
    N other distinct rules."""
    allowed = principals(tenant, question.get("caller"))
    stages = {"candidates": [d for documents in question["lists"] for d in documents],
              "context": question["context"]}
    judges = {"permission_violation": (lambda d: leaked(d, tenant, allowed, catalog),
                                       lambda d: _leak_words(d, tenant, catalog)),
              "stale_passage": (lambda d: stale(d, index, catalog), lambda d: _stale_words(d, index, catalog))}
    out = []
    for signal, (flags, words) in judges.items():
        for stage, documents in stages.items():
            flagged = {passage_id(d)[0]: d for d in reversed(documents) if flags(d)}  # first copy wins
            ordered = sorted(flagged, key=[passage_id(d)[0] for d in documents].index)
            if not ordered:
                continue
            reasons = list(dict.fromkeys(words(flagged[p]) for p in ordered))
            reason = reasons[0] + (f" (and {len(reasons) - 1} other rule(s))" if len(reasons) > 1 else "")
            docs: list[tuple[str, str | None]] = []
            for p in ordered:
                version = (flagged[p].get("metadata") or {}).get("doc_version")
                entry = (_document_of(flagged[p], catalog), None if version is None else str(version))
                if entry[0] is not None and entry not in docs:
                    docs.append(entry)
            out.append(ExpectedFinding(signal, stage, ordered[:10], docs[:10], reason))
    return out
