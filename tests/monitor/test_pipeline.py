"""Pipeline core: decode, dead-letter, fan-out isolation, retryable propagation, stats."""

from __future__ import annotations

import json

import pytest

from ragmon.monitor.config.pipeline import Limits, SignalsConfig
from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.dedupe import SeenTraces
from ragmon.monitor.core.errors import Reason, Retryable
from ragmon.monitor.core.memory import MemoryDeadLetters, MemorySink
from ragmon.monitor.core.model import IndexRef, TraceEvent
from ragmon.monitor.core.pipeline import Pipeline, Stages
from ragmon.monitor.core.records import Privilege, RawRecord

NOW = 1_796_000_000.0
GOOD = json.dumps({"type": "trace", "trace_id": "t1", "time": NOW - 5, "query": "q",
                   "index": {"name": "policies"}}).encode()
FEEDBACK = b'{"type":"feedback","trace_id":"t1","kind":"thumb","value":"up"}'


def make(*sinks, dead_letters=None):
    dead_letters = dead_letters or MemoryDeadLetters()
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), sinks, dead_letters, clock=lambda: NOW)
    return pipeline, dead_letters


def records(*payloads: bytes, source="file"):
    return [RawRecord(source, p, {"line": i + 1}, privilege=Privilege.TRUSTED) for i, p in enumerate(payloads)]


def test_valid_records_reach_every_sink_and_invalid_ones_the_dead_letters():
    a, b = MemorySink("a"), MemorySink("b")
    pipeline, dlq = make(a, b)
    result = pipeline.process(records(GOOD, b"{oops", FEEDBACK))
    assert (result.accepted, result.rejected) == (2, 1)
    for sink in (a, b):
        assert [o.event.trace_id for o in sink.observations] == ["t1", "t1"]
        assert sink.observations[0].source == "file" and sink.observations[0].received_at == NOW
        assert sink.flushes == 1
    assert [(d.reason, d.record.origin) for d in dlq.letters] == [(Reason.MALFORMED_JSON, {"line": 2})]
    accepted, rejected = pipeline.stats.snapshot()
    assert accepted == {("file", "trace"): 1, ("file", "feedback"): 1}
    assert rejected == {("file", "malformed_json"): 1}
    assert pipeline.stats.last_event_time[("file", "trace")] == NOW


def test_a_crashing_sink_does_not_stop_the_others():
    broken, healthy = MemorySink("broken"), MemorySink("healthy")
    broken.fail_with = ZeroDivisionError("bug")
    pipeline, _ = make(broken, healthy)
    result = pipeline.process(records(GOOD, GOOD))
    assert result.accepted == 2
    assert len(healthy.observations) == 2
    assert pipeline.stats.sink_errors == {"broken": 2}


def test_a_refusing_durable_sink_fails_the_batch_before_anything_is_counted():
    waiting, stored = MemorySink("waiting", durable=True), MemorySink("stored", durable=True)
    metrics = MemorySink("metrics")
    waiting.fail_with = Retryable("database down")
    pipeline, dlq = make(waiting, stored, metrics)
    with pytest.raises(Retryable, match="database down"):
        pipeline.process(records(GOOD, b"not json"))
    assert len(stored.observations) == 1  # the other durable sinks still took it (idempotently)
    assert metrics.observations == [] and dlq.letters == []
    assert pipeline.stats.snapshot() == ({}, {})  # nothing counted for a batch that will be retried
    waiting.fail_with = None
    pipeline.process(records(GOOD, b"not json"))  # the retry
    assert len(metrics.observations) == 1 and len(dlq.letters) == 1  # counted once, dead-lettered once


def test_durable_sinks_see_the_batch_before_the_dead_letters_and_the_metrics():
    order: list[str] = []

    class Recording(MemorySink):
        def consume(self, observation):
            order.append(self.name)

    class RecordingLetters(MemoryDeadLetters):
        def write(self, letters):
            order.append("dead letters")

    pipeline, _ = make(Recording("metrics"), Recording("catalog", durable=True), dead_letters=RecordingLetters())
    pipeline.process(records(GOOD, b"{"))
    assert order == ["catalog", "dead letters", "metrics"]


