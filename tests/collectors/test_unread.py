"""Explaining the OTLP traces ragmon cannot read (collectors/unread): names shown bounded, redacted
and visible; a digest that holds no attribute value and stays bounded whatever the trace; the
closest dialect and what it lacked; the watch's counts by scope, its warnings once an hour, its
repeats and rate, and a store that refuses rows."""

from __future__ import annotations

import logging
from collections import Counter

import msgspec
import pytest
from pydantic import SecretStr

from ragmon.collectors.otlp_wire import Span, SpanEvent
from ragmon.collectors.span_mapping import SpanMapper
from ragmon.collectors.unread.closest import CALLER, CONTEXT, RETRIEVAL, RegistryDialects
from ragmon.collectors.unread.digest import MAX_BYTES, MAX_GROUPS, MAX_KEYS, MAX_SCOPES, MAX_TRACKED_GROUPS, digest
from ragmon.collectors.unread.names import MAX_NAME_CHARS, UNNAMED, ShownNames
from ragmon.collectors.unread.watch import (
    FAILED,
    RATE_LIMITED,
    REPEATED,
    STORED,
    UnreadWatch,
    trace_scope,
)
from ragmon.monitor.core.errors import Retryable
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
VALUE = "what the application said: alice@example.com asked about payroll"  # must never be kept
EMAIL = "carol.danvers@example.com"
REDACTOR = Redactor(RedactionConfig(caller_key=SecretStr("k" * 32)))


def span(name: str, scope: str = "app", parent: str = "", span_id: str = "", kind: int = 1, trace: str = TRACE,
         attributes: dict | None = None, events: list[SpanEvent] | None = None, resource: dict | None = None,
         start: int = 1) -> Span:
    return Span(trace, span_id or f"{abs(hash((name, parent, start))) % 16 ** 16:016x}", parent, name, start,
                start + 1_000_000, dict(attributes or {}), resource if resource is not None else {}, events or [],
                scope=scope, scope_version="1.2.3", kind=kind)


class Report:
    """A TraceReport that keeps what it was told."""

    def __init__(self) -> None:
        self.traces: Counter[tuple[str, bool, tuple[str, ...]]] = Counter()
        self.digests: Counter[str] = Counter()

    def otlp_trace(self, scope, read, missing) -> None:
        self.traces[(scope, read, tuple(missing))] += 1

    def unread_digests(self, outcome, n) -> None:
        self.digests[outcome] += n


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- names ----------------------------------------------------------------------------------------


def test_names_are_shown_redacted_visible_and_bounded():
    names = ShownNames(REDACTOR.shown_id)
    assert names.name("openinference.instrumentation.langchain") == "openinference.instrumentation.langchain"
    assert names.name("") == UNNAMED
    private = names.name(f"scope of {EMAIL}")
    assert EMAIL not in private and private.startswith("scope of [EMAIL]~k")
    assert names.name("evil\x1b[2J\x9b\u202escope") == "evil\\x1b[2J\\x9b\\u202escope"
    long_a, long_b = "a" * 10_000, "a" * 200 + "b" * 9_800
    shown_a, shown_b = names.name(long_a), names.name(long_b)
    assert len(shown_a) <= MAX_NAME_CHARS and len(shown_b) <= MAX_NAME_CHARS and shown_a != shown_b
    assert names.name("x" * 129) != names.name("x" * 130)  # a cut name keeps a hash of the whole
    assert names.key("retrieval.documents.12.document.metadata") == "retrieval.documents.N.document.metadata"
    assert names.key("llm.input_messages.0.message.contents.3.message_content.text") == (
        "llm.input_messages.N.message.contents.N.message_content.text")
    assert names.key("gen_ai.usage.input_tokens") == "gen_ai.usage.input_tokens"


# -- the digest -----------------------------------------------------------------------------------


