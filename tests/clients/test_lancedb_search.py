"""A vector-store-only app on LanceDB (lancedb 0.40.0) traced by OpenLLMetry's opentelemetry-instrumentation-lancedb
0.62.4, run for real into `ragmon serve` (batch and simple span processors, protobuf and JSON). Upstream, the
instrumentation records no result: its `lancedb.search` span carries `db.system` and `db.operation` alone and ends
before the query runs. So no trace is read, and none is dropped in silence: each is counted under its scope, the
first of each shape is listed by `GET /api/v1/unread` and `ragmon otlp unread` with the vector-store dialect as the
closest, what it lacked saying the instrumentation records no results, a digest equal to what the SDK itself made
of its spans, and no value of the app's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import httpx

from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan
from tests.ragmon_process import scraped
from tests.test_unread import wait_until

SCOPE = "opentelemetry.instrumentation.lancedb"


def test_lancedb_searches_are_counted_and_explained_as_reporting_no_results(ragmon_servers, tmp_path):
    plan = standard_plan("lance")
    before = {export: scraped(server.url, "ragmon_otlp_traces_without_retrieval_total", scope=SCOPE)
              for export, server in ragmon_servers.items()}
    run = run_app("lancedb_app", ragmon_servers, plan, tmp_path)
    report = run.report
    traces = {t["trace_id"]: t for t in report["traces"]}
    first = {t["trace_id"] for t in report["traces"] if t["first_of_its_shape"]}
    assert len(traces) == 1 + len(plan["questions"]) and len(first) == 2
    # the searches found documents: LanceDB returned them to the app, and its spans hold none of them
    assert all(len(q["found"]) == 2 for q in report["questions"])
    for spans in report["spans"].values():
        assert [(s["scope"], s["scope_version"]) for s in spans] == [(SCOPE, "0.62.4")]
        assert set(spans[0]["attributes"]) == {"db.system", "db.operation"}
    for export, server in ragmon_servers.items():
        grown = before[export] + len(traces)
        assert wait_until(lambda s=server, n=grown: scraped(s.url, "ragmon_otlp_traces_without_retrieval_total",
                                                            scope=SCOPE) == n, timeout=60), export
        assert scraped(server.url, "ragmon_otlp_traces_read_total", scope=SCOPE) == 0, export
        listed = httpx.get(f"{server.url}/api/v1/unread", params={"scope": SCOPE}, timeout=10).json()["unread"]
        rows = {row["trace_id"]: row for row in listed if row["trace_id"] in traces}
        assert set(rows) == first, export  # the other searches are shaped like the first: only counted
        for trace_id, row in rows.items():
            spans = report["spans"][trace_id]
            where = f"{export}, {traces[trace_id]['shape']}"
            assert (row["missing"], row["tenant"], row["scope"], row["spans"]) == (
                "retrieval", plan["tenant"], SCOPE, 1), where
            digest = row["digest"]
            assert digest["scopes"] == [{"name": SCOPE, "version": "0.62.4", "spans": 1}], where
            made = Counter((s["name"], s["kind"]) for s in spans)
            assert {(g["name"], g["kind"]): g["spans"] for g in digest["groups"]} == made, where
            assert [sorted(g["keys"]) for g in digest["groups"]] == [spans[0]["keys"]], where
            assert row["closest_dialect"] == "vector_store", where
            assert row["lacked"].startswith("results: opentelemetry-instrumentation-lancedb records none"), where
            assert "gen_ai.retrieval.documents" in row["lacked"], where
            kept = json.dumps(row)
            assert not [text for text in report["texts"] if text in kept], where
    server = next(iter(ragmon_servers.values()))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
           "RAGMON_DATABASE__URL": server.env["RAGMON_DATABASE__URL"]}
    shown = subprocess.run([sys.executable, "-m", "ragmon", "otlp", "unread", "--scope", SCOPE, "-o", "json"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    listed = {r["trace_id"]: r for r in json.loads(shown.stdout)["unread"]}
    assert set(listed) >= first
    assert all("records none" in listed[trace_id]["lacked"] for trace_id in first)
