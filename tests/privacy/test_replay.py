"""End to end, as a new user would meet it: traces carrying every planted type (the generated
corpus, tests/privacy/corpus.py) in their texts, ids, names and unknown fields, plus broken records
carrying them too, go through the HTTP port of a runtime; then nothing planted is in `ragmon samples
list`, the weekly export, `/metrics`, the logs or the dead-letter file."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from ragmon.collectors.files import read_dead_letters
from ragmon.collectors.http import build_app
from ragmon.collectors.letter_body import decrypt_raw
from ragmon.monitor.app.cli import main
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import ConfigError, load_settings
from ragmon.monitor.core.records import Privilege
from tests.clean_run import UNCAPPED_SAMPLING
from tests.privacy.corpus import Sample, generate


def planted_values(samples: list[Sample]) -> list[str]:
    return [sample.text[start:end] for sample in samples for _, start, end in sample.items]


# Kinds known by their context (the key word before a password, "Bearer" before a hex token, the
# words before unformatted SSN digits) are planted in the texts only; the rest in ids and names too.
NEEDS_CONTEXT = {"url_password", "password_pair", "bearer_token", "ssn"}


def traces(samples: list[Sample], now: float) -> list[dict]:
    values = [sample.text[start:end] for sample in samples for kind, start, end in sample.items
              if kind not in NEEDS_CONTEXT]
    events = []
    for n, sample in enumerate(samples):
        other = values[(n * 7) % len(values)]  # a second item, in the ids and names around the text
        passage = {"id": f"{other}#1", "doc_id": other, "doc_version": other, "text": sample.text,
                   "acl": [f"user:{other}"], "embedding_model": other, "score": 0.9}
        events.append({
            "type": "trace", "trace_id": f"t{n:04d}", "time": now - 600, "tenant": "acme",
            "conversation_id": f"conv-{other}", "caller": {"id": other, "groups": ["staff", f"user:{other}"]},
            "query": f"q{n} {sample.text}", "index": {"name": "handbook", "version": other},
            "retrievals": [{"retriever": "bm25", "passages": [passage]}], "context": [passage],
            "answer": {"text": sample.text, "citations": [f"{other}#1"]},
            "x_unknown": {"note": other}, "metadata": other,  # fields nobody declared safe
        })
    # names a detector fires on, as tenant, index and retriever: exported as their shown ids
    for n, value in enumerate(values[:6]):
        events.append(dict(events[n], trace_id=f"named{n}", tenant=value, index={"name": value},
                           retrievals=[{"retriever": value, "passages": []}]))
    return events


def broken_records(samples: list[Sample]) -> list[bytes]:
    """What the dead letters get: a record cut off mid-way, one without its query, one of a wrong type."""
    out = []
    for n, sample in enumerate(samples):
        text = json.dumps(sample.text)
        out.append(f'{{"type": "trace", "trace_id": "broken{n}", "query": {text}'.encode())  # not JSON
        out.append(json.dumps({"type": "trace", "trace_id": f"missing{n}", "time": 1.0, "comment": sample.text,
                               "index": {"name": "handbook"}}).encode())  # no query
    return out


def test_no_planted_item_survives_anywhere(tmp_path: Path, caplog):
    samples = generate(per_type=5)
    values = planted_values(samples)
    assert len({kind for sample in samples for kind, _, _ in sample.items}) >= 20
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_SAMPLING__RATES__RANDOM": "1.0", **UNCAPPED_SAMPLING}
    now = time.time()
    with caplog.at_level(logging.DEBUG):
        runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
        client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready))
        events = traces(samples, now)
        answer = client.post("/v1/events", content=json.dumps(events), headers={"content-type": "application/json"})
        assert answer.status_code == 200, answer.text
        accepted, rejected = answer.json()["accepted"], answer.json()["rejected"]  # ids of PEM keys are too long
        assert accepted >= 100
        for record in broken_records(samples):
            client.post("/v1/events", content=record, headers={"content-type": "application/json"})
        metrics = client.get("/metrics").text
        runtime.close()
    info_logs = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.output

    listed = cli("samples", "list", "-o", "json", "--limit", "100000")
    stored = [json.loads(line) for line in listed.splitlines() if line.strip()]
    assert len(stored) == accepted  # every trace was sampled: the check below looks at all of them
    weeks = {sample["week"] for sample in stored}
    exports = ""
    for week in weeks:
        cli("samples", "pull", "--week", week, "--out", str(tmp_path / "batch" / week))
        exports += "".join(p.read_text() for p in (tmp_path / "batch" / week).iterdir())
    dead_letters = (tmp_path / "dead.jsonl").read_text()
    assert dead_letters.count("\n") == 2 * len(samples) + rejected

    places = {"samples list": listed, "weekly export": exports, "/metrics": metrics,
              "logs (INFO and above)": info_logs, "dead-letter file": dead_letters}
    survivors = {name: [v for v in values if v in text or json.dumps(v)[1:-1] in text]
                 for name, text in places.items()}
    assert survivors == dict.fromkeys(places, []), {k: v[:5] for k, v in survivors.items() if v}
    # the six private names, each as its own shown id: redacted text and a keyed hash
    assert len(set(re.findall(r'tenant="([^"]*~k[0-9a-f]{16})"', metrics))) == 6
    assert 'ragmon_redacted_label_values_total{label="tenant"} 6.0' in metrics
    assert "x_unknown" not in listed and "metadata" not in listed


def test_raw_bytes_are_kept_only_encrypted_and_only_when_asked(tmp_path: Path):
    key = base64.b64encode(bytes(range(32))).decode()
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
           "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
           "RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": key}
    record = b'{"type": "trace", "query": "mail jane.roe@example.com, key AKIAIOSFODNN7EXAMPLE"'
    runtime = build_runtime(load_settings(environ=env), registry=CollectorRegistry())
    client = TestClient(build_app(runtime.pipeline.process, runtime.registry, runtime.ready))
    client.post("/v1/events", content=record, headers={"content-type": "application/json"})
    runtime.close()
    [letter] = read_dead_letters(tmp_path / "dead.jsonl")
    assert "jane.roe" not in json.dumps(letter) and "AKIAIOSFODNN7EXAMPLE" not in json.dumps(letter)
    assert "[EMAIL]" in letter["text"] and "[SECRET]" in letter["text"]
    privilege = Privilege(letter["privilege"])  # the ciphertext is sealed with its sender's privilege
    assert decrypt_raw(bytes(range(32)), letter["raw_encrypted"], privilege) == (record, privilege)


@pytest.mark.parametrize("key", ["", "bm90IGEga2V5", "not base64 at all!"])
def test_keep_raw_without_a_usable_key_is_refused_naming_the_setting(key: str):
    with pytest.raises(ConfigError, match="encryption_key"):
        load_settings(environ={"RAGMON_DEAD_LETTER__KEEP_RAW": "true", "RAGMON_DEAD_LETTER__ENCRYPTION_KEY": key})