def test_a_dead_letter_sink_that_cannot_store_fails_the_batch():
    dlq = MemoryDeadLetters()
    dlq.fail_with = Retryable("disk full")
    metrics = MemorySink()
    pipeline, _ = make(metrics, dead_letters=dlq)
    with pytest.raises(Retryable, match="disk full"):
        pipeline.process(records(GOOD, b"not json"))
    assert metrics.observations == []
    dlq.fail_with = None
    assert pipeline.process(records(GOOD, b"not json")).rejected == 1
    assert len(metrics.observations) == 1


def test_a_retried_batch_reuses_the_signals_and_decisions_of_its_refused_attempt():
    """The signals and the sampling decision keep state (score baselines, rephrase memory, weekly
    quota): a retried batch must neither feed them its traces and feedback twice nor be judged
    differently the second time."""
    calls: list[str] = []
    decisions: list[str] = []

    def analyze(event):
        calls.append(type(event).__name__)
        return f"signals of attempt {len(calls)}"

    def decide(event, signals, data):
        decisions.append(type(event).__name__)
        return f"decision {len(decisions)}"

    store, metrics, dlq = MemorySink("store", durable=True), MemorySink("metrics"), MemoryDeadLetters()
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [store, metrics], dlq, clock=lambda: NOW,
                        stages=Stages(analyze=analyze, decide=decide))
    store.fail_with = Retryable("database down")
    with pytest.raises(Retryable):
        pipeline.process(records(GOOD, FEEDBACK))
    store.fail_with = None
    pipeline.process(records(GOOD, FEEDBACK))
    assert calls == decisions == ["TraceEvent", "FeedbackEvent"]  # each judged once
    assert [(o.signals, o.sampling) for o in metrics.observations] == [
        ("signals of attempt 1", "decision 1"), ("signals of attempt 2", "decision 2")]
    pipeline.process(records(GOOD))  # a batch after a success is judged afresh
    assert len(calls) == len(decisions) == 3


def test_an_index_event_of_a_refused_batch_keeps_its_lag_for_the_retry():
    """The catalog takes the version in on the first attempt: the retry must not lose the lag
    the first attempt observed (nor observe a second one)."""
    from ragmon.monitor.core.signals import SignalEngine

    catalog = Catalog()
    signals = SignalEngine(SignalsConfig(), catalog, explain=False)
    store, metrics = MemorySink("store", durable=True), MemorySink("metrics")
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [store, metrics], MemoryDeadLetters(), clock=lambda: NOW,
                        stages=Stages(update_catalog=catalog.apply, analyze=signals.observe))
    document = json.dumps({"type": "document", "doc_id": "d", "version": "2", "modified_at": NOW - 100}).encode()
    index = json.dumps({"type": "index", "index": "i", "doc_id": "d", "version": "2", "indexed_at": NOW - 40}).encode()
    pipeline.process(records(document))
    store.fail_with = Retryable("database down")
    with pytest.raises(Retryable):
        pipeline.process(records(index))
    store.fail_with = None
    pipeline.process(records(index))
    pipeline.process(records(index))  # sent again later: no new lag
    lags = [o.signals.lag_seconds for o in metrics.observations if o.signals is not None]
    assert lags == [60.0, None]


def test_the_stages_run_in_order_on_each_event():
    seen: list[tuple[str, str]] = []
    stages = Stages(update_catalog=lambda e: seen.append(("catalog", type(e).__name__)),
                    analyze=lambda e: seen.append(("signals", type(e).__name__)),
                    decide=lambda e, signals, data: seen.append(("sampling", type(e).__name__)))
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [MemorySink()], MemoryDeadLetters(), clock=lambda: NOW,
                        stages=stages)
    document = b'{"type":"document","doc_id":"d1","version":"1","modified_at":1795999000}'
    pipeline.process(records(document, GOOD, FEEDBACK))
    assert seen == [("catalog", "DocumentEvent"), ("signals", "DocumentEvent"), ("sampling", "DocumentEvent"),
                    *[(stage, kind) for kind in ("TraceEvent", "FeedbackEvent") for stage in ("signals", "sampling")]]