def test_a_digest_keeps_names_kinds_and_keys_never_a_value():
    resource = {"service.name": VALUE, "ragmon.tenant": "acme"}
    spans = [
        span("RetrieverQueryEngine.workflow", "traceloop.sdk", span_id="a" * 16, kind=2, resource=resource,
             attributes={"traceloop.entity.input": VALUE, "traceloop.span.kind": "workflow"}),
        *(span("VectorIndexRetriever.task", "traceloop.sdk", parent="a" * 16, start=i + 2, resource=resource,
               attributes={"traceloop.entity.output": VALUE, f"retrieval.documents.{i}.document.id": VALUE},
               events=[SpanEvent("db.query.result", 5, {"db.query.result.document": VALUE})])
          for i in range(3)),
        span(f"lookup {EMAIL}", "opentelemetry.instrumentation.httpx", parent="a" * 16, kind=3, resource=resource,
             attributes={"http.url": VALUE}),
    ]
    made = digest(spans, ShownNames(REDACTOR.shown_id))
    text = msgspec.json.encode(made).decode()
    assert "payroll" not in text and "alice" not in text and EMAIL not in text
    assert made["spans"] == 5 and made["scopes"] == [
        {"name": "traceloop.sdk", "version": "1.2.3", "spans": 4},
        {"name": "opentelemetry.instrumentation.httpx", "version": "1.2.3", "spans": 1}]
    assert made["resource_keys"] == ["ragmon.tenant", "service.name"]
    first, *rest = made["groups"]
    assert (first["scope"], first["name"], first["kind"], first["spans"]) == (0, "VectorIndexRetriever.task",
                                                                              "internal", 3)
    assert first["keys"] == ["retrieval.documents.N.document.id", "traceloop.entity.output"]
    assert first["events"] == ["db.query.result"]
    assert [(g["name"], g["kind"]) for g in rest] == [("RetrieverQueryEngine.workflow", "server"),
                                                     (made["groups"][2]["name"], "client")]
    assert made["groups"][2]["name"].startswith("lookup [EMAIL]~k")


def test_a_digest_stays_bounded_whatever_the_trace():
    """10,000 spans of 2,000 names in 40 scopes, one span with 100,000 attribute keys, names of
    10 KB: the digest is at most 16 KiB of JSON and counts what it left out."""
    huge = {f"custom.key{i}": i for i in range(100_000)}
    spans = [span(f"{'n' * 10_000}{i % 2000}", f"scope-{i % 40}-{'s' * 10_000}", start=i,
                  attributes=huge if i == 0 else {f"k{j}.{i}": 1 for j in range(60)}) for i in range(10_000)]
    made = digest(spans, ShownNames(REDACTOR.shown_id))
    size = len(msgspec.json.encode(made))
    assert size <= MAX_BYTES
    assert made["spans"] == 10_000 and len(made["scopes"]) == MAX_SCOPES and made["scopes_omitted"] == 40 - MAX_SCOPES
    assert all(len(s["name"]) <= MAX_NAME_CHARS for s in made["scopes"])
    assert 0 < len(made["groups"]) <= MAX_GROUPS and all(len(g["keys"]) <= MAX_KEYS for g in made["groups"])
    # the first 1,024 groups are looked at; the spans of the others are counted, not named
    assert made["groups_omitted"] == MAX_TRACKED_GROUPS - len(made["groups"])
    assert sum(g["spans"] for g in made["groups"]) + made["spans_omitted"] == 10_000
    keyed = next(g for g in made["groups"] if g["keys_cut"] or g["keys_omitted"])
    assert keyed["keys_omitted"] > 0


def test_a_digest_of_hostile_names_holds_no_control_character():
    spans = [span("\x1b]8;;http://evil\x07click\x1b]8;;\x07", "\x1b[2J\u202escope", attributes={"\x1b[31mkey": 1},
                  events=[SpanEvent("ev\x00ent", 1, {})])]
    text = msgspec.json.encode(digest(spans, ShownNames(REDACTOR.shown_id))).decode()
    assert "\\u001b" not in text and "\\u0000" not in text and "\u202e" not in text
    assert "\\\\x1b[2J\\\\u202escope" in text  # the escape, as text


