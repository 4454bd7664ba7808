"""Retrieval evaluation against the labeled regression set (docs/sampling.md): recall, precision, hit,
reciprocal rank and nDCG at k, unanswerable cases scored apart, claim evidence availability.

Relevance survives re-chunking: a retrieved item matches a labeled unit when the document ids are
equal, the versions are equal where both sides have one, and the character spans overlap where
both sides have one. Each labeled unit (grade >= 1) earns credit once, at the first position
within k that matches it; repeats earn nothing more. Gains are 2^grade - 1, discounts log2(i + 1),
and the ideal ranking takes all labeled units by grade, cut at k.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec

from ragmon.monitor.core.model import MAX_TURN

METRICS = ("recall", "precision", "hit", "mrr", "ndcg")


class LabeledUnit(msgspec.Struct, omit_defaults=True):
    doc_id: str
    grade: int = 1
    doc_version: str | None = None
    span: tuple[int, int] | None = None


class Claim(msgspec.Struct, omit_defaults=True):
    text: str
    evidence: list[str] = []  # document ids (or chunk ids) that support the claim


class Origin(msgspec.Struct, omit_defaults=True):
    trace_id: str | None = None  # the production trace the case was sampled from
    week: str | None = None


class EarlierTurn(msgspec.Struct, omit_defaults=True):
    """A turn before the one asked, as the user and the system had it (docs/evaluation.md)."""

    message: str
    answer: str | None = None
    searched: list[str] = []  # what its retrievers searched, where not the message itself


class Case(msgspec.Struct, omit_defaults=True):
    """One labeled question. Unknown fields (reference answer, tenant, corpus...) are kept by the
    dataset but ignored here. A case from a follow-up turn carries the turns before it
    (``history``, oldest first) and its ``turn`` (1 for the first); ``searched`` is what the
    system that was labeled searched for it."""

    id: str
    question: str = ""
    expected: Literal["answer", "abstain"] = "answer"
    relevant: list[LabeledUnit] = []
    claims: list[Claim] = []
    split: str = "dev"
    tags: list[str] = []
    origin: Origin | None = None
    history: list[EarlierTurn] = []
    turn: Annotated[int, msgspec.Meta(ge=1, le=MAX_TURN)] | None = None
    searched: list[str] = []

    @property
    def follow_up(self) -> bool:
        """Asked after earlier turns of its conversation: it has a history, or a turn above 1."""
        return bool(self.history) or (self.turn is not None and self.turn > 1)


class RetrievedItem(msgspec.Struct, omit_defaults=True):
    id: str
    doc_id: str | None = None
    doc_version: str | None = None
    span: tuple[int, int] | None = None

    @property
    def document(self) -> str:
        return self.doc_id if self.doc_id is not None else self.id


class RunEntry(msgspec.Struct, omit_defaults=True):
    """What a system retrieved for one case. ``history``: the earlier turns it was given with the
    question (None: the run does not say); ``searched``: what it searched, where it rewrote."""

    case_id: str
    retrieved: list[RetrievedItem] = []
    abstained: bool = False
    history: list[EarlierTurn] | None = None
    searched: list[str] = []


def matches(item: RetrievedItem, unit: LabeledUnit) -> bool:
    if item.document != unit.doc_id:
        return False
    if item.doc_version is not None and unit.doc_version is not None and item.doc_version != unit.doc_version:
        return False
    if item.span is not None and unit.span is not None:
        return item.span[0] < unit.span[1] and unit.span[0] < item.span[1]
    return True


def credits(retrieved: Sequence[RetrievedItem], units: Sequence[LabeledUnit], k: int) -> list[tuple[int, int]]:
    """(position from 1, grade) for each unit credited within ``k``; ``units`` are the relevant ones
    (grade >= 1), as :func:`case_metrics` gives them."""
    out = []
    for unit in units:
        for position, item in enumerate(retrieved[:k], start=1):
            if matches(item, unit):
                out.append((position, unit.grade))
                break
    return out


def gain(grade: int) -> float:
    return 2.0**grade - 1.0


def case_metrics(retrieved: Sequence[RetrievedItem], units: Sequence[LabeledUnit], k: int) -> dict[str, float]:
    """The five metrics at ``k`` for one answerable case (at least one unit with grade >= 1)."""
    relevant = [u for u in units if u.grade >= 1]
    credited = credits(retrieved, relevant, k)
    dcg = sum(gain(grade) / math.log2(position + 1) for position, grade in credited)
    ideal = sorted((u.grade for u in relevant), reverse=True)[:k]
    idcg = sum(gain(grade) / math.log2(i + 2) for i, grade in enumerate(ideal))
    first = min((position for position, _ in credited), default=None)
    return {
        "recall": len(credited) / len(relevant),
        "precision": len(credited) / k,
        "hit": 1.0 if credited else 0.0,
        "mrr": 1.0 / first if first is not None else 0.0,
        "ndcg": dcg / idcg,  # idcg > 0: a unit of grade >= 1 and k >= 1, which recall and precision divide by
    }


def claim_support(retrieved: Sequence[RetrievedItem], claims: Sequence[Claim], k: int) -> tuple[int, int]:
    """(claims whose every evidence id was retrieved within k, claims with evidence)."""
    present = {item.document for item in retrieved[:k]} | {item.id for item in retrieved[:k]}
    scored = [c for c in claims if c.evidence]
    return sum(1 for c in scored if all(e in present for e in c.evidence)), len(scored)


@dataclass
class GroupScore:
    """Metrics of a group of cases (all, one split, one tag)."""

    answerable: int = 0
    unanswerable: int = 0
    correct_abstentions: int = 0
    false_abstentions: int = 0
    missing_runs: int = 0
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # "recall@5" -> sum
    claims_supported: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    claims_total: int = 0

    def as_dict(self, ks: Sequence[int]) -> dict:
        means = {f"{m}@{k}": (self.sums[f"{m}@{k}"] / self.answerable if self.answerable else None)
                 for k in ks for m in METRICS}
        claims = {f"claim_evidence@{k}": (self.claims_supported[k] / self.claims_total if self.claims_total else None)
                  for k in ks}
        return {
            "answerable": self.answerable, "unanswerable": self.unanswerable, "missing_runs": self.missing_runs,
            "metrics": means, **claims,
            "correct_abstention_rate": (self.correct_abstentions / self.unanswerable if self.unanswerable else None),
            "false_abstention_rate": (self.false_abstentions / self.answerable if self.answerable else None),
        }


FIRST_TURNS, FOLLOW_UPS = "turn:first", "turn:follow-up"


def evaluate(cases: Iterable[Case], runs: Iterable[RunEntry], ks: Sequence[int]) -> dict:
    """Scores overall, per split and per tag, and, when any case is a follow-up turn, for first
    turns and follow-ups apart. Answerable cases (``expected: answer`` with a unit of
    grade >= 1) give the ranking metrics; unanswerable ones (``expected: abstain``) are scored on
    abstention alone. A case with no run entry counts as retrieving nothing, and is reported."""
    cases = list(cases)
    by_case = {run.case_id: run for run in runs}
    by_turn = any(case.follow_up for case in cases)
    groups: dict[str, GroupScore] = defaultdict(GroupScore)
    for case in cases:
        run = by_case.get(case.id)
        names = ["all", f"split:{case.split}", *(f"tag:{t}" for t in case.tags)]
        if by_turn:
            names.append(FOLLOW_UPS if case.follow_up else FIRST_TURNS)
        targets = [groups[n] for n in names]
        retrieved = run.retrieved if run is not None else []
        abstained = run.abstained if run is not None else False
        for group in targets:
            group.missing_runs += run is None
        if case.expected == "abstain":
            for group in targets:
                group.unanswerable += 1
                group.correct_abstentions += abstained
            continue
        if not any(u.grade >= 1 for u in case.relevant):
            continue  # answerable but nothing relevant labeled: cannot be scored
        scores = {f"{m}@{k}": v for k in ks for m, v in case_metrics(retrieved, case.relevant, k).items()}
        supported = {k: claim_support(retrieved, case.claims, k)[0] for k in ks}
        with_evidence = sum(1 for claim in case.claims if claim.evidence)
        for group in targets:
            group.answerable += 1
            group.false_abstentions += abstained
            for name, value in scores.items():
                group.sums[name] += value
            for k, ok in supported.items():
                group.claims_supported[k] += ok
            group.claims_total += with_evidence
    ordered = sorted(groups, key=lambda n: (n != "all", not n.startswith("turn:"), not n.startswith("split:"), n))
    return {"k": list(ks), "groups": {name: groups[name].as_dict(ks) for name in ordered}}


def parse_threshold(text: str) -> tuple[str, float]:
    """``recall@5=0.8`` -> ("recall@5", 0.8), a floor on the whole set; ``turn:follow-up/recall@5=0.6``
    -> ("turn:follow-up/recall@5", 0.6), a floor on one group of the report. Errors name what is wrong.
    The value is split at the last ``=``: a number holds none, a group's name may (``tag:lang=de``)."""
    name, sep, value = text.rpartition("=")
    group, slash, measure = name.rpartition("/")
    metric, at, k = measure.partition("@")
    if not sep or not at or metric not in (*METRICS, "claim_evidence") or not k.isdigit() or (slash and not group):
        raise ValueError(f"{text!r}: expected [GROUP/]METRIC@K=VALUE with METRIC one of {', '.join(METRICS)}, "
                         "claim_evidence")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{text!r}: {value!r} is not a number") from None
    if not math.isfinite(number):  # a floor of nan or inf would never (or always) fail
        raise ValueError(f"{text!r}: {value!r} is not a finite number")
    return name, number


