"""The join rule (monitor/core/doc_ids.py) and the decoder applying it to every document id it reads."""

from __future__ import annotations

import json
import time

import pytest

from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.doc_ids import join_key


@pytest.mark.parametrize(("written", "key"), [
    ("hr/leave.md", "hr/leave.md"),
    ("./hr/leave.md", "hr/leave.md"),
    ("././hr/leave.md", "hr/leave.md"),
    ("hr/./leave.md", "hr/leave.md"),
    ("hr//leave.md", "hr/leave.md"),
    ("/srv/corpus//hr/./leave.md", "/srv/corpus/hr/leave.md"),  # absolute stays absolute
    ("hr/", "hr/"),
    ("hr/../leave.md", "hr/../leave.md"),  # `..` is not resolved
    ("HR/Leave.md", "HR/Leave.md"),
    ("hr\\leave.md", "hr\\leave.md"),
    ("https://wiki.example/pages//123", "https://wiki.example/pages//123"),  # a URL as it is
    ("leave-policy", "leave-policy"),
    ("./", "./"),
    (".", "."),
])
def test_the_join_rule(written, key):
    assert join_key(written) == key


def decode(event: dict):
    return Decoder(Limits(), time.time).decode(json.dumps(event).encode())


def test_passages_document_events_and_index_events_meet_on_one_key():
    now = time.time()
    passage = {"id": "c1", "doc_id": "./hr//leave.md"}
    trace = decode({"type": "trace", "trace_id": "t", "time": now, "query": "", "index": {"name": "i"},
                    "context": [passage], "retrievals": [{"retriever": "v", "passages": [passage]}]})
    document = decode({"type": "document", "doc_id": "./hr/leave.md", "version": "1", "modified_at": now})
    index = decode({"type": "index", "index": "i", "doc_id": "hr/./leave.md", "version": "1", "indexed_at": now})
    assert trace.retrievals[0].passages[0].doc_id == trace.context[0].doc_id == "hr/leave.md"
    assert document.doc_id == index.doc_id == "hr/leave.md"