# -- the closest dialect ----------------------------------------------------------------------------


def test_the_closest_dialect_and_what_it_lacked():
    dialects = RegistryDialects()
    openinference = [span("chain", attributes={"openinference.span.kind": "CHAIN"}),
                     span("llm", attributes={"openinference.span.kind": "LLM"}),
                     span("odd", attributes={"openinference.span.kind": VALUE})]
    closest = dialects.closest(openinference, RETRIEVAL)
    assert closest.dialect == "openinference"
    assert closest.lacked == ("a span of openinference.span.kind RETRIEVER or RERANKER (the openinference.span.kind "
                              "of its spans: CHAIN, LLM, another value)")
    genai = [span("retrieve", attributes={"gen_ai.operation.name": "vector_db_retrieve"}),
             span("chat", attributes={"gen_ai.operation.name": "chat"})]
    assert dialects.closest(genai, RETRIEVAL).lacked == (
        "a span of gen_ai.operation.name retrieval (the gen_ai.operation.name of its spans: another value, chat)")
    store = [span("chroma.add", attributes={"db.system": "chroma", "db.operation": "add"})]
    closest = dialects.closest(store, RETRIEVAL)
    assert (closest.dialect, closest.lacked) == ("vector_store",
                                                 "db.query.result span events with db.query.result.* attributes (or "
                                                 "db.search.result events with db.search.result.*)")
    by_scope = dialects.closest([span("add", "opentelemetry.instrumentation.chromadb")], RETRIEVAL)
    assert by_scope.dialect == "vector_store"  # its scope says so, without any marker attribute
    nothing = dialects.closest([span("GET /", attributes={"http.method": "GET"})], RETRIEVAL)
    assert nothing.dialect is None and "a span of a known instrumentation scope" in nothing.lacked
    lacked = dialects.closest(openinference, CALLER).lacked
    assert lacked.startswith("a caller: no span carries ")  # the places the spans' dialects look
    assert all(place in lacked for place in ("user.id", "enduser.id", "metadata.groups", "ragmon.caller.groups"))
    assert "3 documents had nothing to name them" in dialects.closest(openinference, CONTEXT, unmapped=3).lacked
    assert "reported no document" in dialects.closest(openinference, CONTEXT).lacked
    for what in (RETRIEVAL, CALLER, CONTEXT):
        assert VALUE not in dialects.closest(openinference + genai, what).lacked


def test_a_vector_store_whose_instrumentation_records_no_results_is_said_so():
    """OpenLLMetry's LanceDB, Qdrant and Weaviate instrumentations never put a search's results on their spans: the
    explanation names that (and the way round it) rather than the result events a search did not have."""
    dialects = RegistryDialects()
    search = span("lancedb.search", "opentelemetry.instrumentation.lancedb",
                  attributes={"db.system": "lancedb", "db.operation": "search", "db.milvus.search.filter": VALUE})
    closest = dialects.closest([search], RETRIEVAL)
    assert closest.dialect == "vector_store"
    assert closest.lacked == (
        "results: opentelemetry-instrumentation-lancedb records none (its lancedb.search span ends when "
        "LanceTable.search returns the query, before the query runs; it carries db.system and db.operation only); "
        "wrap the search in a span of gen_ai.operation.name retrieval listing what it returned in "
        "gen_ai.retrieval.documents")
    by_system = dialects.closest([span("search", attributes={"db.system": "LanceDB", "db.operation": "search"})],
                                 RETRIEVAL)
    assert by_system.lacked == closest.lacked  # no scope of its own: its db.system says which store
    qdrant = dialects.closest([span("qdrant.query_points", "opentelemetry.instrumentation.qdrant",
                                    attributes={"qdrant.query_points.collection_name": VALUE})], RETRIEVAL)
    assert qdrant.dialect == "vector_store" and qdrant.lacked.startswith(
        "results: opentelemetry-instrumentation-qdrant records none")
    # opentelemetry-instrumentation-weaviate 0.62.4: db.system and db.operation (and some arguments) only
    weaviate = dialects.closest([span("db.weaviate.collections.query.get", "opentelemetry.instrumentation.weaviate",
                                      attributes={"db.system": "weaviate", "db.operation": "get"}),
                                 span("db.weaviate.collections.query.fetch_objects",
                                      "opentelemetry.instrumentation.weaviate",
                                      attributes={"db.system": "weaviate", "db.operation": "fetch_objects",
                                                  "db.weaviate.collections.query.fetch_objects.filters": VALUE})],
                                RETRIEVAL)
    assert weaviate.dialect == "vector_store" and weaviate.lacked == (
        "results: opentelemetry-instrumentation-weaviate records none (its db.weaviate.* spans carry db.system, "
        "db.operation and some of the call's arguments, never what it returned); wrap the search in a span of "
        "gen_ai.operation.name retrieval listing what it returned in gen_ai.retrieval.documents")
    assert VALUE not in weaviate.lacked
    both = dialects.closest([search, span("qdrant.search", "opentelemetry.instrumentation.qdrant")], RETRIEVAL)
    assert both.lacked.count("records none") == 2 and both.lacked.count("wrap the search") == 1
    assert VALUE not in closest.lacked + qdrant.lacked