def measured(report: dict, name: str) -> float | None:
    """The value of ``name`` (``metric@k``, of the whole set, or ``GROUP/metric@k``) in a report."""
    group_name, _, metric = name.rpartition("/")
    group = report["groups"].get(group_name or "all", {})
    return group.get(metric) if metric.startswith("claim_evidence") else group.get("metrics", {}).get(metric)


def gate(report: dict, fail_under: Sequence[tuple[str, float]], baseline: dict | None,
         max_drop: float | None) -> list[str]:
    """Reasons to fail CI: a metric under its floor, or dropped from the baseline by more than
    ``max_drop`` (over the whole set, and over first turns and follow-ups where both reports have
    them). A baseline that is not a report of ``ragmon eval`` is a ValueError."""
    failures = []
    for name, floor in fail_under:
        value = measured(report, name)
        if value is None:
            group = name.rpartition("/")[0]
            where = f"no answerable case in {group}" if group else "no answerable case"
            failures.append(f"{name}: not measured ({where}, or k not evaluated)")
        elif value < floor:
            failures.append(f"{name} = {value:.4f} is under {floor:.4f}")
    if baseline is not None and max_drop is not None:
        groups = baseline.get("groups") if isinstance(baseline, dict) else None
        if not isinstance(groups, dict):  # another file given by mistake would compare nothing, and pass
            raise ValueError("the baseline is not a report of `ragmon eval -o json` (it has no groups)")
        for group in ("all", FIRST_TURNS, FOLLOW_UPS):
            prefix = "" if group == "all" else f"{group}/"
            for metric, before in (groups.get(group) or {}).get("metrics", {}).items():
                now = measured(report, prefix + metric)
                if before is not None and now is not None and before - now > max_drop:
                    failures.append(f"{prefix}{metric} dropped {before - now:.4f} from {before:.4f} "
                                    f"(allowed {max_drop:.4f})")
    return failures


def load_cases(data: bytes) -> list[Case]:
    return _load(data, Case, "case")


def load_runs(data: bytes) -> list[RunEntry]:
    return _load(data, RunEntry, "run entry")


def _load(data: bytes, kind, what: str) -> list:
    decoder = msgspec.json.Decoder(kind)
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(decoder.decode(line))
        except msgspec.DecodeError as error:
            raise ValueError(f"line {number}: not a valid {what}: {error}") from None
    return out
