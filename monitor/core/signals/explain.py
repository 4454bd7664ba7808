"""Findings in words: for a trace whose signals fired, which passages broke which rule.

The signals count; an on-call engineer paged by a count needs the trace, the passages, the
documents and the rule. :func:`explain_trace` and :func:`explain_feedback` give one
:class:`Finding` per signal (and stage) that fired, computed right after the signals against the
same catalog, and only for traces where something fired, so the common trace costs nothing.

A finding holds ids (passages, documents, versions, traces) and the rule in words. Its words are a
template of ours: every string a sender chose (principals, tenants, versions) is a named term,
filled in by the findings sink as every surface shows it (ids by their shown id, principals as
stored samples show them, other names redacted), so no caller id, query or passage text is ever
written into one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import FeedbackEvent, Passage, TraceEvent
from ragmon.monitor.core.signals.access import Access, access_judge, caller_principals
from ragmon.monitor.core.signals.freshness import Freshness, staleness
from ragmon.monitor.core.signals.results import (
    MAX_IDS,
    Coverage,
    FeedbackSignals,
    Outcome,
    RetrievalFinding,
    TraceRef,
    TraceSignals,
    Unjudged,
)


class FindingSignal(StrEnum):
    """The signals a finding names (the ``signal`` of ``GET /api/v1/findings``)."""

    PERMISSION_VIOLATION = "permission_violation"
    STALE_PASSAGE = "stale_passage"
    UNSUPPORTED_CITATION = "unsupported_citation"
    MIXED_EMBEDDING = "mixed_embedding"
    DUPLICATE_SLOT = "duplicate_slot"
    LOW_SCORE = "low_score"
    ABSTAINED = "abstained"
    EMPTY_CONTEXT = "empty_context"
    REPHRASED = "rephrased"
    NEGATIVE_FEEDBACK = "negative_feedback"
    NOT_JUDGED = "not_judged"  # passages the access or freshness check could not judge, and why
    LOST_IN_REWRITE = "lost_in_rewrite"  # a follow-up searched a query sharing no term with the conversation
    EMPTY_REWRITE = "empty_rewrite"  # a retrieval searched a rewrite holding no word
    HISTORY_REWRITE = "history_rewrite"  # a retrieval searched the earlier turns word for word


@dataclass(slots=True)
class Finding:
    """One rule that fired on one trace, before redaction.

    ``reason`` is a :meth:`str.format` template of ours; its ``{name}`` fields are filled from
    ``principals`` (lists shown as ``[a, b]``: principals, and other names a sender chose such as
    embedding models; ``user:`` ones become pseudonyms; the sink shows the first few of a long
    list and counts the rest), ``ids`` (ids a sender chose: a tenant, a trace id, a retriever name,
    shown by their shown id), ``terms`` (other strings a sender chose, such as versions) and
    ``words`` (name: (a sender's text, the case-folded content terms of it to name), shown as the
    content terms of the text once redacted that are among them: the words a rewrite dropped).
    ``stage``: ``candidates`` (any retrieval list) or ``context`` for the passage-level signals,
    else None. ``documents``: (doc id, version or None), at most :data:`MAX_IDS`, like
    ``passage_ids``. ``trace``: the trace the finding is about; for a rephrase and for feedback
    that is an earlier trace than the event that revealed it."""

    signal: FindingSignal
    trace: TraceRef
    reason: str
    stage: str | None = None
    passage_ids: list[str] = field(default_factory=list)
    documents: list[tuple[str, str | None]] = field(default_factory=list)
    principals: dict[str, list[str]] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    terms: dict[str, str] = field(default_factory=dict)
    words: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)


class Why(NamedTuple):
    """Why a rule flags a passage: the words and the named terms that fill them (see :class:`Finding`)."""

    words: str
    principals: dict[str, list[str]] = {}
    ids: dict[str, str] = {}
    terms: dict[str, str] = {}


def fired(signals: TraceSignals) -> bool:
    """Whether any signal :func:`explain_trace` explains fired on the trace, or a served passage
    could not be judged."""
    return bool(signals.access.candidates or signals.access.context or signals.stale.candidates
                or signals.stale.context or signals.unsupported_citations or signals.mixed_embeddings
                or signals.duplicate_passages or signals.duplicate_doc_versions or signals.low_score
                or signals.outcome in (Outcome.ABSTAINED, Outcome.EMPTY_CONTEXT) or signals.rephrase_of is not None
                or signals.access.coverage.served_unjudged or signals.stale.coverage.served_unjudged)


def explain_trace(trace: TraceEvent, signals: TraceSignals, catalog: Catalog) -> list[Finding]:
    """The findings of a trace, from its signals, against the catalog they were judged by."""
    if not fired(signals):
        return []
    ref = TraceRef(trace.trace_id, trace.tenant, trace.index.name, trace.time)
    findings: list[Finding] = []
    if signals.access.candidates or signals.access.context:
        findings += by_stage(FindingSignal.PERMISSION_VIOLATION, ref, trace, _access_rule(trace, catalog),
                              catalog.document_of)
    if signals.stale.candidates or signals.stale.context:
        findings += by_stage(FindingSignal.STALE_PASSAGE, ref, trace, _stale_rule(trace, catalog),
                              catalog.document_of)
    context = trace.final_context()
    if signals.unsupported_citations:
        present = {p.id for p in context}
        missing = sorted(set(trace.answer.citations or []) - present) if trace.answer is not None else []
        findings.append(Finding(FindingSignal.UNSUPPORTED_CITATION, ref,
                                f"the answer cites {len(missing)} passage(s) that are not in the context",
                                stage="context", passage_ids=missing[:MAX_IDS]))
    if signals.mixed_embeddings:
        models = sorted({p.embedding_model for p in context if p.embedding_model})
        findings.append(Finding(FindingSignal.MIXED_EMBEDDING, ref, "the context mixes embedding models {models}",
                                stage="context", principals={"models": models},
                                passage_ids=[p.id for p in context if p.embedding_model][:MAX_IDS],
                                documents=_documents(p for p in context if p.embedding_model)))
    if signals.duplicate_passages or signals.duplicate_doc_versions:
        findings.append(_duplicates(ref, context, signals))
    for retrieval in signals.retrievals:
        if retrieval.low:
            findings.append(Finding(FindingSignal.LOW_SCORE, ref,
                                    f"top score {retrieval.top_score:.4g} of retriever {{retriever}} is below "
                                    f"{_limit_words(retrieval)}", ids={"retriever": retrieval.retriever}))
    if signals.outcome is Outcome.ABSTAINED:
        words = ("the application marked the answer as abstained" if trace.answer is not None and trace.answer.abstained
                 else "the answer matches a configured refusal pattern")
        findings.append(Finding(FindingSignal.ABSTAINED, ref, words))
    elif signals.outcome is Outcome.EMPTY_CONTEXT:
        findings.append(Finding(FindingSignal.EMPTY_CONTEXT, ref, "no passage reached the model"))
    if signals.rephrase_of is not None:
        earlier = signals.rephrase_of
        findings.append(Finding(FindingSignal.REPHRASED, earlier,
                                f"the caller asked again {max(0.0, trace.time - earlier.time):.0f} s later, "
                                "in trace {later}", ids={"later": trace.trace_id}))
    if signals.access.coverage.served_unjudged or signals.stale.coverage.served_unjudged:
        findings.append(not_judged(ref, signals.access.coverage, signals.stale.coverage))
    return findings


# what a reason means, in the words of a finding (docs/signals.md, "Coverage")
UNJUDGED_WORDS = {
    Unjudged.UNKNOWN_DOCUMENT: "of documents the catalog does not know",
    Unjudged.NO_ACL: "whose document has no ACL in the catalog nor on the passage",
    Unjudged.NO_VERSION: "whose served version is known neither from the passage nor from its index",
}


def not_judged(ref: TraceRef, access: Coverage, freshness: Coverage) -> Finding:
    """The passages of a trace that a check could not judge, in words: a zero of that check on
    this trace is not a clean result. Passage ids and documents: the first :data:`MAX_IDS`, those
    the model saw first."""
    parts = []
    for check, coverage in (("access", access), ("freshness", freshness)):
        if coverage.served_unjudged:
            why = ", ".join(f"{coverage.reasons[reason]} {UNJUDGED_WORDS[reason]}" for reason in Unjudged
                            if reason in coverage.reasons)
            parts.append(f"{check} of {coverage.served_unjudged} passage(s) ({why})")
    passages: dict[str, str | None] = {}
    for pid, doc_id, _ in access.examples + freshness.examples:
        if pid not in passages and len(passages) < MAX_IDS:
            passages[pid] = doc_id
    documents = list(dict.fromkeys((doc_id, None) for doc_id in passages.values() if doc_id is not None))
    return Finding(FindingSignal.NOT_JUDGED, ref, "not judged: " + "; ".join(parts), passage_ids=list(passages),
                   documents=documents[:MAX_IDS])


def explain_feedback(event: FeedbackEvent, signals: FeedbackSignals) -> list[Finding]:
    """A thumb down or an escalation, as a finding of the trace it is about (tenant and index
    empty when that trace is no longer remembered)."""
    if not (event.kind == "escalation" or (event.kind == "thumb" and event.value == "down")):
        return []
    ref = signals.trace or TraceRef(event.trace_id, "", "", event.time or 0.0)
    words = "the caller escalated" if event.kind == "escalation" else "the caller gave a thumb down"
    return [Finding(FindingSignal.NEGATIVE_FEEDBACK, ref, words)]


# --- the rules, passage by passage --------------------------------------------------------------

Rule = Callable[[Passage], Why | None]


def _access_rule(trace: TraceEvent, catalog: Catalog) -> Rule:
    """Why a passage may not be read by the caller, in the words of the rule ``access_judge``
    applied (the catalog's tenant and ACL first, the passage's own ACL when the catalog has no say)."""
    judge = access_judge(trace, catalog)
    caller = sorted(caller_principals(trace))

    def why(passage: Passage):
        access = judge(passage)
        if not access.violation:
            return None
        if access is Access.PASSAGE_EXCLUDES:
            return Why("passage ACL {acl} excludes the caller {caller}",
                       {"acl": sorted(passage.acl or ()), "caller": caller})
        # OTHER_TENANT and CATALOG_EXCLUDES are verdicts on a document the catalog knows
        document = catalog.document(catalog.document_of(passage) or "")
        if access is Access.OTHER_TENANT:
            return Why("the catalog puts the document in tenant {owner}; the caller is of tenant {tenant}",
                       ids={"owner": document.tenant if document else "", "tenant": trace.tenant})
        acl = sorted(document.acl or ()) if document else []
        return Why("catalog ACL {acl} excludes the caller {caller}", {"acl": acl, "caller": caller})

    return why


def _stale_rule(trace: TraceEvent, catalog: Catalog) -> Rule:
    """Why a passage is stale, in the words of what :func:`staleness` decided by."""
    index = trace.index.name

    def why(passage: Passage):
        freshness, served = staleness(passage, catalog, index)
        if freshness is Freshness.OUTDATED:
            current = catalog.document(catalog.document_of(passage) or "")  # known: the catalog decided
            return Why("version {served} was served; the catalog's current version is {current}",
                       terms={"served": served or "", "current": current.version if current else ""})
        if freshness is Freshness.DELETED:
            return Why("the catalog records the document as deleted")
        if freshness is Freshness.SOURCE_CHANGED:
            return Why("the source changed after the passage was indexed")
        return None

    return why


def by_stage(signal: FindingSignal, ref: TraceRef, trace: TraceEvent, rule: Rule,
              document_of: Callable[[Passage], str | None]) -> list[Finding]:
    """One finding per stage (candidates, context) with the passages ``rule`` flags there. As in
    ``flag_passages``, a passage id is flagged when any of its copies is, at every stage it appears
    in. The words are those of the first flagged passage, and say how many other rules fired too."""
    # without an explicit context, the last retrieval list is what reached the model
    stages = {"candidates": [p for r in trace.retrievals for p in r.passages], "context": trace.final_context()}
    why: dict[str, Why] = {}
    reason_of: dict[str, tuple] = {}  # the words as one comparable value, made once per passage id
    for passages in stages.values():
        for passage in passages:
            if passage.id not in why and (found := rule(passage)) is not None:
                why[passage.id], reason_of[passage.id] = found, _hashable(found)
    findings = []
    for stage, passages in stages.items():
        flagged = list({p.id: p for p in passages if p.id in why}.values())
        if not flagged:
            continue
        reasons = list(dict.fromkeys(reason_of[p.id] for p in flagged))
        first = why[flagged[0].id]
        words = first.words
        if len(reasons) > 1:
            words += f" (and {len(reasons) - 1} other rule(s))"
        findings.append(Finding(signal, ref, words, stage=stage, passage_ids=[p.id for p in flagged][:MAX_IDS],
                                documents=_documents(flagged, document_of), principals=first.principals,
                                ids=first.ids, terms=first.terms))
    return findings


def _hashable(reason: Why) -> tuple:
    return (reason.words, tuple((k, tuple(v)) for k, v in reason.principals.items()), tuple(reason.ids.items()),
            tuple(reason.terms.items()))


def _duplicates(ref: TraceRef, context: list[Passage], signals: TraceSignals) -> Finding:
    seen: set[str] = set()
    repeated: list[Passage] = []
    for passage in context:
        if passage.id in seen:
            repeated.append(passage)
        seen.add(passage.id)
    versions: dict[str, set[str]] = {}
    for passage in context:
        if passage.doc_id is not None and passage.doc_version is not None:
            versions.setdefault(passage.doc_id, set()).add(passage.doc_version)
    mixed = [p for p in context if p.doc_id is not None and len(versions.get(p.doc_id, ())) > 1]
    return Finding(FindingSignal.DUPLICATE_SLOT, ref,
                   f"{signals.duplicate_passages} context slot(s) repeat a passage, "
                   f"{signals.duplicate_doc_versions} hold another version of a document already there",
                   stage="context", passage_ids=list(dict.fromkeys(p.id for p in repeated + mixed))[:MAX_IDS],
                   documents=_documents(repeated + mixed))


def _documents(passages, document_of: Callable[[Passage], str | None] = lambda p: p.doc_id
               ) -> list[tuple[str, str | None]]:
    """(doc id, version) of the passages, distinct, in order, at most :data:`MAX_IDS`."""
    out: list[tuple[str, str | None]] = []
    for passage in passages:
        doc_id = document_of(passage)
        if doc_id is not None and (doc_id, passage.doc_version) not in out and len(out) < MAX_IDS:
            out.append((doc_id, passage.doc_version))
    return out


def _limit_words(retrieval: RetrievalFinding) -> str:
    if retrieval.limit is None:
        return "its limit"
    if retrieval.configured:
        return f"the threshold configured for it, {retrieval.limit:.4g}"
    return f"the trailing low percentile of its index and retriever, {retrieval.limit:.4g}"
