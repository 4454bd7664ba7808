"""The metrics sink: label caps hold under any number of distinct names; the exposition passes
promtool; nothing but closed-set names reaches a label."""

from __future__ import annotations

import re
import shutil
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from ragmon.exporters.coverage import CoverageWindow
from ragmon.exporters.instruments import OTHER, LabelCap, Metrics
from ragmon.exporters.metrics import LATENCY_BUCKETS, METRICS
from ragmon.exporters.prometheus import PrometheusSink, _Tally, metric_sum, register_scrape_time
from ragmon.monitor.config.settings import LabelsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import IndexRef, Latency, TraceEvent, Usage
from ragmon.monitor.core.pipeline import Observation, PipelineStats
from ragmon.monitor.core.signals import AccessFindings, Outcome, RetrievalFinding, StaleFindings, TraceSignals
from ragmon.monitor.core.signals.results import Coverage, Unjudged


def signals(tenant: str, index: str, retriever: str) -> TraceSignals:
    # two passages, one in the context; the access check could not judge one of them
    coverage = Coverage({"candidates": 1, "context": 1}, {("candidates", Unjudged.NO_ACL): 1}, 2, 1,
                        {Unjudged.NO_ACL: 1})
    return TraceSignals(
        tenant=tenant, index=index, has_caller=True, outcome=Outcome.ANSWERED,
        access=AccessFindings(1, 1, 1, coverage=coverage),
        stale=StaleFindings(1, 1, coverage=Coverage({"candidates": 2, "context": 1}, {}, 2, 0)),
        retrievals=[RetrievalFinding(retriever, 0.5, True, False, False)],
        duplicate_passages=1, duplicate_doc_versions=1, mixed_embeddings=True, unsupported_citations=1,
        rephrase_of=None, latency=Latency(retrieve=10, total=20), usage=Usage(input_tokens=5, output_tokens=2,
                                                                             cost_usd=0.1))


def observation(s: TraceSignals) -> Observation:
    event = TraceEvent(trace_id="t", time=0.0, query="", index=IndexRef(s.index), tenant=s.tenant)
    return Observation(event, "http", 0.0, s)


def test_label_cap_keeps_the_allowlist_and_the_first_n():
    cap = LabelCap(["vip"], 2)
    assert [cap(v) for v in ("a", "vip", "b", "c", "a", "vip", "d")] == ["a", "vip", "b", OTHER, "a", "vip", OTHER]


def test_a_hundred_thousand_distinct_names_stay_within_the_caps():
    registry = CollectorRegistry()
    labels = LabelsConfig(tenants=["acme"], max_tenants=50, max_indexes=50, max_retrievers=10)
    sink = PrometheusSink(Metrics(registry, labels))
    sink.consume(observation(signals("acme", "i-first", "r-first")))
    for i in range(100_000):
        sink.consume(observation(signals(f"tenant-{i}", f"index-{i}", f"retriever-{i}")))
    sink.consume(observation(signals("acme", "i-last", "r-last")))  # squatters cannot take an allowlisted name's label
    sink.flush(1.0)
    values: dict[str, set[str]] = {"tenant": set(), "index": set(), "retriever": set()}
    series = 0
    for family in registry.collect():
        for sample in family.samples:
            series += 1
            for name in values:
                if name in sample.labels:
                    values[name].add(sample.labels[name])
    assert values["tenant"] <= {"acme", OTHER, *(f"tenant-{i}" for i in range(50))}
    assert len(values["tenant"]) == 52  # the allowlisted one, the first 50 others, and `other`
    assert len(values["index"]) == 51 and len(values["retriever"]) == 11
    # every (tenant, index) pair seen is the same pair over and over: first 50ish distinct pairs plus `other`
    assert series < 10_000
    assert metric_sum(registry, "ragmon_answers_total", tenant=OTHER) == 100_000 - 50
    assert metric_sum(registry, "ragmon_answers_total", tenant="acme") == 2


def test_the_exposition_passes_promtool_and_declares_every_spec_metric():
    registry = CollectorRegistry()
    metrics = Metrics(registry, LabelsConfig())
    window = CoverageWindow(3600.0, clock=lambda: 0.0)
    register_scrape_time(metrics, PipelineStats(), Catalog(), clock=lambda: 0.0, sample_queue=lambda: {"queued": 3},
                         coverage=window)
    sink = PrometheusSink(metrics, window)
    sink.consume(observation(signals("acme", "policies", "bm25")))
    sink.flush(1.0)
    exposition = generate_latest(registry)
    assert b'ragmon_sample_queue{status="queued"} 3.0' in exposition
    assert b'ragmon_passage_coverage_ratio{check="access",index="policies"} 0.5' in exposition
    assert b'ragmon_sample_queue{status="labeled"} 0.0' in exposition
    for spec in METRICS:
        assert f"# TYPE {spec.name} {spec.kind}\n".encode() in exposition, spec.name
    promtool = shutil.which("promtool")
    assert promtool, "promtool comes with the test services (tests/services/install.sh)"
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True)
    assert checked.returncode == 0 and checked.stdout == b"" and checked.stderr == b"", checked


