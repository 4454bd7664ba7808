"""The sections the pure core reads: the bounds on one input record and how the signals are
computed. They live apart from the composed settings so that the core depends on these two and on
nothing else of the configuration."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator, model_validator

from ragmon.monitor.config.catalog_sources import CatalogSourceConfig
from ragmon.monitor.config.section import ConfigSection, TimeZoneName


class Limits(ConfigSection):
    """Bounds on a single input record (docs/reliability.md). Exceeding one rejects the record."""

    max_event_bytes: PositiveInt = Field(1024 * 1024, description="Largest accepted record, in bytes.")
    max_passages_per_list: PositiveInt = Field(
        500, description="Most passages in one retrieval list or context (also ACL entries, groups, citations)."
    )
    max_retrieval_lists: PositiveInt = Field(32, description="Most retrieval lists in one trace.")
    max_id_length: PositiveInt = Field(256, description="Longest id, name, version or principal, in characters.")
    max_text_length: PositiveInt = Field(
        65536, description="Longest query, answer, passage text or comment, in characters."
    )
    max_clock_skew_seconds: PositiveFloat = Field(
        300.0, description="How far in the future a timestamp may be before the record is rejected."
    )
    min_catalog_time: datetime = Field(
        datetime(2000, 1, 1, tzinfo=UTC), description="Earliest `modified_at` of a document event and "
        "`indexed_at` of an index event: an older one is a forgery or a zero value, and would make an "
        "index look stale for decades.")
    # Ceilings on what a trace adds to counters and histogram sums: a value above one is a unit
    # mistake or a forgery, and once added it would stay in a counter for good.
    max_tokens: PositiveInt = Field(10_000_000, description="Largest `usage.input_tokens` or `output_tokens` "
                                    "of one trace.")
    max_latency_ms: PositiveFloat = Field(86_400_000.0, description="Largest `latency_ms` of one stage (a day).")
    max_cost_usd: PositiveFloat = Field(1_000_000.0, description="Largest `usage.cost_usd` of one trace.")


class EventsConfig(ConfigSection):
    """How the fields of events are read (docs/events.md, "Times")."""

    time_zone: TimeZoneName | None = Field(
        None, description="The IANA zone (e.g. Europe/Berlin) of event times written without an offset "
        "(`2026-12-01T10:00:00`, or a date alone, read as its 00:00), wherever they arrive: native events and "
        "OTLP document metadata. Unset: such times are refused (`bad_timestamp`), since reading them as UTC "
        "would shift each by the sources' offset.")


_APOSTROPHE = "[\u2019']"
DEFAULT_REFUSALS = [
    rf"\bI (?:do not|don{_APOSTROPHE}t|cannot|can{_APOSTROPHE}t|could not|couldn{_APOSTROPHE}t) "
    r"(?:know|find|answer|say|help)",
    rf"\bI (?:do not|don{_APOSTROPHE}t) have (?:enough|sufficient|any|the) (?:relevant )?"
    r"(?:information|context|details|data)",
    rf"\b(?:context|documents?|sources?) (?:do|does|don{_APOSTROPHE}t|doesn{_APOSTROPHE}t)(?: not)? "
    r"(?:contain|include|mention|cover|provide)",
    r"\bnot (?:mentioned|covered|found|available) in the (?:provided |available )?(?:documents?|sources?|context)",
    rf"\bI(?:{_APOSTROPHE}m| am) (?:not able|unable) to (?:find|answer|help)",
    r"\b(?:I have|there is|there was|there's) no (?:relevant )?(?:information|data|details)\b",
    r"\bno (?:relevant )?(?:information|documents?|sources?) (?:was |were )?(?:found|available|provided)\b",
    r"\b(?:not enough|insufficient) (?:information|context)\b",
]


class SignalsConfig(ConfigSection):
    """How the online signals are computed (docs/signals.md)."""

    low_score_thresholds: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Top-score thresholds per index and retriever, e.g. {policies: {vector: 0.55}}. "
        "Without one, the trailing percentile below applies.",
    )
    low_score_percentile: float = Field(5.0, gt=0, lt=100, description="Trailing percentile used without a threshold.")
    low_score_min_samples: PositiveInt = Field(500, description="Scores seen before the trailing percentile applies.")
    low_score_window: PositiveInt = Field(5000, description="Trailing scores kept per index and retriever.")
    low_score_sync_seconds: float = Field(
        1.0, ge=0,
        description="How often a process writes the top scores it judged to the database and reads those of the "
        "other replicas into its baselines, so that replicas judge low scores as one process; at start-up it "
        "reads the newest window. 0: each process keeps its own baselines (docs/signals.md).",
    )
    keyword_retrievers: list[str] = Field(
        default_factory=lambda: ["bm25", "keyword", "sparse"],
        description="A retriever whose name contains one of these (ignoring case) is keyword search: its empty "
        "lists are also counted in `ragmon_empty_keyword_retrievals_total`.",
    )
    refusal_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REFUSALS),
        description="Regular expressions (case-insensitive) that mark an answer as an abstention when the "
        "trace does not say.",
    )
    rephrase_window_seconds: PositiveFloat = Field(
        120.0, description="A question asked again within this many seconds is a rephrase."
    )
    rephrase_min_jaccard: float = Field(0.6, gt=0, le=1, description="Token-set Jaccard similarity of a rephrase.")
    rephrase_callers: PositiveInt = Field(100_000, description="Callers remembered for rephrase detection.")
    rewrite_conversations: PositiveInt = Field(
        50_000, description="Conversations whose last 4 turns are remembered (as hashes of their content terms, "
        "at most about 2.3 KiB a conversation) to judge what a follow-up's searched query kept of them; a follow-up "
        "of a conversation forgotten is counted as not judged (docs/signals.md, \"Rewrite\").")
    recent_traces: PositiveInt = Field(200_000, description="Traces remembered to join late feedback to.")
    late_judging_traces: NonNegativeInt = Field(
        10_000, description="Traces kept after they were judged, to judge again when the catalog changes the "
        "documents they served (a revocation or a new version learned late); 0 turns judging again off.")
    late_judging_bytes: PositiveInt = Field(
        8 * 1024 * 1024, description="Bytes of those traces' records (as received) kept at most; a decoded trace "
        "takes about 2.7 times its record in memory. The oldest are dropped first.")
    coverage_window_seconds: PositiveFloat = Field(
        3600.0, description="The trailing window of `ragmon_passage_coverage_ratio`: the share of the passages "
        "served from an index that the access and freshness checks could judge.")

    @model_validator(mode="after")
    def _window_holds_the_samples(self) -> SignalsConfig:
        if self.low_score_window < self.low_score_min_samples:
            raise ValueError(
                f"low_score_window ({self.low_score_window}) must be at least low_score_min_samples "
                f"({self.low_score_min_samples}), or the trailing percentile never applies"
            )
        return self

    @field_validator("refusal_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"pattern {i} is not a valid regular expression: {error}") from None
        return patterns


class DedupeConfig(ConfigSection):
    """Traces delivered again (a client's retry, a Kafka redelivery) are not counted again."""

    window: NonNegativeInt = Field(100_000, description="Trace ids remembered, per process; a trace whose id is "
                                   "among them is acknowledged and counted in `ragmon_duplicate_events_total` "
                                   "only. 0 turns this off.")


class FindingsConfig(ConfigSection):
    """The findings store: for every trace whose signals fired, which passages broke which rule, in
    words (`GET /api/v1/findings`, `ragmon findings list`, `ragmon trace show`). Ids and rules only:
    no query or passage text but the content terms of the user's message a rewrite dropped, taken from
    the message redacted whole; ids and principals pass through the redactor."""

    enabled: bool = Field(True, description="Keep findings. Off: the API and the commands find none.")
    per_signal_per_second: PositiveFloat = Field(
        20.0, description="Findings kept per second for each signal, after a burst of ten seconds' worth; the "
        "rest are counted in `ragmon_findings_total{outcome=\"rate_limited\"}`.")
    retention_days: PositiveFloat = Field(14.0, description="Findings older than this are deleted by the "
                                          "scheduler's `retention` job.")


class CatalogConfig(ConfigSection):
    """The catalog: its bounds (a new document or index entry beyond them is rejected as `catalog_full`,
    dead-lettered and counted; changes to known ones still apply), the sources it is read from
    (docs/catalog.md), and the digest of served documents `ragmon catalog check` reads."""

    max_documents: PositiveInt = Field(500_000, description="Documents the catalog holds at most (about 1 KB "
                                       "of memory each).")
    max_index_entries: PositiveInt = Field(1_000_000, description="(index, document) entries at most.")
    sources: list[CatalogSourceConfig] = Field(
        default_factory=list, description="Systems of record the catalog is synced from, each `{name, kind, …}`: "
        "kind `folder` or `manifest` (keys below, and docs/catalog.md).")
    served_days: PositiveFloat = Field(
        7.0, description="Days the digest of served documents (index, tenant, document, version: counts only) "
        "keeps a row after its last passage; `ragmon catalog check` reads it.")
    served_max_rows: PositiveInt = Field(
        50_000, description="Rows the digest of served documents keeps at most; the least recently served go first.")
    unseen_after_seconds: PositiveFloat = Field(
        86_400.0, description="A document no served passage named this long after its event, while passages of "
        "documents the catalog does not know were served, is counted as suspicious (`unseen_document`): the "
        "catalog's and the chunks' document ids likely differ.")
    refresh_seconds: PositiveFloat = Field(
        2.0, description="How often a running process reads the catalog changes other processes wrote to the "
        "database (`ragmon replay` of catalog events, another replica, a catalog sync: one query of a revision "
        "counter, then only the rows written since), and judges the recent traces that served changed documents "
        "again (docs/signals.md, \"Judged again\").")

    @field_validator("sources")
    @classmethod
    def _names_unique(cls, sources: list[CatalogSourceConfig]) -> list[CatalogSourceConfig]:
        names = [source.name for source in sources]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"source names must be unique: {', '.join(twice)} given more than once")
        return sources