# -- the watch ------------------------------------------------------------------------------------


def test_a_trace_is_counted_under_the_scope_most_of_its_spans_came_from():
    server = span("POST /ask", "opentelemetry.instrumentation.fastapi", span_id="f" * 16, kind=2)
    inner = [span(f"step{i}", "openinference.instrumentation.llama_index", parent="f" * 16, start=i + 2)
             for i in range(3)]
    assert trace_scope([server, *inner]) == "openinference.instrumentation.llama_index"
    tied = [server, span("step", "b-scope", parent="f" * 16, start=2)]
    assert trace_scope(tied) == "opentelemetry.instrumentation.fastapi"  # a tie: the root's


def unread_trace(trace: str = TRACE, scope: str = "traceloop.sdk", name: str = "Retriever.task",
                 tenant: str | None = "acme") -> list[Span]:
    resource = {"ragmon.tenant": tenant} if tenant else {}
    return [span(name, scope, trace=trace, resource=resource, attributes={"traceloop.entity.output": VALUE})]


def read_event(caller: bool = True, context: bool = True) -> dict:
    event = {"type": "trace", "trace_id": TRACE, "time": 1.0, "tenant": "acme", "query": VALUE,
             "index": {"name": "i"}, "retrievals": [{"retriever": "r", "passages": [{"id": "p"}] if context else []}]}
    if caller:
        event["caller"] = {"id": "u", "groups": []}
    return event


def test_the_watch_counts_every_trace_by_scope_and_keeps_one_row_per_gap(caplog):
    report, kept = Report(), []
    watch = UnreadWatch(REDACTOR.shown_id, report, kept.extend, monotonic=Clock(), clock=Clock(5.0))
    with caplog.at_level(logging.WARNING, logger="ragmon.collectors.unread.watch"):
        watch.observe(unread_trace(), None)
        watch.observe(unread_trace("1" * 32, scope="openinference.x"), read_event(caller=False, context=False))
        watch.observe(unread_trace("2" * 32, scope="openinference.x"), read_event())
        watch.observe(unread_trace("3" * 32, scope="openinference.x"), {**read_event(), "mapping_error": "bug"})
        watch.flush()
    assert report.traces == {("traceloop.sdk", False, ("retrieval",)): 1,
                             ("openinference.x", True, ("caller", "context")): 1, ("openinference.x", True, ()): 1}
    assert report.digests == {STORED: 3}
    assert [(r["trace_id"], r["missing"], r["tenant"], r["scope"]) for r in kept] == [
        (TRACE, "retrieval", "acme", "traceloop.sdk"), ("1" * 32, "caller", "acme", "openinference.x"),
        ("1" * 32, "context", "acme", "openinference.x")]
    assert kept[0]["time"] == 1e-9 and kept[0]["recorded_at"] == 5.0 and kept[0]["spans"] == 1
    assert len({r["key"] for r in kept}) == 3
    assert VALUE not in msgspec.json.encode(kept).decode() and VALUE not in caplog.text
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "OTLP traces of instrumentation scope traceloop.sdk yield no retrieval and go no further",
        "OTLP traces of instrumentation scope openinference.x are read without a caller: their permission checks "
        "see the tenant only",
        "OTLP traces of instrumentation scope openinference.x are read without a context: nothing reached the model "
        "that ragmon could judge"]