def test_a_full_catalog_refuses_new_documents_as_dead_letters_and_keeps_changing_known_ones():
    catalog, store, dlq = Catalog(max_documents=2), MemorySink("store", durable=True), MemoryDeadLetters()
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [store], dlq, clock=lambda: NOW,
                        stages=Stages(update_catalog=catalog.apply))

    def document(doc_id: str, version: str) -> bytes:
        return json.dumps({"type": "document", "doc_id": doc_id, "version": version, "modified_at": NOW - 10}).encode()

    result = pipeline.process(records(document("a", "1"), document("b", "1"), document("c", "1"), document("a", "2")))
    assert (result.accepted, [r.reason for r in result.rejections]) == (3, ["catalog_full"])
    assert sorted(catalog.documents) == ["a", "b"] and catalog.document("a").version == "2"
    assert [letter.reason.value for letter in dlq.letters] == ["catalog_full"]
    assert "c" not in {o.event.doc_id for o in store.observations}  # never persisted either


def test_a_sink_that_cannot_flush_fails_the_batch():
    class Unflushable(MemorySink):
        def flush(self, timeout):
            return False

    pipeline, _ = make(Unflushable("slow", durable=True))
    with pytest.raises(Retryable, match="slow"):
        pipeline.process(records(GOOD))


def test_a_trace_delivered_again_is_acknowledged_but_counted_once():
    sink = MemorySink("store", durable=True)
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [sink], MemoryDeadLetters(), clock=lambda: NOW,
                        seen=SeenTraces(10))
    first = pipeline.process(records(GOOD, GOOD))  # a client that sent one trace twice in a batch
    again = pipeline.process(records(GOOD, FEEDBACK, source="http"))  # and again later; feedback is not a trace
    assert (first.accepted, first.duplicates, again.accepted, again.duplicates) == (2, 1, 2, 1)
    assert [type(o.event).__name__ for o in sink.observations] == ["TraceEvent", "FeedbackEvent"]
    assert pipeline.stats.duplicates == {"file": 1, "http": 1}
    assert pipeline.stats.snapshot()[0] == {("file", "trace"): 1, ("http", "feedback"): 1}


def test_a_refused_batch_is_no_duplicate_of_itself_and_the_window_is_bounded():
    store = MemorySink("store", durable=True)
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [store], MemoryDeadLetters(), clock=lambda: NOW,
                        seen=SeenTraces(2))
    store.fail_with = Retryable("database down")
    with pytest.raises(Retryable):
        pipeline.process(records(GOOD))
    store.fail_with = None
    assert pipeline.process(records(GOOD)).duplicates == 0  # the retry is processed
    for n in (2, 3):  # two other traces push t1 out of a window of two
        pipeline.process(records(GOOD.replace(b'"t1"', f'"t{n}"'.encode())))
    assert pipeline.process(records(GOOD)).duplicates == 0


def test_what_a_catalog_change_showed_of_earlier_traces_is_delivered_once_even_through_a_refusal():
    """The late judge hands its findings over once; a refused tick or batch keeps them for the
    next, and the metrics see them once, after they are durable, as observations of their own."""
    found = [["late of t0"]]

    def late(force: bool):
        return [(TraceEvent(trace_id="t0", time=NOW, query="", index=IndexRef("i")), signals)
                for signals in found.pop()] if found else []

    store, metrics = MemorySink("store", durable=True), MemorySink("metrics")
    pipeline = Pipeline(Decoder(Limits(), lambda: NOW), [store, metrics], MemoryDeadLetters(), clock=lambda: NOW,
                        stages=Stages(late=late))
    store.fail_with = Retryable("database down")
    with pytest.raises(Retryable):
        pipeline.tick()
    assert metrics.observations == []
    with pytest.raises(Retryable):
        pipeline.process(records(GOOD))  # still owed, still refused
    store.fail_with = None
    result = pipeline.process(records(GOOD))
    assert result.accepted == 1  # the late observation is no accepted event
    assert [(o.source, o.signals) for o in metrics.observations] == [("file", None), ("catalog_change", "late of t0")]
    assert pipeline.tick() == 0 and len(metrics.observations) == 2
