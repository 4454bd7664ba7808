"""What a ragmon dashboard is made of, built with Grafana's own typed builders
(``grafana-foundation-sdk``), so the rendered JSON follows Grafana's dashboard schema rather than
a hand-kept copy of it.

A :class:`Dashboard` is a title, a uid and a list of :class:`Panel` specs (time series, stats and
tables of PromQL); every dashboard gets the same variables: the Prometheus datasource (sidecar
provisioning does not resolve ``${DS_...}`` import inputs, so panels point at ``${datasource}``),
``namespace`` and ``job`` (which ragmon deployment), and, where it reads per tenant, ``tenant``
and ``index``. The queries themselves live in ``ragmon.exporters.dashboard``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as builders
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as schema
from grafana_foundation_sdk.models import prometheus as prometheus_schema

DATASOURCE = schema.DataSourceRef(type_val="prometheus", uid="${datasource}")
# the filters every query carries: the variables' values as regular expressions ("All" is .*)
DEPLOYMENT = 'namespace=~"$namespace", job=~"$job"'
TENANT_INDEX = f'{DEPLOYMENT}, tenant=~"$tenant", index=~"$index"'
# Grafana colours a threshold step from its value on (value >= step); a count is "any" from this on
ANY = 1e-9
GRID_COLUMNS = 24

# (variable, label_values() source): each narrows by the ones before it. Every ragmon process
# exports ragmon_build_info, so a deployment is listed before it has seen any traffic.
DEPLOYMENT_VARIABLES = (
    ("namespace", "label_values(ragmon_build_info, namespace)"),
    ("job", 'label_values(ragmon_build_info{namespace=~"$namespace"}, job)'),
)
TENANT_VARIABLES = (
    ("tenant", f"label_values(ragmon_answers_total{{{DEPLOYMENT}}}, tenant)"),
    ("index", f'label_values(ragmon_answers_total{{{DEPLOYMENT}, tenant=~"$tenant"}}, index)'),
)


@dataclass(frozen=True)
class Thresholds:
    """Colours of a stat by its value: ``base`` below the first step, then each (from, colour);
    ``meaning`` says why, in the panel's description and in docs/metrics.md."""

    meaning: str
    base: str
    steps: tuple[tuple[float, str], ...] = ()

    def build(self) -> builders.ThresholdsConfig:
        steps = [schema.Threshold(None, self.base), *(schema.Threshold(value, color) for value, color in self.steps)]
        return builders.ThresholdsConfig().mode(schema.ThresholdsMode.ABSOLUTE).steps(steps)


# the metrics whose series carry a trace id as an exemplar (exporters/prometheus.py)
WITH_EXEMPLARS = ("ragmon_permission_violations_total", "ragmon_stale_passages_served_total",
                  "ragmon_unsupported_citations_total", "ragmon_stage_latency_seconds")


@dataclass
class Panel:
    """One panel: its queries as (PromQL, legend); a stat needs :class:`Thresholds`."""

    title: str
    exprs: list[tuple[str, str]]
    kind: str = "timeseries"  # timeseries | stat | table
    unit: str = "short"
    description: str = ""
    width: int = 12
    height: int = 8
    thresholds: Thresholds | None = None

    def build(self, number: int):
        if self.kind == "stat" and self.thresholds is None:
            raise ValueError(f"stat panel {self.title!r} has no thresholds")
        panel = {"timeseries": _time_series, "stat": _stat, "table": table.Panel}[self.kind]()
        description = self.description or (self.thresholds.meaning if self.thresholds else "")
        panel = (panel.id(number).title(self.title).description(description).datasource(DATASOURCE)
                 .unit(self.unit).span(self.width).height(self.height))
        if self.thresholds is not None:
            panel = panel.thresholds(self.thresholds.build())
        for position, (expr, legend) in enumerate(self.exprs):
            query = (prometheus.Dataquery().ref_id(chr(ord("A") + position)).expr(expr).legend_format(legend)
                     .datasource(DATASOURCE))
            if self.kind == "table":  # one row per series, as it is now
                query = query.instant().format(prometheus_schema.PromQueryFormat.TABLE)
            elif self.kind == "timeseries" and any(name in expr for name in WITH_EXEMPLARS):
                query = query.exemplar(True)  # the trace behind a point, as a dot that links to it
            panel = panel.with_target(query)
        return panel


def _time_series() -> timeseries.Panel:
    legend = (common_builders.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST)
              .placement(common.LegendPlacement.BOTTOM))
    return timeseries.Panel().legend(legend)


def _stat() -> stat.Panel:
    # the colour is the message (a red leak count), so it fills the panel; the latest value is shown
    return (stat.Panel().color_mode(common.BigValueColorMode.BACKGROUND).graph_mode(common.BigValueGraphMode.AREA)
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))


@dataclass
class Dashboard:
    """A dashboard of ``panels``, laid out left to right in rows of 24 columns."""

    uid: str
    title: str
    description: str
    panels: list[Panel] = field(default_factory=list)
    by_tenant: bool = True  # tenant and index variables

    def build(self) -> schema.Dashboard:
        dashboard = (builders.Dashboard(self.title).uid(self.uid).description(self.description).tags(["ragmon"])
                     .editable().refresh("1m").time("now-6h", "now").timezone("browser").version(1))
        for variable in _variables(self.by_tenant):
            dashboard = dashboard.with_variable(variable)
        for number, panel in enumerate(self.panels, start=1):
            dashboard = dashboard.with_panel(panel.build(number))
        return dashboard.build()

    def to_json(self) -> dict[str, Any]:
        """The dashboard as Grafana reads it (JSON model)."""
        return json.loads(json.dumps(self.build(), cls=JSONEncoder))


def _variables(by_tenant: bool) -> list:
    variables: list = [builders.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
                       .hide(schema.VariableHide.DONT_HIDE)]
    for name, source in (*DEPLOYMENT_VARIABLES, *(TENANT_VARIABLES if by_tenant else ())):
        variables.append(
            builders.QueryVariable(name).label(name).datasource(DATASOURCE).query({"query": source, "refId": name})
            .refresh(schema.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(schema.VariableSort.ALPHABETICAL_ASC)
            # "All" is .* rather than a list of every value: it also matches series without the
            # label (no namespace outside Kubernetes) and keeps long lists out of the query
            .include_all(True).multi(True).all_value(".*").current(schema.VariableOption(text="All", value="$__all"))
            .hide(schema.VariableHide.DONT_HIDE))
    return variables


def render(dashboard: Dashboard) -> str:
    """Stable JSON text of ``dashboard`` (the same dashboard gives the same bytes)."""
    return json.dumps(dashboard.to_json(), indent=2, sort_keys=True) + "\n"
