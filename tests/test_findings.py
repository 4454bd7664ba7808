"""Findings end to end: a leak posted to a running ``ragmon serve`` is explained by the read API
(``GET /api/v1/findings``, ``GET /api/v1/traces/{id}``) and by ``ragmon findings list`` and
``ragmon trace show`` on the same database, with its rule in words and without the caller's id."""

from __future__ import annotations

import json
import time

import httpx
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from tests.ragmon_process import RagmonServer

INGEST, READ = "ingest-token-0123456789", "read-token-0123456789"
CALLER = "alice.liddell@example.com"


def _events(now: float) -> list[dict]:
    """The catalog says payroll-2026 is for group:payroll; alice (group:staff) gets two of its
    passages, one of them in the context; a third passage carries its own ACL that excludes her;
    a fourth is fine."""
    def passage(pid: str, doc: str, score: float, **extra) -> dict:
        return {"id": pid, "doc_id": doc, "doc_version": "v2", "score": score, **extra}

    return [
        {"type": "document", "doc_id": "payroll-2026", "tenant": "acme", "version": "v2",
         "modified_at": now - 3600, "acl": ["group:payroll"]},
        {"type": "document", "doc_id": "handbook", "tenant": "acme", "version": "v2",
         "modified_at": now - 3600, "acl": ["tenant:acme"]},
        {"type": "trace", "trace_id": "leak-1", "time": now - 5, "tenant": "acme",
         "caller": {"id": CALLER, "groups": ["staff"]},
         "index": {"name": "hr"}, "query": "what does the ceo earn",
         "retrievals": [{"retriever": "vector", "passages": [
             passage("payroll-2026#1", "payroll-2026", 0.9), passage("payroll-2026#2", "payroll-2026", 0.8),
             passage("board-notes#4", "board-notes", 0.7, acl=["group:board"]),
             passage("handbook#3", "handbook", 0.6)]}],
         "context": [passage("payroll-2026#1", "payroll-2026", 0.9), passage("handbook#3", "handbook", 0.6)],
         "answer": {"text": "The CEO earns ...", "citations": ["payroll-2026#1", "handbook#9"]},
         "latency_ms": {"retrieve": 40.0, "total": 900.0}},
        {"type": "trace", "trace_id": "quiet-1", "time": now - 4, "tenant": "acme",
         "caller": {"id": "bob", "groups": ["staff"]}, "index": {"name": "hr"}, "query": "holidays",
         "retrievals": [{"retriever": "vector", "passages": [passage("handbook#3", "handbook", 0.6)]}],
         "context": [passage("handbook#3", "handbook", 0.6)],
         "answer": {"text": "25 days", "citations": ["handbook#3"]}},
    ]


