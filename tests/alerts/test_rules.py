"""The rendered alert rules: valid for promtool, and each alert fires when it should and stays
quiet when it should not (``promtool test rules`` on the cases in rule_cases.yml), per deployment
(namespace and job)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ragmon.alerts.render import render_rules, rule_groups
from ragmon.alerts.rules import alert_rules
from ragmon.monitor.app.cli import main
from ragmon.monitor.config.alerting import AlertsConfig

CASES = Path(__file__).parent / "rule_cases.yml"
DEPLOYMENT = {"namespace", "job"}
# an aggregation operator and its grouping, if any: `sum by (a, b) (`, `max(`
AGGREGATION = re.compile(r"\b(sum|max|min|avg|count|group|topk|bottomk|quantile)\s*(?:by\s*\(([^)]*)\))?\s*\(")
pytestmark = pytest.mark.integration  # promtool, from the Prometheus package


def annotations_for(name: str, labels: dict[str, str], config: AlertsConfig) -> dict[str, str]:
    """What the rule of ``name`` and ``labels['severity']`` annotates, with its templates filled:
    plain ``{{ $labels.x }}`` by the label's value, the findings links as the push fills them
    (tests/alerts/test_pasted_commands.py holds them to shlex.quote's rules for hostile values)."""
    [rule] = [r for r in alert_rules(config) if r.name == name and r.severity == labels["severity"]]
    [rendered] = [r for r in rule_groups(config)["groups"][0]["rules"]
                  if r["alert"] == name and r["labels"]["severity"] == labels["severity"]]
    links = rule.finding_links_for(labels)
    fill = lambda text: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)  # noqa: E731
    return {key: links.get(key) or fill(value) for key, value in rendered["annotations"].items()}


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True)


def test_every_alert_fires_when_it_should_and_stays_quiet_when_it_should_not(tmp_path):
    config = AlertsConfig()
    (tmp_path / "rules.yml").write_text(render_rules(config))
    checked = promtool("check", "rules", str(tmp_path / "rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    fired, quiet, files = set(), set(), []
    for number, suite in enumerate(yaml.safe_load(CASES.read_text())["suites"]):
        for group in suite["tests"]:
            for check in group["alert_rule_test"]:
                for alert in check["exp_alerts"]:
                    alert["exp_annotations"] = annotations_for(check["alertname"], alert["exp_labels"], config)
                    fired.add((check["alertname"], alert["exp_labels"]["severity"]))
                if not check["exp_alerts"]:
                    quiet.add(check["alertname"])
        files.append(tmp_path / f"tests-{number}.yml")
        files[-1].write_text(yaml.safe_dump({"rule_files": ["rules.yml"], **suite}, sort_keys=False))
    assert fired == {(r.name, r.severity) for r in alert_rules(config)}
    assert quiet == {r.name for r in alert_rules(config)}
    tested = promtool("test", "rules", *map(str, files))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert (tested.stdout + tested.stderr).count("SUCCESS") == len(files)


def test_a_broken_expectation_fails_promtool(tmp_path):
    config = AlertsConfig()
    (tmp_path / "rules.yml").write_text(render_rules(config))
    suite = yaml.safe_load(CASES.read_text())["suites"][0]
    group = suite["tests"][0]
    group["alert_rule_test"] = [{"eval_time": "5m", "alertname": "RagmonPermissionLeakContext", "exp_alerts": []}]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "tests": [group],
                                                        "evaluation_interval": suite["evaluation_interval"]}))
    assert promtool("test", "rules", str(tmp_path / "tests.yml")).returncode != 0


def test_thresholds_come_from_the_config_and_the_cli_renders_them(tmp_path):
    config = AlertsConfig(stale_warning_hours=6, stale_critical_hours=12, dashboard_url="https://grafana.test/d/x")
    rules = {(r["alert"], r["labels"]["severity"]): r for r in rule_groups(config)["groups"][0]["rules"]}
    assert rules[("RagmonIndexStale", "warning")]["expr"].endswith("> 21600")
    assert rules[("RagmonIndexStale", "critical")]["expr"].endswith("> 43200")
    assert all(r["annotations"]["dashboard_url"] == "https://grafana.test/d/x" for r in rules.values())
    assert rules[("RagmonIndexStale", "warning")]["annotations"]["runbook_url"].endswith("alerts.md#ragmonindexstale")
    out = tmp_path / "ragmon-rules.yml"
    env = {"RAGMON_ALERTS__STALE_WARNING_HOURS": "6", "RAGMON_ALERTS__STALE_CRITICAL_HOURS": "12"}
    result = CliRunner().invoke(main, ["rules", "render", "--out", str(out)], env=env)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["groups"][0]["rules"][2]["expr"].endswith("> 21600")
    assert promtool("check", "rules", str(out)).returncode == 0
    printed = CliRunner().invoke(main, ["rules", "render"])
    assert printed.exit_code == 0 and printed.output == render_rules(AlertsConfig())


def test_every_aggregation_keeps_the_deployment():
    """Each deployment alerts on its own: every aggregation groups by namespace and job, save the
    one clause that fires when no deployment at all reported a trace."""
    for rule in alert_rules(AlertsConfig()):
        for match in AGGREGATION.finditer(rule.expr):
            operator, grouping = match.groups()
            if grouping is None:
                assert rule.expr[match.end():].startswith("absent_over_time("), (rule.name, rule.expr)
                continue
            kept = {label.strip() for label in grouping.split(",")}
            assert kept >= DEPLOYMENT, (rule.name, match.group(0))


def _deployment(labels: dict[str, str]) -> tuple[str, str] | None:
    return (labels["namespace"], labels["job"]) if labels.keys() >= DEPLOYMENT else None


def test_every_alert_has_a_case_where_one_deployment_fires_and_another_does_not():
    """The cases must show that a busy deployment does not hide a silent or leaking one: for every
    alert, a check where the input holds two deployments and the alert names only one of them."""
    series_labels = re.compile(r'(\w+)="([^"]*)"')
    shown = set()
    for suite in yaml.safe_load(CASES.read_text())["suites"]:
        for group in suite["tests"]:
            present = {_deployment(dict(series_labels.findall(s["series"]))) for s in group["input_series"]} - {None}
            for check in group["alert_rule_test"]:
                fired = {_deployment(a["exp_labels"]) for a in check["exp_alerts"]}
                if len(present) >= 2 and fired and None not in fired and fired < present:
                    shown.add(check["alertname"])
    assert shown == {r.name for r in alert_rules(AlertsConfig())}
