"""Decoder: every rejection reason, normalization, and arbitrary bytes never escape as anything
but InvalidInput."""

from __future__ import annotations

import functools
import json
from datetime import datetime

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmon.monitor.app.simulate import CORRUPTIONS, Simulator, corrupt
from ragmon.monitor.config.pipeline import Limits
from ragmon.monitor.core.decode import Decoder
from ragmon.monitor.core.errors import InvalidInput, Reason
from ragmon.monitor.core.model import DocumentEvent, FeedbackEvent, IndexEvent, TraceEvent

NOW = 1_796_000_000.0  # 2026-11-30T00:53:20Z


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def decoder(**limits) -> Decoder:
    return Decoder(Limits(**limits), clock=lambda: NOW)


def trace(**overrides) -> dict:
    event = {
        "type": "trace", "trace_id": "t1", "time": "2026-11-29T10:00:00.123Z", "tenant": "acme",
        "caller": {"id": "u-1", "groups": ["staff"]}, "query": "How many vacation days carry over?",
        "index": {"name": "policies", "version": "2026-11-28"},
        "retrievals": [{"retriever": "bm25", "passages": [
            {"id": "leave#4", "score": 12.5, "doc_id": "leave", "doc_version": "3", "span": [1200, 1680],
             "acl": ["group:staff"], "indexed_at": "2026-11-21T00:00:00Z",
             "source_modified_at": 1_795_000_000}]}],
        "answer": {"text": "Five days.", "abstained": False, "citations": ["leave#4"]},
    }
    event.update(overrides)
    return event


def reject(data: bytes | dict, **limits) -> InvalidInput:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(InvalidInput) as caught:
        decoder(**limits).decode(raw)
    return caught.value


def test_a_full_trace_decodes_with_times_as_unix_seconds():
    event = decoder().decode(json.dumps(trace()).encode())
    assert isinstance(event, TraceEvent)
    assert event.time == pytest.approx(at("2026-11-29T10:00:00.123+00:00"), abs=1e-6)
    passage = event.retrievals[0].passages[0]
    assert passage.indexed_at == at("2026-11-21T00:00:00+00:00")
    assert passage.source_modified_at == 1_795_000_000.0
    assert passage.span == (1200, 1680)
    assert event.final_context() == event.retrievals[0].passages
    assert event.answer is not None and event.answer.citations == ["leave#4"]


def test_minimal_trace_gets_defaults_and_unknown_fields_are_ignored():
    raw = b'{"type":"trace","trace_id":"t","time":1796000000,"query":"","index":{"name":"i"},"extra":{"a":[1]}}'
    event = decoder().decode(raw)
    assert isinstance(event, TraceEvent)
    assert (event.tenant, event.caller, event.retrievals, event.context, event.answer) == (
        "default", None, [], None, None)
    assert event.final_context() == []


def test_a_chat_turn_carries_the_users_message_the_searched_queries_and_its_turn():
    """The user's message stays ``query``; each retrieval may say what it searched (a rewrite);
    a retrieval without one searched the message itself, and a trace of today means the same."""
    turn = trace(conversation_id="c-77", turn=2, query="And for contractors?", retrievals=[
        {"retriever": "bm25", "query": "vacation days carry over for contractors", "passages": []},
        {"retriever": "vector", "passages": []}])
    event = decoder().decode(json.dumps(turn).encode())
    assert isinstance(event, TraceEvent)
    assert (event.query, event.conversation_id, event.turn) == ("And for contractors?", "c-77", 2)
    assert [r.searched(event) for r in event.retrievals] == [
        "vacation days carry over for contractors", "And for contractors?"]
    today = decoder().decode(json.dumps(trace()).encode())
    assert isinstance(today, TraceEvent) and today.turn is None and today.retrievals[0].query is None
    assert today.retrievals[0].searched(today) == today.query
    # a searched query of "" is what the retriever searched (an empty rewrite), not "absent"
    empty = decoder().decode(json.dumps(trace(retrievals=[{"retriever": "v", "query": ""}])).encode())
    assert isinstance(empty, TraceEvent) and empty.retrievals[0].searched(empty) == ""


