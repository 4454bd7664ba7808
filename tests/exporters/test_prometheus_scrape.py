"""End to end: simulator traffic into `ragmon serve` over HTTP, scraped by a real Prometheus,
checked with one PromQL query (or more) per metric family against what the simulator injected."""

from __future__ import annotations

import json
import math
import time
from collections import Counter

import httpx
import msgspec
import pytest

from ragmon.monitor.app.simulate import CORRUPTIONS, Incident, Simulator, corrupt
from tests.ragmon_process import RagmonServer, scraped

pytestmark = pytest.mark.integration

TRACES = 6000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`ragmon serve` as a user runs it, fed with simulator traffic; yields (url, facts)."""
    # the embedded scheduler scans staleness every second and runs a probe, for the job and probe panels
    with RagmonServer(tmp_path_factory.mktemp("serve"), RAGMON_SCHEDULER__STALENESS_INTERVAL_SECONDS="1",
                      RAGMON_SCHEDULER__PROBE_INTERVAL_SECONDS="1",
                      RAGMON_PROBES__CALLABLE="tests.monitor.test_jobs:leaky",
                      RAGMON_PROBES__PROBES=json.dumps([{"name": "staff-sees-handbook", "query": "leave policy",
                                                         "identity": {"id": "alice", "tenant": "acme"},
                                                         "must_retrieve": ["handbook-*"]}])) as server:
        yield server.url, feed(server.url)


def feed(url: str) -> dict:
    """Post the traffic; return the facts the metrics must show."""
    incidents = [
        Incident("stale_index", "acme", "policies", start=500),
        Incident("leak", "globex", "handbook", start=1000, end=4000, rate=0.25),
        Incident("no_answer_spike", "initech", "support-kb", start=2000, end=5000, rate=0.7),
        Incident("reembedding", "acme", "handbook", start=3000),
    ]
    simulator = Simulator(seed=21, start=time.time() - 3000, rate=10.0, incidents=incidents)
    events = [*simulator.catalog(), *simulator.traffic(TRACES)]
    assert simulator.now < time.time()
    kinds = Counter(e["type"] for e in events)
    broken = [corrupt(next(e for e in events if e["type"] == "trace"), how, msgspec.json.encode)
              for how in sorted(CORRUPTIONS)]
    lines = [msgspec.json.encode(e) for e in events] + broken
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in range(0, len(lines), 500):
            answer = client.post("/v1/events", content=b"\n".join(lines[i:i + 500]),
                                 headers={"content-type": "application/x-ndjson"})
            assert answer.status_code == 200, answer.text
    traces = [e for e in events if e["type"] == "trace"]
    held: dict[tuple[str, str], tuple[str, float]] = {}  # what each index holds of each document
    versions_taken_in = 0  # index events bringing an index a version it did not hold: the lags observed
    for e in (e for e in events if e["type"] == "index"):
        key, current = (e["index"], e["doc_id"]), held.get((e["index"], e["doc_id"]))
        if current is None or e["indexed_at"] >= current[1]:
            versions_taken_in += e.get("chunks") != 0 and (current is None or current[0] != e["version"])
            held[key] = (e["version"], e["indexed_at"])
    return {
        "versions_taken_in": versions_taken_in,
        "kinds": kinds,
        "rejected": Counter(CORRUPTIONS.values()),
        "injected": simulator.injected,
        "leaked_traces": set(simulator.leaked_traces),
        "trace_ids": {e["trace_id"] for e in traces},
        "started": time.time(),
        "input_tokens": sum(e["usage"]["input_tokens"] for e in traces),
        "retrieval_lists": sum(1 for e in traces for r in e["retrievals"] if r["passages"]),
        "empty_bm25": sum(1 for e in traces for r in e["retrievals"] if r["retriever"] == "bm25" and not r["passages"]),
        "abstained": sum(1 for e in traces if e["answer"]["abstained"]),
    }


def wait_for_scraped_events(prometheus, expected: float, timeout: float = 60) -> None:
    """Until Prometheus's last scrape shows ``expected`` events in all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = prometheus.query("sum(ragmon_events_total)")
        if result and float(result[0]["value"][1]) == expected:
            return
        time.sleep(0.5)
    pytest.fail(f"Prometheus never saw {expected:.0f} events")


