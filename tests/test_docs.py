"""Reference docs are generated from the code; the committed files must match what it generates."""

from __future__ import annotations

from pathlib import Path

from ragmon.exporters.metrics import reference_markdown as metrics_reference
from ragmon.monitor.config.settings import reference_markdown as config_reference

DOCS = Path(__file__).parent.parent / "docs"


def test_metrics_reference_is_current():
    assert (DOCS / "metrics.md").read_text() == metrics_reference(), (
        "docs/metrics.md is out of date: python -m ragmon.exporters.metrics > docs/metrics.md")


def test_configuration_reference_is_current():
    assert (DOCS / "configuration.md").read_text() == config_reference(), (
        "docs/configuration.md is out of date: python -m ragmon.monitor.config.settings > docs/configuration.md")


def test_every_alert_has_a_runbook_section():
    from ragmon.alerts.rules import alert_rules
    from ragmon.monitor.config.alerting import AlertsConfig

    text = (DOCS / "alerts.md").read_text()
    headings = {line[3:].strip() for line in text.splitlines() if line.startswith("## ")}
    assert {rule.name for rule in alert_rules(AlertsConfig())} <= headings


def test_the_charts_rules_and_dashboards_are_what_the_code_generates():
    from ragmon.alerts.render import render_rules
    from ragmon.exporters.dashboard import render_dashboards
    from ragmon.monitor.config.alerting import AlertsConfig

    chart = DOCS.parent / "helm" / "ragmon"
    assert (chart / "rules" / "ragmon-rules.yaml").read_text() == render_rules(AlertsConfig()), (
        "helm/ragmon/rules is out of date: ragmon rules render --out helm/ragmon/rules/ragmon-rules.yaml")
    committed = {p.name: p.read_text() for p in (chart / "dashboards").glob("*.json")}
    assert committed == render_dashboards(), "helm/ragmon/dashboards is out of date: ragmon dashboard render"


def test_the_command_reference_names_every_command_and_every_exit_status():
    from ragmon.monitor.app import cli_output
    from ragmon.monitor.app.cli import main

    text = (DOCS / "cli.md").read_text()
    missing = [name for name in main.commands if f"`{name}" not in text]
    assert not missing, f"docs/cli.md does not name: {missing}"
    statuses = {getattr(cli_output, name) for name in ("OK", "FOUND", "USAGE", "SOURCE_STOPPED", "PORT_IN_USE")}
    assert statuses == {int(line.split("|")[1]) for line in text.split("## Exit status")[1].splitlines()
                        if line.startswith("| ") and line.split("|")[1].strip().isdigit()}


def test_the_benchmark_targets_in_the_docs_are_those_make_bench_checks():
    from bench.targets import reference_markdown

    assert reference_markdown() in (DOCS / "performance.md").read_text(), (
        "docs/performance.md's targets are out of date: python -m bench.targets")
