"""LlamaIndex with OpenInference's privacy settings on (OPENINFERENCE_HIDE_INPUTS and
OPENINFERENCE_HIDE_OUTPUTS): the instrumentation writes "__REDACTED__" for every span's input and
output and for each retrieved document's content and metadata, and drops the reranker's output
documents. ragmon reads no question and no answer where they were hidden (outcome unknown, not
answered) and names the passages by their node ids, never by the placeholder's content hash."""

from __future__ import annotations

import time

from tests.clients.agreement import samples_of, snapshot
from tests.clients.conftest import run_app
from tests.clients.plans import standard_plan
from tests.ragmon_process import scraped


def test_llamaindex_with_hidden_inputs_and_outputs(ragmon_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true")  # the app's process inherits them
    monkeypatch.setenv("OPENINFERENCE_HIDE_OUTPUTS", "true")
    plan = standard_plan("llamaindex-hidden")
    run = run_app("llamaindex_app", ragmon_servers, plan, tmp_path)
    questions = {q["trace_id"]: q for q in run.report["questions"]}
    # the app's fifth question is asked under its own root span, which the app writes itself (not
    # the instrumentation): its question and answer are not hidden; the others' are
    shown = run.report["questions"][4]
    tenant = plan["tenant"]
    lists = [[d["id"] for d in q["lists"][0]] for q in questions.values()]
    for export, server in ragmon_servers.items():
        # which traces the sampler keeps (and under which shown ids) is its own affair: every
        # question-less trace has the same question fingerprint, so they are near duplicates;
        # what is asked here is that a kept trace shows what was hidden as absent
        def kept(server=server) -> list[dict]:
            return [payload for _, payload in samples_of(server, tenant).values()]

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                scraped(server.url, "ragmon_answers_total", tenant=tenant) < len(questions)
                or not any(p.get("query") == shown["question"] for p in kept())
                or not any(not p.get("query") for p in kept())):
            time.sleep(0.25)
        samples = kept()
        assert any(p.get("query") == shown["question"] for p in samples), export
        assert any(not p.get("query") for p in samples), export
        for payload in samples:
            where = f"{export}, {payload.get('query')!r}"
            if payload.get("query"):
                assert payload["query"] == shown["question"], where
                assert payload["answer"]["text"] == shown["answer"], where
            else:
                assert "answer" not in payload, where
            # the retriever's list by its node ids (one of the app's lists), not by the hidden content
            assert [p["id"] for p in payload["retrievals"][0].get("passages", [])] in lists, where
        after, before = snapshot({export: server})[export], run.before[export]
        for counter in ("ragmon_derived_passage_ids_total{'how': 'content_hash'}", "ragmon_unmapped_passages_total{}"):
            assert after[counter] == before[counter], (export, counter)
        # the query engine's answers (the third and fourth questions) were hidden: unknown, not answered
        assert scraped(server.url, "ragmon_answers_total", tenant=tenant, outcome="answered") == 1, export
        assert scraped(server.url, "ragmon_answers_total", tenant=tenant, outcome="unknown") == len(questions) - 1