@pytest.fixture(scope="module")
def promql(served, prometheus):
    """A query function against a Prometheus that has scraped everything that was fed."""
    url, facts = served
    prometheus.write_config(targets=[url.removeprefix("http://")])
    prometheus.reload()
    wait_for_scraped_events(prometheus, sum(facts["kinds"].values()))

    def query(expr: str) -> dict[tuple, float]:
        return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in prometheus.query(expr)}

    def scalar(expr: str) -> float:
        values = list(query(expr).values())
        assert len(values) == 1, (expr, values)
        return values[0]

    query.scalar = scalar
    return query


def test_events_and_rejections(promql, served):
    _, facts = served
    for kind, n in facts["kinds"].items():
        assert promql.scalar(f'ragmon_events_total{{source="http",type="{kind}"}}') == n
    for reason, n in facts["rejected"].items():
        assert promql.scalar(f'ragmon_rejected_events_total{{source="http",reason="{reason}"}}') == n
    assert promql.scalar('time() - ragmon_last_event_timestamp_seconds{type="trace"}') < 300
    assert promql.scalar("ragmon_build_info") == 1


def test_answers_and_no_answer_spike(promql, served):
    _, facts = served
    assert promql.scalar("sum(ragmon_answers_total)") == facts["kinds"]["trace"]
    assert promql.scalar('sum(ragmon_answers_total{outcome="abstained"})') == facts["abstained"]
    ratio = promql('sum by (tenant, index) (ragmon_answers_total{outcome="abstained"})'
                   ' / sum by (tenant, index) (ragmon_answers_total)')
    spiking = ratio.pop((("index", "support-kb"), ("tenant", "initech")))
    assert spiking > 0.3 and all(r < 0.15 for r in ratio.values())


def test_permission_violations_exactly_as_injected(promql, served):
    _, facts = served
    leaked = facts["injected"][("leak_context", "globex", "handbook")]
    assert leaked > 50
    context = promql('sum by (tenant, index) (ragmon_permission_violations_total{stage="context"}) > 0')
    assert context == {(("index", "handbook"), ("tenant", "globex")): leaked}
    assert promql.scalar('sum(ragmon_permission_violations_total{stage="candidates"})') == leaked
    assert promql.scalar("sum(ragmon_unknown_acl_passages_total)") == 0


def test_exemplars_link_leaks_and_latencies_to_their_traces(promql, served, prometheus):
    """Prometheus scrapes OpenMetrics (its default first choice) and stores the exemplars: the
    leak counter's point at traces the simulator made leak, the latency histogram's at its traces."""
    _, facts = served
    window = (facts["started"] - 3600, time.time() + 60)
    leaks = prometheus.query_exemplars('ragmon_permission_violations_total{stage="context"}', *window)
    linked = {e["labels"]["trace_id"] for series in leaks for e in series["exemplars"]}
    assert linked and linked <= facts["leaked_traces"]
    assert {series["seriesLabels"]["tenant"] for series in leaks} == {"globex"}
    latencies = prometheus.query_exemplars('ragmon_stage_latency_seconds_bucket{stage="total"}', *window)
    assert {e["labels"]["trace_id"] for series in latencies for e in series["exemplars"]} <= facts["trace_ids"]
    assert latencies


def test_staleness_and_stale_passages(promql, served):
    _, facts = served
    assert promql.scalar('ragmon_index_stale_documents{index="policies"}') == facts["injected"][
        ("stale_docs", "acme", "policies")]
    assert promql.scalar('ragmon_index_stale_documents{index="handbook"}') == 0
    assert promql.scalar('ragmon_index_max_staleness_seconds{index="policies"}') > 60
    served_stale = promql('sum by (tenant, index) (ragmon_stale_passages_served_total{stage="context"}) > 0')
    assert list(served_stale) == [(("index", "policies"), ("tenant", "acme"))]
    # a re-embedding of the versions an index holds takes no source change in: no lag
    assert 0 < facts["versions_taken_in"] < facts["kinds"]["index"]
    assert promql.scalar("sum(ragmon_index_lag_seconds_count)") == facts["versions_taken_in"]


def test_embedding_models_and_mixed_results(promql):
    assert promql.scalar('ragmon_index_embedding_models{index="handbook"}') == 2
    assert promql.scalar('ragmon_index_embedding_models{index="support-kb"}') == 1
    mixed = promql("sum by (tenant, index) (ragmon_mixed_embedding_results_total) > 0")
    assert list(mixed) == [(("index", "handbook"), ("tenant", "acme"))]


