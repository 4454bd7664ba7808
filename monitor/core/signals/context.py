"""What reached the model: duplicate slots, mixed embedding models, unsupported citations."""

from __future__ import annotations

from ragmon.monitor.core.model import Passage, TraceEvent


def duplicate_slots(context: list[Passage]) -> tuple[int, int]:
    """(slots repeating a passage id, slots holding another version of a document already present).

    Counted over the context as sent, positions kept: three copies of one passage are two
    duplicate slots.
    """
    seen: set[str] = set()
    versions: dict[str, set[str]] = {}
    same_passage = other_version = 0
    for passage in context:
        if passage.id in seen:
            same_passage += 1
            continue
        seen.add(passage.id)
        if passage.doc_id is None or passage.doc_version is None:
            continue
        present = versions.setdefault(passage.doc_id, set())
        if present and passage.doc_version not in present:
            other_version += 1
        present.add(passage.doc_version)
    return same_passage, other_version


def mixed_embeddings(context: list[Passage]) -> bool:
    """Context passages embedded by more than one model."""
    return len({p.embedding_model for p in context if p.embedding_model}) > 1


def unsupported_citations(trace: TraceEvent) -> int:
    """Distinct citations that are not among the context passage ids."""
    if trace.answer is None or not trace.answer.citations:
        return 0
    present = {p.id for p in trace.final_context()}
    return len(set(trace.answer.citations) - present)