def test_traces_share_one_string_of_each_tenant_and_index_name(monkeypatch):
    """The memories of recent traces hold every trace's tenant and index name: each decoded trace
    names them with the one string alive, not copies of its own, on the fast path and through the
    thorough checker alike."""
    # names made at run time, not constants of this module the compiler would share anyway
    def body(n: int) -> bytes:
        return json.dumps(trace(trace_id=f"t{n}", tenant="".join(["ac", "me-", "7"]),
                                index={"name": "".join(["poli", "cies-", "7"])})).encode()

    traces = [decoder().decode(body(n)) for n in (1, 2)]
    monkeypatch.setattr(Decoder, "_trace_fits", lambda self, trace, latest: False)  # the checker's way
    traces.append(decoder().decode(body(3)))
    assert all(t.tenant == "acme-7" and t.index.name == "policies-7" for t in traces)
    assert len({id(t.tenant) for t in traces}) == 1 and len({id(t.index.name) for t in traces}) == 1


def test_other_event_kinds_decode():
    d = decoder()
    fb = d.decode(b'{"type":"feedback","trace_id":"t","kind":"thumb","value":"down","time":1796000000}')
    doc = d.decode(b'{"type":"document","doc_id":"d","version":"4","modified_at":"2026-11-25T09:00:00+02:00"}')
    idx = d.decode(b'{"type":"index","index":"p","doc_id":"d","version":"3","indexed_at":1795000000}')
    assert isinstance(fb, FeedbackEvent) and fb.value == "down"
    untimed = d.decode(b'{"type":"feedback","trace_id":"t","kind":"copy"}')
    assert untimed.time == NOW  # received now
    assert isinstance(doc, DocumentEvent) and doc.tenant == "default"
    assert doc.modified_at == at("2026-11-25T07:00:00+00:00")
    assert isinstance(idx, IndexEvent) and idx.indexed_at == 1795000000.0 and idx.acl is None
    with_acl = d.decode(b'{"type":"index","index":"p","doc_id":"d","version":"3","indexed_at":1795000000,'
                        b'"acl":"group:hr, user:ann"}')
    assert with_acl.acl == ["group:hr", "user:ann"]  # read by the one ACL rule, as a document's is