def test_a_weaviate_search_is_no_retrieval_and_is_counted_and_explained():
    """opentelemetry-instrumentation-weaviate 0.62.4 wraps Weaviate's query calls in spans of
    ``db.system`` weaviate and ``db.operation`` alone (some calls add their arguments): nothing
    they found. The trace maps to no event, and the watch counts it under its scope and keeps
    one row saying the instrumentation records no results."""
    scope = "opentelemetry.instrumentation.weaviate"
    searches = [[span("db.weaviate.collections.query.get", scope, trace=trace, resource={"ragmon.tenant": "acme"},
                      attributes={"db.system": "weaviate", "db.operation": "get"})] for trace in (TRACE, "1" * 32)]
    assert all(SpanMapper(None).map(spans).event is None for spans in searches)
    report, kept = Report(), []
    watch = UnreadWatch(REDACTOR.shown_id, report, kept.extend, monotonic=Clock())
    for spans in searches:
        watch.observe(spans, None)
    watch.flush()
    assert report.traces == {(scope, False, ("retrieval",)): 2} and report.digests == {STORED: 1, REPEATED: 1}
    [row] = kept
    assert (row["trace_id"], row["scope"], row["dialect"]) == (TRACE, scope, "vector_store")
    assert row["lacked"].startswith("results: opentelemetry-instrumentation-weaviate records none")


def test_a_trace_naming_no_tenant_is_kept_with_none_and_a_private_tenant_by_its_shown_id():
    kept: list[dict] = []
    watch = UnreadWatch(REDACTOR.shown_id, Report(), kept.extend)
    watch.observe(unread_trace(tenant=None), None)
    watch.observe(unread_trace("1" * 32, name="other", tenant=EMAIL), None)
    watch.flush()
    assert kept[0]["tenant"] == "" and kept[1]["tenant"] == REDACTOR.shown_id(EMAIL) != EMAIL


def test_the_watch_says_each_scope_once_an_hour_and_keeps_a_shape_once_an_hour(caplog):
    monotonic, report, kept = Clock(), Report(), []
    watch = UnreadWatch(REDACTOR.shown_id, report, kept.extend, monotonic=monotonic)
    with caplog.at_level(logging.WARNING, logger="ragmon.collectors.unread.watch"):
        for i in range(5):
            watch.observe(unread_trace(f"{i:032x}"), None)
        watch.observe(unread_trace("a" * 32, name="another span name"), None)  # another shape, same scope
        monotonic.now += 3599
        watch.observe(unread_trace("b" * 32), None)
        monotonic.now += 2
        watch.observe(unread_trace("c" * 32), None)
        watch.flush()
    assert len(caplog.records) == 2  # at 0 and after an hour
    assert report.digests == {STORED: 3, REPEATED: 5}
    assert [r["trace_id"] for r in kept] == ["0" * 32, "a" * 32, "c" * 32]


def test_the_watch_keeps_at_most_its_rate_and_counts_the_rest():
    report, kept = Report(), []
    watch = UnreadWatch(REDACTOR.shown_id, report, kept.extend, per_minute=4, monotonic=Clock())
    for i in range(10):  # ten shapes: ten names
        watch.observe(unread_trace(f"{i:032x}", name=f"span {i}"), None)
    watch.flush()
    assert len(kept) == 4 and report.digests == {STORED: 4, RATE_LIMITED: 6}