def test_retrieval_scores_and_empty_lists(promql, served):
    _, facts = served
    assert promql.scalar("sum(ragmon_retrieval_top_score_count)") == facts["retrieval_lists"]
    assert promql.scalar('sum(ragmon_empty_retrievals_total{retriever="bm25"})') == facts["empty_bm25"]
    low = promql.scalar("sum(ragmon_low_score_retrievals_total)")
    assert 0 < low < 0.1 * facts["retrieval_lists"]  # the trailing 5th percentile, once 500 scores are seen
    retrievers = promql("count by (retriever) (ragmon_retrieval_top_score_count)")
    assert {dict(k)["retriever"] for k in retrievers} == {"bm25", "vector"}


def test_context_quality_signals(promql):
    assert promql.scalar("sum(ragmon_unsupported_citations_total)") == 0  # the simulator cites its context
    assert promql.scalar("sum(ragmon_duplicate_slots_total)") == 0


def test_rephrases_feedback_latency_tokens_cost(promql, served):
    _, facts = served
    injected = sum(n for key, n in facts["injected"].items() if key[0] == "rephrase")
    # every injected rephrase is found; the rest are callers who by chance asked a similar question
    # again within two minutes, which is a rephrase too (the simulator does not count those)
    assert injected <= promql.scalar("sum(ragmon_rephrases_total)") <= injected * 1.3
    assert promql.scalar("sum(ragmon_feedback_total)") == facts["kinds"]["feedback"]
    assert promql('ragmon_feedback_total{tenant="unknown"}') == {}  # every feedback joined its trace
    assert promql.scalar('sum(ragmon_stage_latency_seconds_count{stage="total"})') == facts["kinds"]["trace"]
    p50 = promql.scalar('histogram_quantile(0.5, sum by (le) (ragmon_stage_latency_seconds_bucket{stage="generate"}))')
    assert 0.5 < p50 < 2.5  # the simulator's generate step is lognormal around 0.8 s
    assert promql.scalar('sum(ragmon_tokens_total{direction="input"})') == facts["input_tokens"]
    assert promql.scalar("sum(ragmon_cost_usd_total)") > 0



def test_every_dashboard_panel_query_returns_data(promql, served, prometheus):
    """Runs last: it sends a second wave of traffic while Prometheus scrapes, so rates are not flat."""
    from ragmon.exporters.dashboard import DASHBOARDS, panel_queries

    url, _ = served
    simulator = Simulator(seed=22, start=time.time() - 600, rate=10.0)
    lines = [msgspec.json.encode(e) for e in (*simulator.catalog(), *simulator.traffic(1500))]
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in range(0, len(lines), 100):
            client.post("/v1/events", content=b"\n".join(lines[i:i + 100]),
                        headers={"content-type": "application/x-ndjson"}).raise_for_status()
            time.sleep(0.1)
    # until Prometheus has scraped the end of the wave (rates then span it)
    wait_for_scraped_events(prometheus, scraped(url, "ragmon_events_total"))
    # as Grafana fills the variables in: "All" is .*, and the job Prometheus scrapes ragmon as
    # (tests/services/harness.py); this Prometheus gives its targets no namespace, which .* matches
    grafana = {"$namespace": ".*", "$job": "ragmon", "$tenant": ".*", "$index": ".*", "$__rate_interval": "5m"}
    # another deployment picked: every panel must drop this one's data (only `or vector(0)` zeros stay)
    elsewhere = {**grafana, "$job": "ragmon-elsewhere"}
    empty, leaked = [], []
    for make in DASHBOARDS:
        dashboard = make().to_json()
        for title, expr in panel_queries(dashboard):
            values = [float(s["value"][1]) for s in prometheus.query(fill(expr, grafana))]
            if not any(not math.isnan(v) for v in values):
                empty.append(f"{dashboard['title']} / {title}: {fill(expr, grafana)}")
            others = [float(s["value"][1]) for s in prometheus.query(fill(expr, elsewhere))]
            if any(v != 0 and not math.isnan(v) for v in others):
                leaked.append(f"{dashboard['title']} / {title}: {fill(expr, elsewhere)}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert not leaked, "panels showing a deployment that is not selected:\n" + "\n".join(leaked)


def fill(expr: str, values: dict[str, str]) -> str:
    for variable, value in values.items():
        expr = expr.replace(variable, value)
    return expr
