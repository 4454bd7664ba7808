"""An instrumentation ragmon has no dialect for, run for real: LangChain traced by LangSmith's own
OpenTelemetry export (langsmith 0.15.1, pinned in constraints.txt), through the SDK's OTLP/HTTP
exporters (batch and simple, protobuf and JSON) into `ragmon serve`. No trace is read, none is
dropped in silence: each is counted under its scope, the first of each shape is listed by
`GET /api/v1/unread` and `ragmon otlp unread` with a digest equal to what the SDK itself made of
its spans (names, kinds, attribute keys), the closest dialect and what it lacked, and no value."""

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

SCOPE = "langsmith"


def test_langsmith_traces_are_counted_and_explained_never_read(ragmon_servers, tmp_path):
    plan = standard_plan("langsmith")
    before = {export: scraped(server.url, "ragmon_otlp_traces_without_retrieval_total", scope=SCOPE)
              for export, server in ragmon_servers.items()}
    run = run_app("langsmith_app", ragmon_servers, plan, tmp_path)
    report = run.report
    asked = {q["trace_id"]: q for q in report["questions"]}
    first = {q["trace_id"] for q in report["questions"] if q.get("first_of_its_shape")}
    assert len(asked) == 5 and len(first) == 2
    for spans in report["spans"].values():
        assert {s["scope"] for s in spans} == {SCOPE}, "LangSmith names its tracer `langsmith`"
    for export, server in ragmon_servers.items():
        grown = before[export] + len(asked)
        assert wait_until(lambda s=server, n=grown: scraped(s.url, "ragmon_otlp_traces_without_retrieval_total",
                                                            scope=SCOPE) == n, timeout=60), export
        assert scraped(server.url, "ragmon_otlp_traces_read_total", scope=SCOPE) == 0, export
        listed = httpx.get(f"{server.url}/api/v1/unread", params={"scope": SCOPE}, timeout=10).json()["unread"]
        rows = {row["trace_id"]: row for row in listed if row["trace_id"] in asked}
        assert set(rows) == first, export  # the others are shaped like these: only counted
        for trace_id, row in rows.items():
            spans = report["spans"][trace_id]
            where = f"{export}, {asked[trace_id]['question']!r}"
            assert (row["missing"], row["tenant"], row["scope"], row["spans"]) == (
                "retrieval", plan["tenant"], SCOPE, len(spans)), where
            digest = row["digest"]
            assert digest["scopes"] == [{"name": SCOPE, "version": "", "spans": len(spans)}], where
            made = Counter((s["name"], s["kind"]) for s in spans)
            assert {(g["name"], g["kind"]): g["spans"] for g in digest["groups"]} == made, where
            for group in digest["groups"]:
                keys = set().union(*(s["keys"] for s in spans if (s["name"], s["kind"]) == (group["name"],
                                                                                           group["kind"])))
                assert set(group["keys"]) == keys and not group["keys_omitted"], where
            operations = {s["operation"] for s in spans}
            assert row["closest_dialect"] == "genai" and "embeddings" in operations, where
            assert row["lacked"].startswith("a span of gen_ai.operation.name retrieval (the gen_ai.operation.name "
                                            "of its spans: "), where
            assert "embeddings" in row["lacked"], where
            kept = json.dumps(row)
            assert not [text for text in report["texts"] if text in kept], where
            assert asked[trace_id]["question"] not in kept and plan["caller"]["id"] not in kept, where
    server = next(iter(ragmon_servers.values()))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
           "RAGMON_DATABASE__URL": server.env["RAGMON_DATABASE__URL"]}
    shown = subprocess.run([sys.executable, "-m", "ragmon", "otlp", "unread", "--scope", SCOPE, "-o", "json"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert {r["trace_id"] for r in json.loads(shown.stdout)["unread"]} >= first