@pytest.mark.parametrize(
    ("data", "reason", "field"),
    [
        (b'{"type":"trace",', Reason.MALFORMED_JSON, None),
        (b"\xff\xfe{}", Reason.MALFORMED_JSON, None),
        (b'{"type":"trace","x":NaN}', Reason.MALFORMED_JSON, None),
        (b'{"type":"trace","deep":' + b"[" * 50_000, Reason.MALFORMED_JSON, None),
        (b"[1, 2]", Reason.NOT_AN_OBJECT, "$"),
        (b'"trace"', Reason.NOT_AN_OBJECT, "$"),
        (b'{"type":"span"}', Reason.UNKNOWN_TYPE, "$.type"),
        (b'{"trace_id":"t"}', Reason.MISSING_FIELD, "$.type"),
        (trace(trace_id=None), Reason.WRONG_TYPE, "$.trace_id"),
        ({k: v for k, v in trace().items() if k != "query"}, Reason.MISSING_FIELD, "$.query"),
        (trace(index={}), Reason.MISSING_FIELD, "$.index.name"),
        (trace(caller={"groups": "hr"}), Reason.WRONG_TYPE, "$.caller.groups"),
        (trace(retrievals=[{"retriever": "v", "passages": [{"id": "p", "score": "high"}]}]),
         Reason.WRONG_TYPE, "$.retrievals[0].passages[0].score"),
        (trace(retrievals=[{"retriever": "v", "passages": [{"id": "p", "span": [3]}]}]),
         Reason.WRONG_TYPE, "$.retrievals[0].passages[0].span"),
        (trace(retrievals=[{"retriever": "v", "passages": [{"id": "p", "span": [9, 3]}]}]),
         Reason.INVALID_VALUE, "$.retrievals[0].passages[0].span"),
        (json.dumps(trace(context=[{"id": "p", "score": 7}])).encode().replace(b'"score": 7', b'"score": 1e999'),
         Reason.INVALID_VALUE, "$.context[0].score"),
        (trace(trace_id=""), Reason.INVALID_VALUE, "$.trace_id"),
        (trace(latency_ms={"total": -1}), Reason.INVALID_VALUE, "$.latency_ms.total"),
        (trace(usage={"input_tokens": -5}), Reason.INVALID_VALUE, "$.usage.input_tokens"),
        # forged or unit-mistaken magnitudes would stay in the counters and histogram sums for good
        (trace(usage={"input_tokens": 10**30}), Reason.INVALID_VALUE, "$.usage.input_tokens"),
        (trace(usage={"output_tokens": 10_000_001}), Reason.INVALID_VALUE, "$.usage.output_tokens"),
        (trace(latency_ms={"generate": 1e308}), Reason.INVALID_VALUE, "$.latency_ms.generate"),
        (trace(latency_ms={"total": 86_400_001}), Reason.INVALID_VALUE, "$.latency_ms.total"),
        (trace(usage={"output_tokens": -1}), Reason.INVALID_VALUE, "$.usage.output_tokens"),
        (trace(usage={"cost_usd": 1e308}), Reason.INVALID_VALUE, "$.usage.cost_usd"),
        (trace(usage={"cost_usd": -0.01}), Reason.INVALID_VALUE, "$.usage.cost_usd"),
        ({"type": "feedback", "trace_id": "t", "kind": "like"}, Reason.INVALID_VALUE, "$.kind"),
        ({"type": "feedback", "trace_id": "t", "kind": "thumb", "value": "meh"}, Reason.INVALID_VALUE, "$.value"),
        (trace(time="2026-11-29"), Reason.BAD_TIMESTAMP, "$.time"),
        (trace(time="2026-11-29T10:00:00"), Reason.BAD_TIMESTAMP, "$.time"),  # no offset
        (trace(time=True), Reason.BAD_TIMESTAMP, "$.time"),
        (trace(time=-5), Reason.BAD_TIMESTAMP, "$.time"),
        (json.dumps(trace(time=7)).encode().replace(b'"time": 7', b'"time": -1e999'), Reason.BAD_TIMESTAMP, "$.time"),
        (trace(context=[{"id": "p", "indexed_at": "soon"}]), Reason.BAD_TIMESTAMP, "$.context[0].indexed_at"),
        (trace(context=[{"id": "p", "source_modified_at": "soon"}]), Reason.BAD_TIMESTAMP,
         "$.context[0].source_modified_at"),
        (trace(context=[{"id": "p", "indexed_at": 1e15}]), Reason.BAD_TIMESTAMP, "$.context[0].indexed_at"),
        (trace(time=NOW * 1000 + 3_600_000), Reason.FUTURE_TIMESTAMP, "$.time"),  # milliseconds, an hour ahead
        # an ACL string naming no principal is an unset field more often than "nobody" (that is [])
        (trace(context=[{"id": "p", "acl": " , "}]), Reason.INVALID_VALUE, "$.context[0].acl"),
        (trace(retrievals=[{"retriever": "v", "passages": [{"id": "p", "acl": "[group:a"}]}]), Reason.INVALID_VALUE,
         "$.retrievals[0].passages[0].acl"),
        (trace(context=[{"id": "p", "acl": "a,b,c,d,e,f,g,h,i,j,k"}]), Reason.TOO_MANY_PASSAGES, "$.context[0].acl"),
        ({"type": "document", "doc_id": "d", "version": "1", "modified_at": NOW, "acl": ""}, Reason.INVALID_VALUE,
         "$.acl"),
        ({"type": "document", "doc_id": "d", "version": "1", "modified_at": NOW, "acl": 5}, Reason.WRONG_TYPE, "$.acl"),
        (trace(time=NOW + 3600), Reason.FUTURE_TIMESTAMP, "$.time"),
        ({"type": "document", "doc_id": "d", "version": "1", "modified_at": "2033-01-01T00:00:00Z"},
         Reason.FUTURE_TIMESTAMP, "$.modified_at"),
        # a catalog dated 1970 would make an index look stale for decades: a fake critical alert
        ({"type": "document", "doc_id": "d", "version": "1", "modified_at": 0}, Reason.BAD_TIMESTAMP, "$.modified_at"),
        ({"type": "index", "index": "i", "doc_id": "d", "version": "1", "indexed_at": "1999-12-31T23:59:59Z"},
         Reason.BAD_TIMESTAMP, "$.indexed_at"),
        (trace(context=[{"id": f"p{i}"} for i in range(11)]), Reason.TOO_MANY_PASSAGES, "$.context"),
        (trace(retrievals=[{"retriever": str(i)} for i in range(4)]), Reason.TOO_MANY_PASSAGES, "$.retrievals"),
        (trace(trace_id="x" * 41), Reason.TOO_LONG, "$.trace_id"),
        (trace(caller={"id": "u", "groups": ["g" * 41]}), Reason.TOO_LONG, "$.caller.groups[0]"),
        (trace(query="q" * 101), Reason.TOO_LONG, "$.query"),
        (trace(context=[{"id": "p", "text": "t" * 101}]), Reason.TOO_LONG, "$.context[0].text"),
        (trace(retrievals=[{"retriever": "v"}, {"retriever": "w", "query": "q" * 101}]), Reason.TOO_LONG,
         "$.retrievals[1].query"),
        (trace(retrievals=[{"retriever": "v", "query": ["q"]}]), Reason.WRONG_TYPE, "$.retrievals[0].query"),
        (trace(turn=0), Reason.INVALID_VALUE, "$.turn"),  # turns count from 1
        (trace(turn=-3), Reason.INVALID_VALUE, "$.turn"),
        (trace(turn=1_000_001), Reason.INVALID_VALUE, "$.turn"),
        (trace(turn="2"), Reason.WRONG_TYPE, "$.turn"),
        (trace(turn=1.5), Reason.WRONG_TYPE, "$.turn"),
        (trace(turn=True), Reason.WRONG_TYPE, "$.turn"),
    ],
)
def test_every_way_to_be_wrong_has_a_reason_and_names_the_field(data, reason, field):
    limits = {"max_passages_per_list": 10, "max_retrieval_lists": 3, "max_id_length": 40, "max_text_length": 100}
    error = reject(data, **limits)
    assert error.reason is reason, error.detail
    assert error.field == field
    if field is not None:
        assert f"`{field}`" in error.detail


