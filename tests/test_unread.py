"""Traces ragmon cannot read, on a real `ragmon serve` fed by the OpenTelemetry SDK's own OTLP
exporters (protobuf and JSON): each is counted by its instrumentation scope, listed with the closest
dialect and what it lacked by `GET /api/v1/unread` (read tokens and tenants as the findings API)
and `ragmon otlp unread`, said once in the log, and shown as a share per scope on the status page;
the same for traces read without a caller or a context. No attribute value reaches any of them."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from tests.ragmon_process import RagmonServer, scraped

INGEST, READ, ACME_READ = "ingest-token-0123456789", "read-token-0123456789", "acme-read-token-0123456789"
SECRET = "carol.danvers@example.com asked: what is the payroll of the board?"  # in values only
QUICK = {"RAGMON_OTLP__ASSEMBLY_WAIT_SECONDS": "0.5", "RAGMON_OTLP__ROOT_GRACE_SECONDS": "0.2"}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def provider_to(server: RagmonServer, exporter_class, tenant: str | None) -> TracerProvider:
    resource = {"service.name": "rag-app", **({"ragmon.tenant": tenant} if tenant else {})}
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter_class(endpoint=f"{server.url}/v1/traces",
                                                                   headers=bearer(INGEST))))
    return provider


def langsmith_trace(provider: TracerProvider, retriever: str = "VectorStoreRetriever") -> str:
    """Spans shaped as LangSmith's OpenTelemetry export makes them for a LangChain chain: no dialect
    ragmon reads, though its GenAI operation names are there (a retriever's is `embeddings`)."""
    tracer = provider.get_tracer("langsmith", "0.15.1")
    with tracer.start_as_current_span("RunnableSequence", kind=SpanKind.SERVER, attributes={
            "langsmith.span.kind": "chain", "gen_ai.operation.name": "chain", "gen_ai.prompt": SECRET}) as root, \
            tracer.start_as_current_span(retriever, attributes={
                "langsmith.span.kind": "retriever", "gen_ai.operation.name": "embeddings",
                "gen_ai.completion": json.dumps({"documents": [{"page_content": SECRET}]})}):
        pass
    return format(root.get_span_context().trace_id, "032x")


def openinference_trace(provider: TracerProvider, caller: bool, documents: bool) -> str:
    tracer = provider.get_tracer("openinference.instrumentation.langchain", "0.1.80")
    retrieved = {"retrieval.documents.0.document.id": "doc-1", "retrieval.documents.0.document.content": SECRET,
                 "retrieval.documents.0.document.score": 0.5} if documents else {}
    with tracer.start_as_current_span("RetrievalQA", attributes={
            "openinference.span.kind": "CHAIN", "input.value": SECRET, "output.value": SECRET,
            **({"user.id": "u-1", "metadata": json.dumps({"groups": ["staff"]})} if caller else {})}) as root, \
            tracer.start_as_current_span("VectorStoreRetriever", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": SECRET, **retrieved}):
        pass
    return format(root.get_span_context().trace_id, "032x")


def wait_until(check, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def ragmon(server: RagmonServer, *args: str) -> subprocess.CompletedProcess:
    """The `ragmon` command beside the server, reading its database."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")},
           "RAGMON_DATABASE__URL": server.env["RAGMON_DATABASE__URL"]}
    return subprocess.run([sys.executable, "-m", "ragmon", *args], env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("exporter_class", [ProtobufSpanExporter, JsonSpanExporter], ids=["protobuf", "json"])
def test_traces_ragmon_cannot_read_are_counted_listed_and_said(tmp_path, exporter_class):
    env = {**QUICK, "RAGMON_HTTP__TOKEN": INGEST, "RAGMON_HTTP__READ_TOKEN": READ, "ACME_READ_TOKEN": ACME_READ,
           "RAGMON_HTTP__READ_TOKENS": '{"env:ACME_READ_TOKEN": ["acme"]}'}
    with RagmonServer(tmp_path, **env) as server:
        acme, globex, nobody = (provider_to(server, exporter_class, t) for t in ("acme", "globex", None))
        unread = [langsmith_trace(acme) for _ in range(3)]  # one shape: one kept, two only counted
        other_shape = langsmith_trace(acme, retriever="BM25Retriever")
        no_tenant = langsmith_trace(nobody)
        without_caller = openinference_trace(globex, caller=False, documents=True)
        without_context = openinference_trace(acme, caller=True, documents=False)
        complete = openinference_trace(acme, caller=True, documents=True)
        for provider in (acme, globex, nobody):
            provider.shutdown()

        langsmith = "langsmith"
        langchain = "openinference.instrumentation.langchain"
        assert wait_until(lambda: scraped(server.url, "ragmon_otlp_traces_read_total") == 3
                          and scraped(server.url, "ragmon_otlp_traces_without_retrieval_total") == 5)
        metrics = {(name, tuple(sorted(labels.items()))): scraped(server.url, name, **labels) for name, labels in (
            ("ragmon_otlp_traces_without_retrieval_total", {"scope": langsmith}),
            ("ragmon_otlp_traces_read_total", {"scope": langchain}),
            ("ragmon_otlp_traces_incomplete_total", {"scope": langchain, "missing": "caller"}),
            ("ragmon_otlp_traces_incomplete_total", {"scope": langchain, "missing": "context"}),
            ("ragmon_otlp_unread_digests_total", {"outcome": "stored"}),
            ("ragmon_otlp_unread_digests_total", {"outcome": "repeated"}))}
        assert list(metrics.values()) == [5, 3, 1, 1, 5, 2]

        listed = httpx.get(f"{server.url}/api/v1/unread", headers=bearer(READ)).json()
        rows = {(r["trace_id"], r["missing"]): r for r in listed["unread"]}
        assert set(rows) == {(unread[0], "retrieval"), (other_shape, "retrieval"), (no_tenant, "retrieval"),
                             (without_caller, "caller"), (without_context, "context")}
        assert complete not in {trace_id for trace_id, _ in rows}
        first = rows[(unread[0], "retrieval")]
        assert (first["tenant"], first["scope"], first["closest_dialect"], first["spans"]) == (
            "acme", langsmith, "genai", 2)
        assert first["lacked"] == ("a span of gen_ai.operation.name retrieval (the gen_ai.operation.name of its "
                                   "spans: another value, embeddings)")
        assert first["digest"]["scopes"] == [{"name": langsmith, "version": "0.15.1", "spans": 2}]
        assert {(g["name"], g["kind"]) for g in first["digest"]["groups"]} == {
            ("RunnableSequence", "server"), ("VectorStoreRetriever", "internal")}
        assert "gen_ai.completion" in {k for g in first["digest"]["groups"] for k in g["keys"]}
        assert rows[(no_tenant, "retrieval")]["tenant"] is None
        assert rows[(without_caller, "caller")]["tenant"] == "globex"
        assert rows[(without_caller, "caller")]["closest_dialect"] == "openinference"
        assert "user.id" in rows[(without_caller, "caller")]["lacked"]
        assert "retrieval spans reported no document" in rows[(without_context, "context")]["lacked"]

        # filters, and what each token reads
        def ids(token: str, **params: str) -> set[tuple[str, str]]:
            answer = httpx.get(f"{server.url}/api/v1/unread", params=params, headers=bearer(token))
            assert answer.status_code == 200, answer.text
            return {(r["trace_id"], r["missing"]) for r in answer.json()["unread"]}

        assert ids(READ, scope=langsmith) == {(unread[0], "retrieval"), (other_shape, "retrieval"),
                                               (no_tenant, "retrieval")}
        assert ids(READ, missing="caller") == {(without_caller, "caller")}
        assert ids(ACME_READ) == {(unread[0], "retrieval"), (other_shape, "retrieval"), (without_context, "context")}
        assert ids(ACME_READ, tenant="globex") == set()  # another tenant's: an empty page, not an error
        assert ids(READ, tenant="globex") == {(without_caller, "caller")}
        page = httpx.get(f"{server.url}/api/v1/unread", params={"limit": "2"}, headers=bearer(READ)).json()
        rest = httpx.get(f"{server.url}/api/v1/unread", params={"cursor": str(page["next_cursor"])},
                         headers=bearer(READ)).json()
        assert len(page["unread"]) == 2 and len(rest["unread"]) == 3 and rest["next_cursor"] is None
        assert httpx.get(f"{server.url}/api/v1/unread", headers=bearer(INGEST)).status_code == 401
        bad = httpx.get(f"{server.url}/api/v1/unread", params={"missing": "answer"}, headers=bearer(READ))
        assert bad.status_code == 400 and bad.json()["error"].startswith("missing:")

        # the command, beside the server
        table = ragmon(server, "otlp", "unread", "--scope", langsmith)
        assert table.returncode == 0, table.stderr
        text = table.stdout.decode()
        assert "3 traces ragmon could not read or read in part" in text and unread[0] in text
        assert "1 × RunnableSequence (server)" in text and "genai" in text
        as_json = json.loads(ragmon(server, "otlp", "unread", "--missing", "context", "-o", "json").stdout)
        assert [(r["trace_id"], r["tenant"]) for r in as_json["unread"]] == [(without_context, "acme")]
        refused = ragmon(server, "otlp", "unread", "--since", "yesterday")
        assert refused.returncode == 2 and b"since:" in refused.stderr

        # the status page: the share read per scope
        status = httpx.get(f"{server.url}/", headers=bearer(READ)).text
        section = status.split("OTLP traces read, per instrumentation scope")[1].split("<h2>")[0]
        cells = re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", section)
        shares = {scope: re.findall(r'<td class="n">(?:<span class="bad">)?([^<]+)', rest) for scope, rest in cells}
        assert shares == {langsmith: ["5", "0", "0%", "5", "0", "0"], langchain: ["3", "3", "100%", "0", "1", "1"]}

        # said once per scope and thing missing, however many traces
        server.stop()
        log = server.log_path.read_text()
        said = [line for line in log.splitlines() if "WARNING ragmon.collectors.unread.watch" in line]
        assert [line.split(": OTLP traces of instrumentation scope ")[1].split(" (")[0] for line in said] == [
            f"{langsmith} yield no retrieval and go no further", f"{langchain} are read without a caller: their "
            "permission checks see the tenant only", f"{langchain} are read without a context: nothing reached "
            "the model that ragmon could judge"]

        # no value reached any surface, nor the stored rows (the samples hold the question, redacted)
        with sqlite3.connect(tmp_path / "ragmon.db") as db:
            stored = json.dumps(db.execute("select * from unread_trace").fetchall())
        assert len(json.loads(stored)) == 5
        for surface in (json.dumps(listed), text, status, log, stored):
            assert "payroll" not in surface and "carol.danvers" not in surface


# -- as a stranger would send them ------------------------------------------------------------------

ANSI = "\x1b[2J\x1b]8;;http://evil.example\x07click me\x1b]8;;\x07"
EMAIL_SCOPE = "instrumentation of mallory@example.com"
LONG_SCOPE = "s" * 10_000


def raw_request(scopes: list[str], spans_per_trace: int = 1, keys_on_first: int = 0) -> bytes:
    """An OTLP protobuf export, written by hand: one trace per scope, of ``spans_per_trace`` spans,
    the first holding ``keys_on_first`` attributes (each value the secret)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="ragmon.tenant").value.string_value = "acme"
    for t, scope in enumerate(scopes):
        scoped = resource.scope_spans.add()
        scoped.scope.name, scoped.scope.version = scope, f"{scope[:100]}-version"
        for i in range(spans_per_trace):
            span = scoped.spans.add()
            span.trace_id = (t + 1).to_bytes(16, "big")
            span.span_id = (i + 1).to_bytes(8, "big")
            if i:
                span.parent_span_id = (1).to_bytes(8, "big")
            span.name = f"{scope[:50]} span {i % 3000} {SECRET if i == 1 else ''}"
            span.kind = 1 + i % 5
            span.start_time_unix_nano = 1_700_000_000_000_000_000 + i
            span.end_time_unix_nano = 1_700_000_001_000_000_000
            for k in range(keys_on_first if i == 0 else 2):
                span.attributes.add(key=f"custom.{k}.value").value.string_value = SECRET
    return request.SerializeToString()


def test_hostile_scope_names_are_bounded_escaped_and_redacted_on_every_surface(tmp_path):
    import shutil

    env = {**QUICK, "RAGMON_LABELS__MAX_SCOPES": "2"}
    with RagmonServer(tmp_path, **env) as server:
        scopes = [ANSI, EMAIL_SCOPE, LONG_SCOPE, "the-fourth-scope", ""]
        answer = httpx.post(f"{server.url}/v1/traces", content=raw_request(scopes),
                            headers={"content-type": "application/x-protobuf"})
        assert answer.status_code == 200
        assert wait_until(lambda: scraped(server.url, "ragmon_otlp_traces_without_retrieval_total") == 5)
        exposition = httpx.get(f"{server.url}/metrics").text
        series = dict(re.findall(r'^ragmon_otlp_traces_without_retrieval_total\{scope="(.*)"\} ([0-9.]+)$', exposition,
                                 re.M))
        labels = list(series)
        assert len(labels) == 3 and series["other"] == "3.0"  # two under the cap, the rest together
        assert all(len(label) <= 128 for label in labels)
        for surface in (exposition,):
            assert "\x1b" not in surface and "mallory@example.com" not in surface and "s" * 200 not in surface
        promtool = shutil.which("promtool")
        assert promtool, "promtool comes with the test services (tests/services/install.sh)"
        checked = subprocess.run([promtool, "check", "metrics"], input=exposition.encode(), capture_output=True)
        assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr

        rows = httpx.get(f"{server.url}/api/v1/unread").json()["unread"]
        assert len(rows) == 5
        shown = {row["scope"] for row in rows}
        assert "\\x1b[2J\\x1b]8;;http://evil.example\\x07click me\\x1b]8;;\\x07" in shown
        assert any(s.startswith("instrumentation of [EMAIL]~k") for s in shown) and "(unnamed)" in shown
        long = next(s for s in shown if s.startswith("sss"))
        assert len(long) <= 128 and "…#" in long
        listed = json.dumps(rows)
        assert "\\u001b" not in listed and "mallory@example.com" not in listed and "payroll" not in listed

        table = ragmon(server, "otlp", "unread")
        assert table.returncode == 0 and b"\x1b" not in table.stdout and b"mallory@example.com" not in table.stdout
        status = httpx.get(f"{server.url}/").text
        assert "\x1b" not in status and "mallory@example.com" not in status
        server.stop()
        log = server.log_path.read_text()
        assert "\x1b" not in log and "mallory@example.com" not in log and "s" * 200 not in log


def test_a_trace_of_ten_thousand_spans_and_fifty_thousand_keys_is_explained_in_bounded_time_and_size(tmp_path):
    env = {**QUICK, "RAGMON_OTLP__MAX_SPANS_PER_TRACE": "10000"}
    with RagmonServer(tmp_path, **env) as server:
        body = raw_request(["big-instrumentation"], spans_per_trace=10_000, keys_on_first=50_000)
        started = time.monotonic()
        answer = httpx.post(f"{server.url}/v1/traces", content=body, headers={"content-type": "application/x-protobuf"},
                            timeout=60)
        assert answer.status_code == 200, answer.text
        assert wait_until(lambda: httpx.get(f"{server.url}/api/v1/unread").json()["unread"], timeout=30)
        took = time.monotonic() - started
        row = httpx.get(f"{server.url}/api/v1/unread").json()["unread"][0]
        digest = row["digest"]
        assert row["spans"] == digest["spans"] == 10_000 and took < 30
        assert len(json.dumps(digest)) <= 16 * 1024
        assert len(digest["groups"]) <= 32 and digest["groups_omitted"] + len(digest["groups"]) >= 32
        widest = max(digest["groups"], key=lambda g: g["keys_omitted"])
        assert widest["keys"] == ["custom.N.value"]  # 50,000 keys, one shape: positions are N
        assert "payroll" not in json.dumps(row)
        print(f"10,000 spans, 50,000 keys: posted and explained in {took:.1f} s; digest "
              f"{len(json.dumps(digest))} bytes")
