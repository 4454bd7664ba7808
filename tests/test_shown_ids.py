"""Shown ids end to end (docs/sampling.md, "Shown ids"): a running ``ragmon serve`` shows a trace
id, a tenant and a document id that hold an e-mail address and an AWS key the same way in the
findings, the OpenMetrics exemplars and labels, the stored sample and its log, and never raw; two
trace ids that redact to the same text stay two traces."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.storage.store import make_engine
from tests.ragmon_process import RagmonServer

INGEST, READ = "ingest-token-0123456789", "read-token-0123456789"
KEY = "shown-ids-caller-key-0123456789"
SHOWN = Redactor(RedactionConfig(caller_key=SecretStr(KEY))).shown_id

TRACE_ID = "alice.liddell@example.com:AKIAIOSFODNN7EXAMPLE"
TENANT = "bob.jones@example.org/ASIAY34FZKBOKMUTVV7A"
DOC_ID = "notes-carol.danvers@example.net"
RAW = ("alice.liddell", "AKIAIOSFODNN7EXAMPLE", "bob.jones", "ASIAY34FZKBOKMUTVV7A", "carol.danvers")


def _server(tmp_path) -> RagmonServer:
    return RagmonServer(tmp_path, RAGMON_HTTP__TOKEN=INGEST, RAGMON_HTTP__READ_TOKEN=READ,
                        RAGMON_REDACTION__CALLER_KEY=KEY)


def _post(server: RagmonServer, events: list[dict]) -> None:
    answer = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(e) for e in events),
                        headers={"content-type": "application/x-ndjson", "authorization": f"Bearer {INGEST}"})
    assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text


def _leak(trace_id: str, tenant: str, doc_id: str, now: float, query: str) -> dict:
    """A trace whose context holds a passage of ``doc_id``, which the catalog keeps from the caller."""
    passage = {"id": f"{doc_id}#1", "doc_id": doc_id, "doc_version": "v1", "score": 0.9}
    return {"type": "trace", "trace_id": trace_id, "time": now - 5, "tenant": tenant, "query": query,
            "caller": {"id": "u-1", "groups": ["staff"]}, "index": {"name": "hr"},
            "retrievals": [{"retriever": "vector", "passages": [passage]}], "context": [passage],
            "latency_ms": {"retrieve": 40.0, "total": 900.0}}


def _document(doc_id: str, tenant: str, now: float) -> dict:
    return {"type": "document", "doc_id": doc_id, "tenant": tenant, "version": "v1", "modified_at": now - 3600,
            "acl": ["group:payroll"]}


def test_ids_holding_an_email_and_a_key_are_shown_alike_everywhere_and_never_raw(tmp_path):
    now = time.time()
    trace, tenant, doc = SHOWN(TRACE_ID), SHOWN(TENANT), SHOWN(DOC_ID)
    assert trace.startswith("[EMAIL]:[SECRET]~k") and tenant.startswith("[EMAIL]/[SECRET]~k")
    with _server(tmp_path) as server:
        _post(server, [_document(DOC_ID, TENANT, now), _leak(TRACE_ID, TENANT, DOC_ID, now, "what does she earn")])
        read = {"authorization": f"Bearer {READ}"}

        answer = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "permission_violation"}, headers=read)
        assert answer.status_code == 200, answer.text
        assert not [raw for raw in RAW if raw in answer.text]
        findings = answer.json()["findings"]
        assert {f["stage"] for f in findings} == {"candidates", "context"}
        for finding in findings:
            assert (finding["trace_id"], finding["tenant"], finding["index"]) == (trace, tenant, "hr")
            assert finding["passage_ids"] == [SHOWN(f"{DOC_ID}#1")]
            assert finding["documents"] == [{"doc_id": doc, "version": "v1"}]

        exposition = httpx.get(f"{server.url}/metrics", headers={"accept": "application/openmetrics-text"}).text
        assert not [raw for raw in RAW if raw in exposition]
        leaks = [line for line in exposition.splitlines()
                 if line.startswith("ragmon_permission_violations_total{") and 'stage="context"' in line]
        assert len(leaks) == 1 and f'tenant="{tenant}"' in leaks[0], leaks
        assert f'# {{trace_id="{trace}"}} 1.0 ' in leaks[0]  # the exemplar names the trace as the findings do
        assert any(line.startswith("ragmon_stage_latency_seconds_bucket{") and f'# {{trace_id="{trace}"}}' in line
                   for line in exposition.splitlines())

        # the trace's findings and its sample, under one key
        view = httpx.get(f"{server.url}/api/v1/traces/{quote(trace, safe='')}", headers=read)
        assert view.status_code == 200, view.text
        assert not [raw for raw in RAW if raw in view.text]
        assert view.json()["sample"] is not None and len(view.json()["findings"]) == 2
        log = server.log_path.read_text()
    assert not [raw for raw in RAW if raw in log]

    sample = SampleStore(make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")).find_one(trace)
    assert sample is not None and sample.tenant == tenant and "permission_violation" in sample.strata
    assert (sample.payload["trace_id"], sample.payload["tenant"]) == (trace, tenant)
    assert sample.payload["context"][0]["id"] == SHOWN(f"{DOC_ID}#1") and sample.payload["context"][0]["doc_id"] == doc
    assert not [raw for raw in RAW if raw in json.dumps(sample.payload)]


def test_two_trace_ids_that_redact_alike_are_two_samples_each_with_its_findings(tmp_path):
    now = time.time()
    ids = ["collide-alice@example.com", "collide-bob@example.org"]
    assert len({Redactor(RedactionConfig(), require_key=False).redact(i) for i in ids}) == 1  # both [EMAIL]
    with _server(tmp_path) as server:
        _post(server, [_document("payroll", "acme", now),
                       _leak(ids[0], "acme", "payroll", now, "what does the ceo earn"),
                       _leak(ids[1], "acme", "payroll", now, "list every salary in finance")])
        read = {"authorization": f"Bearer {READ}"}
        findings = httpx.get(f"{server.url}/api/v1/findings", params={"signal": "permission_violation"},
                             headers=read).json()["findings"]
        views = {shown: httpx.get(f"{server.url}/api/v1/traces/{quote(shown, safe='')}", headers=read).json()
                 for shown in map(SHOWN, ids)}
    samples = SampleStore(make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")).find(tenant="acme")
    assert sorted(s.trace_id for s in samples) == sorted(map(SHOWN, ids))  # two samples, not one
    assert {f["trace_id"] for f in findings} == {s.trace_id for s in samples}  # a finding names its sample's key
    for shown, view in views.items():
        assert view["sample"] is not None and view["sample"]["trace"]["trace_id"] == shown
        assert {f["trace_id"] for f in view["findings"]} == {shown} and len(view["findings"]) == 2