def test_too_large_is_checked_before_parsing_and_uses_the_real_size():
    error = reject(json.dumps(trace(query="x" * 2000)).encode(), max_event_bytes=1000)
    assert error.reason is Reason.TOO_LARGE and "1000" in error.detail
    with pytest.raises(InvalidInput) as caught:
        decoder(max_event_bytes=1000).decode(b'{"type":', size=5000)
    assert caught.value.reason is Reason.TOO_LARGE and "5000" in caught.value.detail


def test_details_never_quote_the_content():
    secret = "s3cr3t-marker"
    for data in (
        {"type": secret},
        {"type": "feedback", "trace_id": "t", "kind": secret},
        {"type": "feedback", "trace_id": "t", "kind": "thumb", "value": secret},
        trace(time=secret),
        trace(query=secret * 1000),
        trace(trace_id=secret * 100),
    ):
        error = reject(data, max_text_length=100)
        assert secret not in error.detail and secret not in str(error)


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_simulator_corruptions_are_rejected_with_their_reason(how):
    event = next(e for e in Simulator(seed=3).traffic(5) if e["type"] == "trace")
    error = reject(corrupt(event, how, msgspec.json.encode))
    assert error.reason.value == CORRUPTIONS[how]


def test_simulator_traffic_is_valid():
    d = decoder()
    sim = Simulator(seed=5, start=NOW - 86400)
    for event in [*sim.catalog(), *sim.traffic(300)]:
        d.decode(msgspec.json.encode(event))


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_raise_only_invalid_input(data):
    try:
        decoder(max_event_bytes=1024).decode(data)
    except InvalidInput as error:
        assert isinstance(error.reason, Reason)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(["trace_id", "time", "query", "index", "tenant", "caller", "retrievals", "context",
                        "answer", "latency_ms", "usage", "type"]), json_values)
def test_any_json_value_in_any_field_is_accepted_or_rejected_cleanly(field, value):
    event = trace()
    event[field] = value
    try:
        result = decoder().decode(json.dumps(event).encode())
    except InvalidInput as error:
        assert isinstance(error.reason, Reason) and error.detail
    else:
        assert isinstance(result, TraceEvent)
        assert isinstance(result.time, float)


@functools.cache
def _sized(n_max: int):
    return st.integers(min_value=0, max_value=n_max)


def _text(n: int) -> str:
    return "x" * n


def _sized_text(n_max: int):
    return _sized(n_max).map(_text)


def _maybe(strategy):
    return st.none() | strategy


# Built once, not in each draw: hypothesis validates a strategy when it is first drawn from, which
# cost more than the draws themselves when the composite made them anew for every example.
_WHEN = st.sampled_from([NOW - 10, NOW + 10, NOW + 10_000, 0, "2026-11-29T10:00:00Z", (NOW - 10) * 1000,
                         "2026-11-29 10:00:00 +0100", "2026-11-29T10:00:00", "not a time", 1e15])
