"""With Kafka configured, a sync sends its events to the real catalog topic every replica reads, keyed so
that compaction keeps the newest record of each document; a second sync of the same folder sends nothing."""

from __future__ import annotations

import json

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from ragmon.monitor.app.wiring import build_catalog_sync, build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.model import DocumentEvent
from tests.collectors.kafka_support import new_topic, read_all

pytestmark = pytest.mark.integration


def test_a_sync_goes_to_the_catalog_topic_keyed_by_document(kafka, tmp_path):
    topic = new_topic(kafka, prefix="catalog")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("---\nacl: [group:hr]\n---\nA")
    (root / "b.md").write_text("B")
    (root / ("x" * 250 + ".md")).write_text("an id longer than the limit")
    environ = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_KAFKA__BOOTSTRAP_SERVERS": json.dumps([kafka.bootstrap_servers]),
               "RAGMON_KAFKA__CATALOG_TOPIC": topic,
               "RAGMON_CATALOG__SOURCES": json.dumps([{"name": "docs", "kind": "folder", "root": str(root),
                                                       "id_prefix": "knowledge/"}])}
    runtime = build_runtime(load_settings(environ=environ), registry=CollectorRegistry())
    try:
        syncing = build_catalog_sync(runtime)
        first = syncing.sync("docs")
        assert first.outcome == "ok" and dict(first.changes) == {"document": 2} and first.refused == {"too_long": 1}
        messages = read_all(kafka, topic)
        events = {m.key.decode(): msgspec.json.decode(m.value, type=DocumentEvent) for m in messages}
        assert set(events) == {"knowledge/a.md", "knowledge/b.md"} and events["knowledge/a.md"].acl == ["group:hr"]
        assert all(events[key].doc_id == key for key in events)
        assert runtime.catalog.document("knowledge/a.md") is None  # the catalog reader of each replica applies it
        (root / "b.md").unlink()
        second = syncing.sync("docs")
        assert dict(second.changes) == {"tombstone": 1}
        messages = read_all(kafka, topic)
        assert len(messages) == 3 and msgspec.json.decode(messages[-1].value, type=DocumentEvent).deleted
    finally:
        runtime.close()
