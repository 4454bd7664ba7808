"""Redaction over everything that leaves the pipeline: the whole redaction corpus planted in
queries, passages, answers and caller ids goes through sampling, the store, the weekly pull, the
real Label Studio (push, annotation, export) and the label import. No planted item is in any of
them; every look-alike is still there."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.storage.store import make_engine

pytestmark = pytest.mark.integration

CORPUS = [json.loads(line) for line in
          (Path(__file__).parent / "monitor" / "redaction_corpus.jsonl").read_text().splitlines()]


def trace(number: int, item: dict, now: float) -> dict:
    text = f"item{number} {item['text']}"
    passage = {"id": f"p{number}", "doc_id": f"d{number}", "doc_version": "v1", "text": text, "acl": ["*"]}
    return {"type": "trace", "trace_id": f"t{number:03d}", "time": now - 3600, "tenant": "pii",
            "query": text, "index": {"name": "handbook"},
            "caller": {"id": f"person{number}@corp.example", "groups": ["staff"]},
            "retrievals": [{"retriever": "vector", "passages": [{**passage, "score": 0.9}]}],
            "context": [passage], "answer": {"text": text, "citations": [f"p{number}"]}}


def strings(value) -> list[str]:
    """Every string in a decoded JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def test_no_planted_item_reaches_the_store_or_any_export(tmp_path, label_studio):
    dataset = tmp_path / "cases.jsonl"
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_SAMPLING__RATES__RANDOM": "1.0", "RAGMON_SAMPLING__WEEKLY_CAP": "1000",
           "RAGMON_LABEL_STUDIO__URL": label_studio.url,
           "RAGMON_LABEL_STUDIO__TOKEN": label_studio.personal_access_token(),
           "RAGMON_LABEL_STUDIO__PROJECT": f"redaction {uuid.uuid4().hex[:8]}",
           "RAGMON_REGRESSION__CASES": str(dataset)}
    now = time.time()
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    runtime.pipeline.process([RawRecord("file", msgspec.json.encode(trace(n, item, now)), privilege=Privilege.TRUSTED)
                              for n, item in enumerate(CORPUS)])
    runtime.close()
    store = SampleStore(make_engine(env["RAGMON_DATABASE__URL"]))
    stored = store.find(tenant="pii")
    assert len(stored) == len(CORPUS)
    week = stored[0].week

    def cli(*args: str) -> None:
        result = CliRunner().invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.output

    cli("samples", "pull", "--week", week, "--tenant", "pii", "--out", str(tmp_path / "batch"))
    cli("samples", "push", "--week", week, "--tenant", "pii")
    with label_studio.api() as api:
        project = api.get("/api/projects", params={"title": env["RAGMON_LABEL_STUDIO__PROJECT"]}).json()["results"][0]
        tasks = api.get(f"/api/projects/{project['id']}/export",
                        params={"exportType": "JSON", "download_all_tasks": "true"}).json()
        for task in tasks:
            api.post(f"/api/tasks/{task['id']}/annotations", json={"result": [
                {"from_name": "grade_0", "to_name": "passage_0", "type": "choices", "value": {"choices": ["2"]}},
                {"from_name": "answerable", "to_name": "question", "type": "choices",
                 "value": {"choices": ["answerable"]}}]}).raise_for_status()
    cli("labels", "pull", "--out", str(tmp_path / "export.json"))
    cli("labels", "import", str(tmp_path / "export.json"))

    artifacts = {
        "store": [s.model_dump() for s in stored],
        "cases.jsonl": [json.loads(line) for line in (tmp_path / "batch" / "cases.jsonl").read_text().splitlines()],
        "tasks.json": json.loads((tmp_path / "batch" / "tasks.json").read_text()),
        "label studio": tasks,
        "labels pull": json.loads((tmp_path / "export.json").read_text()),
        "regression set": [json.loads(line) for line in dataset.read_text().splitlines()],
    }
    assert len(artifacts["regression set"]) == len(CORPUS)
    for name, content in artifacts.items():
        texts = strings(content)
        assert not any("@corp.example" in text for text in texts), f"{name}: a raw caller id"
        for number, item in enumerate(CORPUS):
            # the texts of this item only: one item's look-alike may be another's personal data
            mine = "\n".join(text for text in texts if f"item{number} " in text)
            assert mine, f"{name}: {item['note']}: the item is missing"
            for pii in item["pii"]:
                assert pii not in mine, f"{name}: {item['note']}: {pii!r} is still there"
            for keep in item["keep"]:
                assert keep in mine, f"{name}: {item['note']}: {keep!r} was lost"