_PASSAGE = st.fixed_dictionaries({"id": _sized_text(6)}, optional={
    "doc_id": _sized_text(6), "doc_version": _sized_text(6), "embedding_model": _sized_text(6),
    "text": _sized_text(12), "acl": st.lists(_sized_text(6), max_size=4) | st.sampled_from(
        ["group:a, user:b", " , ", '["group:a"]', "[broken", "a,b,c,d", "group:toolong"]),
    "span": st.sampled_from([[0, 5], [5, 0], [3, 3]]), "indexed_at": _WHEN, "source_modified_at": _WHEN,
})
_OPTIONAL = {
    "conversation_id": _maybe(_sized_text(6)),
    "turn": _maybe(st.sampled_from([-1, 0, 1, 7, 1_000_000, 1_000_001])),
    "caller": _maybe(st.fixed_dictionaries({"groups": st.lists(_sized_text(6), max_size=4)},
                                           optional={"id": _sized_text(6)})),
    "context": _maybe(st.lists(_PASSAGE, max_size=4)),
    "answer": _maybe(st.fixed_dictionaries({"text": _sized_text(12),
                                            "citations": st.lists(_sized_text(6), max_size=4)})),
    "latency_ms": _maybe(st.fixed_dictionaries({}, optional={
        stage: st.sampled_from([-1, 0, 5, 9e7]) for stage in ("retrieve", "rerank", "generate", "total")})),
    "usage": _maybe(st.fixed_dictionaries({}, optional={
        "input_tokens": st.sampled_from([-1, 0, 7, 2 * 10**7]),
        "output_tokens": st.sampled_from([-1, 0, 7, 2 * 10**7]),
        "cost_usd": st.sampled_from([-0.5, 0.0, 0.2, 2e6])})),
}
_TIMES = st.sampled_from([NOW, NOW + 200, NOW + 1000, "2026-11-29T10:00:00+01:00", NOW * 1000, (NOW + 1000) * 1000,
                          "2026-11-29", "2026-11-29 10:00:00 +0100"])
_VERSION = _maybe(_sized_text(6))
_PASSAGES = st.lists(_PASSAGE, max_size=4)


@st.composite
def near_limit_traces(draw):
    """Traces whose ids, texts, lists, times and numbers sit around small limits, in every field
    the limits apply to, to compare the fast path with the thorough checker."""
    event = {
        "type": "trace", "trace_id": _text(draw(_sized(6))), "tenant": _text(draw(_sized(6))),
        "time": draw(_TIMES),
        "query": _text(draw(_sized(12))), "index": {"name": _text(draw(_sized(6)))},
        "retrievals": [{"retriever": _text(draw(_sized(6))), "passages": draw(_PASSAGES)}
                       for _ in range(draw(_sized(3)))],
    }
    for retrieval in event["retrievals"]:
        searched = draw(_maybe(_sized_text(12)))
        if searched is not None:
            retrieval["query"] = searched
    for name, strategy in _OPTIONAL.items():
        value = draw(strategy)
        if value is not None:
            event[name] = value
    version = draw(_VERSION)
    if version is not None:
        event["index"]["version"] = version
    return event


@pytest.mark.slow
@pytest.mark.xdist_group("cpu-bound-otlp")
@settings(max_examples=3000, deadline=None)
@given(near_limit_traces())
def test_the_fast_path_accepts_exactly_what_the_thorough_checker_accepts(event):
    from ragmon.monitor.core.decode import _Checker
    from ragmon.monitor.core.times import TimeReader

    limits = Limits(max_id_length=5, max_text_length=10, max_passages_per_list=3, max_retrieval_lists=2,
                    max_clock_skew_seconds=300)
    raw = json.dumps(event).encode()
    fast_decoder = Decoder(limits, clock=lambda: NOW)
    typed = msgspec.json.Decoder(TraceEvent)
    fast = fast_decoder._trace_fits(typed.decode(raw), NOW + 300)
    try:
        _Checker(limits, NOW, TimeReader()).event(typed.decode(raw))
        thorough = True
    except InvalidInput:
        thorough = False
    assert fast == thorough
    # and the decoder as a whole, which runs the checker on what the fast path left (times and
    # ACLs it read in place): it must accept exactly the same
    try:
        fast_decoder.decode(raw)
        whole = True
    except InvalidInput:
        whole = False
    assert whole == thorough
