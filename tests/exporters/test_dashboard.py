"""The Grafana dashboards as built: Grafana's schema (the foundation SDK's typed model reads every
field back), chained namespace/job/tenant/index variables, every query filtered by them, stat
thresholds that colour a leak red, and a grid nothing overflows. Their PromQL runs against a real
Prometheus in test_prometheus_scrape.py."""

from __future__ import annotations

import json
import re

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as schema

from ragmon.exporters.dashboard import DASHBOARDS, panel_queries, render_dashboards
from ragmon.exporters.grafana import Panel
from ragmon.exporters.metrics import BY_NAME
from ragmon.monitor.config.alerting import AlertsConfig

RENDERED = {make.__name__: make().to_json() for make in DASHBOARDS}
# a metric name and what follows it: its matchers, if any
SELECTOR = re.compile(r"\b(ragmon_[a-z_]+)(\{[^}]*\})?")
SUFFIXES = ("_bucket", "_count", "_sum")


def variables(dashboard: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def spec_labels(metric: str) -> tuple[str, ...]:
    if metric in BY_NAME:
        return BY_NAME[metric].labels
    base = next(metric.removesuffix(s) for s in SUFFIXES if metric.endswith(s))
    return BY_NAME[base].labels


def colour(thresholds: dict, value: float) -> str:
    """The colour Grafana gives ``value``: the last step whose value it meets (the first is -inf)."""
    chosen = thresholds["steps"][0]["color"]
    for step in thresholds["steps"][1:]:
        if value >= step["value"]:
            chosen = step["color"]
    return chosen


def stat(title: str) -> dict:
    [panel] = [p for d in RENDERED.values() for p in d["panels"] if p["title"] == title and p["type"] == "stat"]
    return panel["fieldConfig"]["defaults"]["thresholds"]


@pytest.mark.parametrize("name", RENDERED)
def test_the_json_is_what_grafanas_typed_schema_reads_back(name):
    dashboard = RENDERED[name]
    assert json.loads(json.dumps(schema.Dashboard.from_json(dashboard), cls=JSONEncoder)) == dashboard
    assert dashboard["schemaVersion"] >= 39 and "${DS_" not in json.dumps(dashboard)


@pytest.mark.parametrize("name", RENDERED)
def test_deployment_variables_narrow_each_other_and_default_to_all(name):
    found = variables(RENDERED[name])
    assert found["datasource"]["type"] == "datasource" and found["datasource"]["query"] == "prometheus"
    expected = ["datasource", "namespace", "job"] + (["tenant", "index"] if "tenant" in found else [])
    assert list(found) == expected
    before = []
    for name_ in expected[1:]:
        variable = found[name_]
        query = variable["query"]["query"]
        assert query.startswith("label_values(") and query.endswith(f", {name_})")
        assert all(f'{earlier}=~"${earlier}"' in query for earlier in before), query
        assert variable["includeAll"] and variable["multi"] and variable["allValue"] == ".*"
        assert variable["current"] == {"text": "All", "value": "$__all"}
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        before.append(name_)


def test_the_tenant_dashboards_keep_their_tenant_and_index_variables():
    assert {name for name, d in RENDERED.items() if "tenant" in variables(d)} == {
        "retrieval_quality", "permissions_and_freshness", "labeling_queue"}


@pytest.mark.parametrize("name", RENDERED)
def test_every_query_is_filtered_by_the_variables_its_metric_has(name):
    dashboard = RENDERED[name]
    present = set(variables(dashboard)) - {"datasource"}
    for title, expr in panel_queries(dashboard):
        selectors = SELECTOR.findall(expr)
        assert selectors, (title, expr)
        for metric, matchers in selectors:
            wanted = {"namespace", "job"} | (present & set(spec_labels(metric)))
            missing = [label for label in wanted if f'{label}=~"${label}"' not in matchers]
            assert not missing, f"{title}: {metric} is not filtered by {missing}"


def test_every_stat_has_thresholds_and_any_leak_is_red():
    stats = [p for d in RENDERED.values() for p in d["panels"] if p["type"] == "stat"]
    assert len(stats) == 4
    assert all(p["fieldConfig"]["defaults"]["thresholds"]["mode"] == "absolute" for p in stats)
    leaks = stat("Leaks into context (24 h)")
    assert colour(leaks, 0) == "green"
    assert colour(leaks, 0.001) == colour(leaks, 1) == colour(leaks, 40) == "red"
    answers = stat("Answers per second")
    assert colour(answers, 0) == "red" and colour(answers, 0.003) == "green"
    alerts = AlertsConfig()
    staleness = stat("Stalest index")
    assert colour(staleness, alerts.stale_warning_hours * 3600 - 1) == "green"
    assert colour(staleness, alerts.stale_warning_hours * 3600) == "orange"
    assert colour(staleness, alerts.stale_critical_hours * 3600) == "red"
    no_answer = stat("No-answer share")
    assert colour(no_answer, 0.05) == "green"
    assert colour(no_answer, alerts.no_answer_min_ratio) == "orange" and colour(no_answer, 0.5) == "red"


def test_a_stat_without_thresholds_is_refused():
    with pytest.raises(ValueError, match="thresholds"):
        Panel("Bare", [("sum(ragmon_answers_total)", "x")], "stat").build(1)


@pytest.mark.parametrize("name", RENDERED)
def test_panels_fit_the_grid_without_overlapping(name):
    taken: set[tuple[int, int]] = set()
    panels = RENDERED[name]["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                 for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells


def test_time_series_show_their_legend_and_tables_read_instant_rows():
    panels = [p for d in RENDERED.values() for p in d["panels"]]
    for panel in panels:
        if panel["type"] == "timeseries":
            assert panel["options"]["legend"]["showLegend"] is True
        if panel["type"] == "table":
            assert all(t["instant"] and t["format"] == "table" for t in panel["targets"])
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_the_scheduled_job_is_not_confused_with_prometheus_job_label():
    """Prometheus labels every target with ``job``; the scheduler's job is ``scheduled_job``."""
    labeling = RENDERED["labeling_queue"]
    for title, expr in panel_queries(labeling):
        if "ragmon_job_" in expr:
            assert "by (scheduled_job" in expr and "by (job" not in expr, title


def test_rendering_is_stable():
    assert render_dashboards() == render_dashboards()
    assert set(render_dashboards()) == {"ragmon-overview.json", "ragmon-retrieval.json",
                                        "ragmon-permissions-freshness.json", "ragmon-labeling.json"}
