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
    for export, server in ragmon_servers.items():
        # every question-less trace has the same question fingerprint, so the labeling sample keeps
        # one of them a week (a near duplicate): the hidden traces' samples are one, not four
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                scraped(server.url, "ragmon_answers_total", tenant=tenant) < len(questions)
                or len(samples_of(server, tenant)) < 2):
            time.sleep(0.25)
        samples = samples_of(server, tenant)
        assert shown["trace_id"] in samples and len(samples) == 2, export
        for trace_id, (_, payload) in samples.items():
            question, where = questions[trace_id], f"{export}, {trace_id}"
            if question is shown:
                assert payload["query"] == question["question"], where
                assert payload["answer"]["text"] == question["answer"], where
            else:
                assert payload.get("query", "") == "" and "answer" not in payload, where
            # the retriever's list by its node ids, not by the hidden content
            first = [p["id"] for p in payload["retrievals"][0].get("passages", [])]
            assert first == [d["id"] for d in question["lists"][0]], where
        after, before = snapshot({export: server})[export], run.before[export]
        for counter in ("ragmon_derived_passage_ids_total{'how': 'content_hash'}", "ragmon_unmapped_passages_total{}"):
            assert after[counter] == before[counter], (export, counter)
        # the query engine's answers (the third and fourth questions) were hidden: unknown, not answered
        assert scraped(server.url, "ragmon_answers_total", tenant=tenant, outcome="answered") == 1, export
        assert scraped(server.url, "ragmon_answers_total", tenant=tenant, outcome="unknown") == len(questions) - 1