def test_a_store_that_refuses_loses_the_rows_counted_and_the_shapes_are_kept_again_later(caplog):
    report, attempts = Report(), []

    def refuse(rows: list[dict]) -> None:
        attempts.append(rows)
        if len(attempts) == 1:
            raise Retryable("database down")

    watch = UnreadWatch(REDACTOR.shown_id, report, refuse, monotonic=Clock())
    with caplog.at_level(logging.WARNING, logger="ragmon.collectors.unread.watch"):
        watch.observe(unread_trace(), None)
        watch.flush()
        watch.observe(unread_trace("1" * 32), None)  # the same shape: its row was lost, so it is kept
        watch.flush()
    assert report.digests == {FAILED: 1, STORED: 1}
    assert [[r["trace_id"] for r in rows] for rows in attempts] == [[TRACE], ["1" * 32]]
    assert "1 digests of OTLP traces ragmon could not read were not stored: database down" in caplog.text


def test_warnings_are_bounded_however_many_scopes_a_sender_invents(caplog):
    from ragmon.collectors.unread import watch as module

    watch = UnreadWatch(REDACTOR.shown_id, Report(), lambda rows: None, per_minute=1, monotonic=Clock())
    with caplog.at_level(logging.WARNING, logger="ragmon.collectors.unread.watch"):
        for i in range(module.MAX_WARNED_SCOPES + 200):
            watch.observe(unread_trace(f"{i:032x}", scope=f"scope-{i}"), None)
    assert len(caplog.records) == module.MAX_WARNED_SCOPES + 1  # the rest share one line an hour


@pytest.mark.parametrize("missing", [RETRIEVAL, CALLER, CONTEXT])
def test_what_the_watch_keeps_fits_the_store_columns(missing):
    kept: list[dict] = []
    watch = UnreadWatch(REDACTOR.shown_id, Report(), kept.extend)
    spans = [span("n" * 10_000, "s" * 10_000, resource={"ragmon.tenant": "t" * 10_000}, trace=TRACE)]
    event = None if missing == RETRIEVAL else read_event(caller=missing != CALLER, context=missing != CONTEXT)
    if event is not None:
        event["tenant"] = "t" * 10_000
    watch.observe(spans, event)
    watch.flush()
    row = kept[0]
    assert len(row["scope"]) <= 256 and len(row["tenant"]) <= 256 and len(row["trace_id"]) <= 256
    assert len(row["lacked"]) <= 1024 and len(row["dialect"]) <= 32 and len(row["missing"]) <= 16


def test_the_metrics_cap_scope_labels_and_count_the_private_ones():
    from prometheus_client import CollectorRegistry

    from ragmon.exporters.instruments import Metrics
    from ragmon.exporters.prometheus import metric_sum
    from ragmon.monitor.config.settings import LabelsConfig

    metrics = Metrics(CollectorRegistry(), LabelsConfig(scopes=["kept"], max_scopes=2), shown=REDACTOR.shown_id)
    names = ShownNames(REDACTOR.shown_id)
    for scope in ("a", names.name(f"of {EMAIL}"), "c", "d", "kept"):
        metrics.otlp_trace(scope, read=False, missing=("retrieval",))
    metrics.otlp_trace("a", read=True, missing=("caller", "context"))
    count = lambda name, **labels: metric_sum(metrics.registry, name, **labels)  # noqa: E731
    assert [count("ragmon_otlp_traces_without_retrieval_total", scope=s) for s in
            ("a", names.name(f"of {EMAIL}"), "other", "kept")] == [1, 1, 2, 1]
    assert count("ragmon_otlp_traces_read_total", scope="a") == 1
    assert [count("ragmon_otlp_traces_incomplete_total", scope="a", missing=m) for m in ("caller", "context")] == [1, 1]
    assert count("ragmon_redacted_label_values_total", label="scope") == 1