def test_a_name_holding_personal_data_or_a_secret_is_exported_as_its_shown_id():
    from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

    shown = Redactor(RedactionConfig(caller_key="label-test-key-0123456")).shown_id
    registry = CollectorRegistry()
    sink = PrometheusSink(Metrics(registry, LabelsConfig(tenants=["ops@example.com"]), shown=shown))
    for tenant in ("acme", "bob.jones@example.com", "bob.jones@example.com", "ops@example.com", "eve@example.org"):
        sink.consume(observation(signals(tenant, "policies", "bm25")))
    sink.flush(1.0)
    exposition = generate_latest(registry).decode()
    assert "bob.jones" not in exposition and "eve@" not in exposition
    bob, eve = shown("bob.jones@example.com"), shown("eve@example.org")
    assert bob.startswith("[EMAIL]~k") and eve.startswith("[EMAIL]~k") and bob != eve  # two names, two labels
    assert metric_sum(registry, "ragmon_answers_total", tenant=bob) == 2
    assert metric_sum(registry, "ragmon_answers_total", tenant=eve) == 1
    assert metric_sum(registry, "ragmon_answers_total", tenant="acme") == 1
    assert metric_sum(registry, "ragmon_answers_total", tenant="ops@example.com") == 1  # allowlisted on purpose
    assert metric_sum(registry, "ragmon_redacted_label_values_total", label="tenant") == 2  # once per name
    # a stored sample's tenant is a shown id already: counted under the same label, not shown twice
    from ragmon.monitor.labeling.sample_store import Admission

    sink.count_admission(Admission(sampled=[(bob, "random")]))
    assert metric_sum(registry, "ragmon_samples_total", tenant=bob) == 1
    assert metric_sum(registry, "ragmon_redacted_label_values_total", label="tenant") == 2


def test_private_names_take_places_under_the_cap():
    shown = {"a@example.com": "[EMAIL]~k1", "b@example.com": "[EMAIL]~k2", "c@example.com": "[EMAIL]~k3"}
    reported = []
    cap = LabelCap([], 2, lambda name: shown.get(name, name), lambda: reported.append(1))
    assert [cap(v) for v in ("a@example.com", "x", "b@example.com", "a@example.com")] == [
        "[EMAIL]~k1", "x", OTHER, "[EMAIL]~k1"]
    assert cap.of_shown("[EMAIL]~k1") == "[EMAIL]~k1" and cap.of_shown("[EMAIL]~k3") == OTHER
    assert len(reported) == 1  # the one private name given a place


def test_a_batch_is_counted_when_it_is_flushed():
    registry = CollectorRegistry()
    sink = PrometheusSink(Metrics(registry, LabelsConfig()))
    sink.consume(observation(signals("acme", "policies", "bm25")))
    assert metric_sum(registry, "ragmon_answers_total") == 0  # consumed, not yet durable-and-flushed
    sink.flush(1.0)
    assert metric_sum(registry, "ragmon_answers_total") == 1
    sink.flush(1.0)
    assert metric_sum(registry, "ragmon_answers_total") == 1  # a tally is applied once


_TIMESTAMP = re.compile(rb"(# \{[^}]*\} \S+) \S+$", re.MULTILINE)  # an exemplar's time: when it was set


def _openmetrics(registry: CollectorRegistry) -> bytes:
    """The exposition with exemplars, without what depends on when it was made."""
    text = openmetrics_latest(registry)
    text = b"\n".join(line for line in text.split(b"\n") if b"_created" not in line)
    return _TIMESTAMP.sub(rb"\1", text)


_operations = st.lists(st.tuples(
    st.sampled_from(["add", "observe"]), st.integers(0, 2),
    st.one_of(st.sampled_from(LATENCY_BUCKETS), st.floats(-1.0, 40.0, allow_nan=False)),
    st.one_of(st.none(), st.sampled_from(["t1", "t2", "t3", "t4"]))), max_size=60)


@settings(max_examples=200, deadline=None)
@given(_operations)
def test_a_tally_leaves_what_updates_one_by_one_would_leave(operations):
    """Counters summed, histograms observed in order, and only the exemplars left standing given:
    the OpenMetrics exposition (values, buckets, sums and exemplars) is the same as prometheus_client's
    own per-observation updates give."""
    exposed = []
    for batched in (False, True):
        registry = CollectorRegistry()
        counter = Counter("c", "c", ["k"], registry=registry)
        histogram = Histogram("h_seconds", "h", ["k"], buckets=LATENCY_BUCKETS, registry=registry)
        tally = _Tally()
        for kind, child, value, trace in operations:
            exemplar = None if trace is None else {"trace_id": trace}
            if kind == "add":
                amount = max(1, round(abs(value))) if exemplar else abs(value)  # exemplars go with counts
                if batched:
                    tally.add(counter.labels(str(child)), amount, exemplar)
                else:
                    counter.labels(str(child)).inc(amount, exemplar)
            elif batched:
                tally.observe(histogram.labels(str(child)), (*LATENCY_BUCKETS, float("inf")), value, exemplar)
            else:
                histogram.labels(str(child)).observe(value, exemplar)
        tally.apply()
        exposed.append(_openmetrics(registry))
    assert exposed[0] == exposed[1]
