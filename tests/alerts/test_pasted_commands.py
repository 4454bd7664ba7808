"""The commands an alert gives a person to paste into a shell (``findings_command``) and the read
API query beside it (``findings_query``), for hostile tenant and index names: by the rules, as the
real promtool renders them, and by the direct push of a real ``ragmon serve``. Each command is run
in bash with a stub ``ragmon`` on ``PATH`` that records its arguments: no payload runs, and the stub
gets each value whole, as one argument. What the push carries names tenants, indexes, traces and
documents by their shown ids (docs/sampling.md), never an e-mail address or a key they hold."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, quote_plus, urlsplit

import httpx
import pytest
import yaml
from click.testing import CliRunner
from pydantic import SecretStr

from ragmon.alerts.rules import LEAK_CANDIDATES, LEAK_CONTEXT, alert_rules
from ragmon.monitor.app.cli import main
from ragmon.monitor.config.alerting import AlertsConfig
from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from tests.alerts.webhook_receiver import WebhookReceiver
from tests.ragmon_process import RagmonServer

pytestmark = pytest.mark.integration  # promtool; a real `ragmon serve`

PAYLOAD = "pwned"  # every payload below creates a file of this name in the working directory
HOSTILE = [
    f"acme'$(touch {PAYLOAD})'",
    f"acme`touch {PAYLOAD}`",
    f"acme$(touch {PAYLOAD})",
    f"acme; touch {PAYLOAD}",
    f"acme\ntouch {PAYLOAD}",
    f"'''; touch {PAYLOAD}; '''",
    f"\"$(touch {PAYLOAD})\"",
    f"acme' ; touch {PAYLOAD} ; echo '",
    f"$1 ${{IFS}} \\$(touch {PAYLOAD}) \\",
    f"-x --tenant=evil & touch {PAYLOAD} #",
]
SIGNAL = "permission_violation"
CALLER_KEY = "alerts-paste-test-key-0123456789"


def expected_links(tenant: str, index: str) -> dict[str, str]:
    """The contract, written out here rather than taken from ragmon: each value quoted by
    ``shlex.quote`` in the command and URL-encoded (as Go's ``urlquery``) in the query."""
    return {"findings_query": f"/api/v1/findings?signal={SIGNAL}&tenant={quote_plus(tenant, safe='')}"
                              f"&index={quote_plus(index, safe='')}",
            "findings_command": f"ragmon findings list --signal {SIGNAL} --tenant {shlex.quote(tenant)} "
                                f"--index {shlex.quote(index)} --since 2h"}


def run_pasted(command: str, scratch: Path) -> list[list[str]]:
    """``command`` run by bash in an empty directory, with a ``ragmon`` on ``PATH`` that only
    records its arguments; the argument lists it was called with. Fails if a payload ran."""
    bin_dir, work = scratch / "bin", scratch / "work"
    bin_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    calls = scratch / "calls.jsonl"
    calls.unlink(missing_ok=True)
    stub = bin_dir / "ragmon"
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "with open(os.environ['RAGMON_STUB_CALLS'], 'a') as out:\n"
                    "    out.write(json.dumps(sys.argv[1:]) + '\\n')\n")
    stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "RAGMON_STUB_CALLS": str(calls), "HOME": str(work)}
    done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=30)
    assert not (work / PAYLOAD).exists(), f"the payload ran: {command!r}"
    assert sorted(p.name for p in work.iterdir()) == [], f"{command!r} left {list(work.iterdir())}"
    assert done.returncode == 0, (command, done.stderr)
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def findings_argv(tenant: str, index: str) -> list[str]:
    return ["findings", "list", "--signal", SIGNAL, "--tenant", tenant, "--index", index, "--since", "2h"]


def promql_string(value: str) -> str:
    """A label value as a PromQL string literal (Go's escapes, which JSON's are a subset of)."""
    return json.dumps(value, ensure_ascii=False)


