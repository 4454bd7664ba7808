"""No user id, trace id, document or passage id, query, passage or answer text reaches a metric
label, an INFO log line, or an error message: marker strings go in, and are looked for everywhere
they must not be."""

from __future__ import annotations

import json
import logging

from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.http import build_app
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings

NOW = 1_796_000_000.0
MARK = "zq9marker"


def marked_events() -> list[dict]:
    passage = {"id": f"{MARK}-passage#1", "score": 0.8, "doc_id": f"{MARK}-doc", "doc_version": f"{MARK}-v",
               "text": f"{MARK} passage text", "acl": [f"group:{MARK}-group"], "embedding_model": f"{MARK}-model"}
    trace = {"type": "trace", "trace_id": f"{MARK}-trace", "time": NOW - 5, "tenant": "acme",
             "conversation_id": f"{MARK}-conversation", "caller": {"id": f"{MARK}-user", "groups": ["staff"]},
             "query": f"{MARK} what is the secret?", "index": {"name": "policies", "version": f"{MARK}-iv"},
             "retrievals": [{"retriever": "bm25", "passages": [passage]}], "context": [passage],
             "answer": {"text": f"{MARK} answer", "citations": [f"{MARK}-citation"]}}
    return [
        {"type": "document", "doc_id": f"{MARK}-doc", "tenant": "acme", "version": f"{MARK}-v2",
         "modified_at": NOW - 50, "acl": [f"user:{MARK}-other"]},
        {"type": "index", "index": "policies", "doc_id": f"{MARK}-doc", "version": f"{MARK}-v",
         "indexed_at": NOW - 100, "embedding_model": f"{MARK}-model"},
        trace,  # a leak (the catalog ACL excludes the caller) and a stale passage
        dict(trace, trace_id=f"{MARK}-trace-2", time=NOW - 4, query=f"{MARK} what is the secret again?"),
        {"type": "feedback", "trace_id": f"{MARK}-trace", "kind": "comment", "comment": f"{MARK} comment"},
        # rejected ones, whose details must not quote them either
        dict(trace, trace_id=f"{MARK}-" + "x" * 300),
        dict(trace, time=f"{MARK}-time"),
        dict(trace, type=f"{MARK}-type"),
        {"type": "feedback", "trace_id": f"{MARK}-trace", "kind": f"{MARK}-kind"},
        dict(trace, caller={"id": f"{MARK}-user", "groups": f"{MARK}-groups"}),
    ]


def test_markers_reach_no_label_no_info_log_no_error(tmp_path, caplog):
    settings = load_settings(environ={
        "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
        "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
    })
    with caplog.at_level(logging.INFO):
        runtime = build_runtime(settings, clock=lambda: NOW, registry=CollectorRegistry())
        client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready))
        json_body = {"content-type": "application/json"}
        answer = client.post("/v1/events", content=json.dumps(marked_events()), headers=json_body)
        broken = client.post("/v1/events", content=f'[{{"type": "trace", "query": "{MARK}"'.encode(), headers=json_body)
        metrics = client.get("/metrics").text
        runtime.close()
    assert answer.status_code == 200 and broken.status_code == 400
    result = answer.json()
    assert result["accepted"] == 5 and result["rejected"] == 5
    # the signals did fire on the marked data: a leak at context, a stale passage, a rephrase
    assert 'ragmon_permission_violations_total{index="policies",stage="context",tenant="acme"} 2.0' in metrics
    assert 'ragmon_stale_passages_served_total{index="policies",stage="context",tenant="acme"} 2.0' in metrics
    assert 'ragmon_rephrases_total{index="policies",tenant="acme"} 1.0' in metrics
    assert MARK not in metrics
    assert MARK not in answer.text and MARK not in broken.text
    info_and_above = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert MARK not in info_and_above
    # the dead-letter file is where rejected input is kept on purpose, raw: all six are there
    assert len(read_dead_letters(tmp_path / "dead.jsonl")) == 6