def test_a_leak_is_explained_by_the_read_api_and_the_cli(tmp_path):
    now = time.time()
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ) as server:
        body = "\n".join(json.dumps(e) for e in _events(now))
        answer = httpx.post(f"{server.url}/v1/events", content=body, headers={
            "content-type": "application/x-ndjson", "authorization": f"Bearer {INGEST}"})
        assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text
        read = {"authorization": f"Bearer {READ}"}

        # guarded by the read token: neither nothing nor the ingest token opens it
        assert httpx.get(f"{server.url}/api/v1/findings").status_code == 401
        assert httpx.get(f"{server.url}/api/v1/findings",
                         headers={"authorization": f"Bearer {INGEST}"}).status_code == 401

        leaks = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "permission_violation"}, headers=read)
        assert leaks.status_code == 200, leaks.text
        assert CALLER not in leaks.text and "alice" not in leaks.text and "ceo" not in leaks.text.lower()
        by_stage = {f["stage"]: f for f in leaks.json()["findings"]}
        assert set(by_stage) == {"candidates", "context"}
        candidates, context = by_stage["candidates"], by_stage["context"]
        assert candidates["trace_id"] == context["trace_id"] == "leak-1"
        assert candidates["tenant"] == "acme" and candidates["index"] == "hr"
        assert candidates["caller"].startswith("caller:")
        assert candidates["passage_ids"] == ["payroll-2026#1", "payroll-2026#2", "board-notes#4"]
        assert context["passage_ids"] == ["payroll-2026#1"]
        assert context["documents"] == [{"doc_id": "payroll-2026", "version": "v2"}]
        pseudonym = "user:" + candidates["caller"]
        assert context["reason"] == (f"catalog ACL [group:payroll] excludes the caller "
                                     f"[group:staff, tenant:acme, {pseudonym}]")
        assert candidates["reason"].endswith("(and 1 other rule(s))")  # board-notes: its own ACL

        cited = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "unsupported_citation"}, headers=read)
        assert [(f["trace_id"], f["passage_ids"]) for f in cited.json()["findings"]] == [("leak-1", ["handbook#9"])]

        bad = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "leak"}, headers=read)
        assert bad.status_code == 400 and "signal" in bad.json()["error"]
        assert httpx.get(f"{server.url}/api/v1/findings", params={"limt": "3"}, headers=read).status_code == 400

        # newest first, a page at a time
        first = httpx.get(f"{server.url}/api/v1/findings", params={"limit": 1}, headers=read).json()
        second = httpx.get(f"{server.url}/api/v1/findings", params={"limit": 1, "cursor": first["next_cursor"]},
                           headers=read).json()
        assert second["findings"][0]["id"] < first["findings"][0]["id"]

        trace = httpx.get(f"{server.url}/api/v1/traces/leak-1", headers=read)
        assert trace.status_code == 200
        signals = sorted(f["signal"] for f in trace.json()["findings"])
        assert signals == ["not_judged", "permission_violation", "permission_violation", "unsupported_citation"]
        # board-notes, not in the catalog and without times of its own, could not be judged for
        # freshness: the trace says so rather than nothing
        [blind] = [f for f in trace.json()["findings"] if f["signal"] == "not_judged"]
        assert blind["reason"] == "not judged: freshness of 1 passage(s) (1 of documents the catalog does not know)"
        assert blind["passage_ids"] == ["board-notes#4"] and blind["stage"] is None
        sample = trace.json()["sample"]  # a leak is always sampled, redacted
        assert "permission_violation" in sample["strata"] and CALLER not in json.dumps(sample)
        assert httpx.get(f"{server.url}/api/v1/traces/quiet-1", headers=read).status_code in (200, 404)
        assert httpx.get(f"{server.url}/api/v1/traces/nobody", headers=read).status_code == 404

        # an OpenMetrics scrape links the leak and the latency to the trace; the classic one cannot
        exposition = httpx.get(f"{server.url}/metrics", headers={"accept": "application/openmetrics-text"})
        assert exposition.headers["content-type"].startswith("application/openmetrics-text")
        lines = exposition.text.splitlines()
        assert any(line.startswith("ragmon_permission_violations_total{") and 'stage="context"' in line
                   and '# {trace_id="leak-1"} 1.0 ' in line for line in lines)
        assert any(line.startswith("ragmon_unsupported_citations_total{") and '# {trace_id="leak-1"}' in line
                   for line in lines)
        assert any(line.startswith("ragmon_stage_latency_seconds_bucket{") and 'stage="total"' in line
                   and '# {trace_id="leak-1"} 0.9' in line for line in lines)
        classic = httpx.get(f"{server.url}/metrics").text  # no exemplar: no trace_id="…" label anywhere
        assert 'trace_id="' not in classic and "leak-1" not in classic

        # the pages are guarded as the API is
        assert httpx.get(f"{server.url}/").status_code == 401
        assert httpx.get(f"{server.url}/traces/leak-1").status_code == 401
        page = httpx.get(f"{server.url}/", headers=read)
        assert page.status_code == 200 and 'href="/traces/leak-1"' in page.text and CALLER not in page.text
        assert httpx.get(f"{server.url}/traces/nobody", headers=read).status_code == 404

        # the CLI reads the database serve writes, while it runs
        env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
        runner = CliRunner()
        listed = runner.invoke(main, ["findings", "list", "--signal", "permission_violation", "-o", "json"], env=env)
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout)["findings"] == leaks.json()["findings"]
        shown = runner.invoke(main, ["trace", "show", "leak-1"], env=env)
        assert shown.exit_code == 0, shown.output
        assert "catalog ACL [group:payroll] excludes the caller" in shown.stdout and CALLER not in shown.stdout
        assert "not judged: freshness of 1 passage(s)" in " ".join(shown.stdout.split())
        assert runner.invoke(main, ["trace", "show", "nobody"], env=env).exit_code == 1