def test_the_rules_quote_every_label_value_in_the_command_and_encode_it_in_the_query(tmp_path):
    rules = tmp_path / "rules.yml"
    rendered = CliRunner().invoke(main, ["rules", "render", "--out", str(rules)])
    assert rendered.exit_code == 0, rendered.output
    pairs = [(tenant, HOSTILE[-1 - n]) for n, tenant in enumerate(HOSTILE)]  # a hostile index too
    series, expected = [], {LEAK_CONTEXT: [], LEAK_CANDIDATES: []}
    summaries = {r.name: r.summary for r in alert_rules(AlertsConfig()) if r.name in expected}
    described = {r.name: (r.description, r.runbook(AlertsConfig())) for r in alert_rules(AlertsConfig())}
    for stage, name, severity in (("context", LEAK_CONTEXT, "critical"), ("candidates", LEAK_CANDIDATES, "warning")):
        for tenant, index in pairs:
            series.append({"series": f'ragmon_permission_violations_total{{namespace="prod",job="ragmon",'
                                     f'stage="{stage}",tenant={promql_string(tenant)},index={promql_string(index)}}}',
                           "values": "0 0 0 1+0x10"})
            summary = summaries[name].replace("{{ $labels.tenant }}", tenant).replace("{{ $labels.index }}", index)
            description, runbook = described[name]
            expected[name].append({
                "exp_labels": {"severity": severity, "namespace": "prod", "job": "ragmon", "tenant": tenant,
                               "index": index},
                "exp_annotations": {"summary": summary, "description": description, "runbook_url": runbook,
                                    **expected_links(tenant, index)}})
    suite = {"rule_files": [str(rules)], "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": series,
                        "alert_rule_test": [{"eval_time": "5m", "alertname": name, "exp_alerts": alerts}
                                            for name, alerts in expected.items()]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(suite, sort_keys=False, allow_unicode=True, width=1000))
    tested = subprocess.run(["promtool", "test", "rules", str(tmp_path / "tests.yml")], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout + tested.stderr

    # what promtool found Prometheus renders, pasted into bash
    for tenant, index in pairs:
        query = urlsplit(expected_links(tenant, index)["findings_query"])
        assert parse_qs(query.query) == {"signal": [SIGNAL], "tenant": [tenant], "index": [index]}
        command = expected_links(tenant, index)["findings_command"]
        assert run_pasted(command, tmp_path) == [findings_argv(tenant, index)]


def catalog_for(tenant: str, doc_id: str, index: str, now: float) -> list[dict]:
    return [{"type": "document", "doc_id": doc_id, "version": "v1", "modified_at": now - 3600, "tenant": tenant,
             "acl": ["group:hr"]},
            {"type": "index", "index": index, "doc_id": doc_id, "version": "v1", "indexed_at": now - 3000,
             "embedding_model": "e5@1"}]


def leak_in(tenant: str, index: str, trace_id: str, doc_id: str, now: float) -> dict:
    passage = {"id": f"{doc_id}#3", "doc_id": doc_id, "doc_version": "v1", "score": 0.8, "text": "Salaries.",
               "acl": ["group:hr"]}
    return {"type": "trace", "trace_id": trace_id, "time": now, "tenant": tenant, "query": "what do they earn",
            "index": {"name": index, "version": "v1"}, "caller": {"id": "u-1", "groups": ["staff"]},
            "retrievals": [{"retriever": "vector", "passages": [passage]}], "answer": {"text": "Here."}}


def test_a_pushed_alert_quotes_its_command_and_names_everything_by_its_shown_id(tmp_path):
    email, key = "jane.doe@example.com", "AKIAIOSFODNN7EXAMPLE"
    leaks = [  # (tenant, index, trace id, document id)
        (HOSTILE[0], "handbook", "trace-1", "payroll-2026"),
        (f"{email} {key}'$(touch {PAYLOAD})'", f"hr {email}", f"trace {email} {key}", f"doc {key}"),
        (HOSTILE[4], HOSTILE[5], "trace-3", "payroll-2027"),
    ]
    shown = Redactor(RedactionConfig(caller_key=SecretStr(CALLER_KEY))).shown_id
    with WebhookReceiver() as receiver, \
            RagmonServer(tmp_path, RAGMON_ALERTS__WEBHOOK_URL=f"{receiver.url}/direct",
                         RAGMON_REDACTION__CALLER_KEY=CALLER_KEY) as ragmon:
        now = time.time()
        for tenant, index, trace_id, doc_id in leaks:
            events = [*catalog_for(tenant, doc_id, index, now), leak_in(tenant, index, trace_id, doc_id, now)]
            answer = httpx.post(f"{ragmon.url}/v1/events", json=events, timeout=10)
            assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text
        pushed = leak_alerts(receiver, len(leaks))

    # first what a person would do with them: paste each command
    for alert in pushed:
        labels = alert["labels"]
        assert run_pasted(alert["annotations"]["findings_command"], tmp_path / "paste") == [
            findings_argv(labels["tenant"], labels["index"])]
    assert shown(leaks[1][0]) != leaks[1][0]  # the redactor fired: its shown id is not the raw tenant
    by_tenant = {alert["labels"]["tenant"]: alert for alert in pushed}
    for tenant, index, trace_id, doc_id in leaks:
        alert = by_tenant[shown(tenant)]
        annotations = alert["annotations"]
        assert alert["labels"]["index"] == shown(index)
        assert annotations["trace_ids"] == shown(trace_id) and annotations["doc_ids"] == shown(doc_id)
        assert f"{shown(tenant)}/{shown(index)}" in annotations["summary"]
        assert {k: annotations[k] for k in ("findings_query", "findings_command")} == expected_links(
            shown(tenant), shown(index))
        query = parse_qs(urlsplit(annotations["findings_query"]).query)
        assert query == {"signal": [SIGNAL], "tenant": [shown(tenant)], "index": [shown(index)]}
    everything = json.dumps([body for _, _, body in receiver.received])
    assert email not in everything and key not in everything
    assert "jane.doe" not in everything and "example.com" not in everything


def leak_alerts(receiver: WebhookReceiver, count: int, timeout: float = 30) -> list[dict]:
    """The first ``count`` distinct leak alerts the webhook received (by fingerprint), waiting up
    to ``timeout`` seconds for them."""
    seen: dict[str, dict] = {}

    def enough(body: dict) -> bool:
        for alert in body.get("alerts", []):
            if alert["labels"]["alertname"] == LEAK_CONTEXT:
                seen.setdefault(alert["fingerprint"], alert)
        return len(seen) >= count

    receiver.wait_for("/direct", enough, timeout)
    return list(seen.values())[:count]