def test_read_commands_refuse_a_directory_without_a_database(tmp_path):
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'nothing' / 'ragmon.db'}"}
    for command in (["findings", "list"], ["trace", "show", "leak-1"]):
        result = CliRunner().invoke(main, command, env=env)
        assert result.exit_code == 2 and "no ragmon database at" in result.output, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "nothing").exists()


def test_a_caller_with_hundreds_of_long_groups_gets_a_bounded_reason_and_trace_show_full_lists_them(tmp_path):
    """A finding's reason names the first few principals of each list and counts the rest; the
    whole lists are read by ``ragmon trace show --full`` only."""
    now = time.time()
    groups = [f"team-{i:03d}-" + "platform-engineering-" * 9 for i in range(400)]  # 198 characters each
    passage = {"id": "board-notes#4", "doc_id": "board-notes", "score": 0.7, "acl": ["group:board"]}
    event = {"type": "trace", "trace_id": "many-groups-1", "time": now - 5, "tenant": "acme",
             "caller": {"id": "u-7", "groups": groups}, "index": {"name": "hr"}, "query": "board minutes",
             "retrievals": [{"retriever": "vector", "passages": [passage]}], "context": [passage]}
    with RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ) as server:
        posted = httpx.post(f"{server.url}/v1/events", json=event, headers={"authorization": f"Bearer {INGEST}"})
        assert posted.status_code == 200 and posted.json()["rejected"] == 0, posted.text
        answer = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "permission_violation", "limit": 100},
                           headers={"authorization": f"Bearer {READ}"})
    assert answer.status_code == 200 and len(answer.content) < 8000, len(answer.content)
    findings = answer.json()["findings"]
    assert {f["stage"] for f in findings} == {"candidates", "context"}
    for finding in findings:
        reason = finding["reason"]
        assert len(reason) <= 1024
        assert reason.startswith("passage ACL [group:board] excludes the caller [group:team-000-")
        assert "… and 397 more]" in reason, reason  # 400 groups, the tenant and the user: 5 shown

    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    runner = CliRunner()
    shown = runner.invoke(main, ["trace", "show", "many-groups-1", "--full", "-o", "json"], env=env)
    assert shown.exit_code == 0, shown.output
    for finding in json.loads(shown.stdout)["findings"]:
        if finding["signal"] == "not_judged":  # the passage's freshness: no principals named
            assert finding["principals"] == {}
            continue
        caller = finding["principals"]["caller"]
        assert caller["omitted"] == 0 and len(caller["values"]) == 402
        assert [p for p in caller["values"] if p.startswith("group:")] == sorted(f"group:{g}" for g in groups)
        assert finding["principals"]["acl"] == {"values": ["group:board"], "omitted": 0}
    table = runner.invoke(main, ["trace", "show", "many-groups-1", "--full"], env=env)
    assert table.exit_code == 0, table.output
    assert all(f"group:{group}" in table.stdout for group in groups)
    brief = runner.invoke(main, ["trace", "show", "many-groups-1"], env=env)
    assert brief.exit_code == 0 and f"group:{groups[5]}" not in brief.stdout  # without --full: the reason only
