"""Redaction: a hand-written corpus of personal data and of look-alikes that must survive, caller
pseudonyms, operator patterns, whole trace events, and stability on arbitrary text."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

KEY = "0123456789abcdef-test-key"
CORPUS = [json.loads(line) for line in (Path(__file__).parent / "redaction_corpus.jsonl").read_text().splitlines()]
PLACEHOLDERS = {"EMAIL", "PHONE", "CARD", "IBAN", "IP", "NATIONAL_ID", "SECRET", "PERSON", "ADDRESS"}
# "over": what the detectors take for personal data though it is not (docs/sampling.md, known limits)


def redactor(**config) -> Redactor:
    return Redactor(RedactionConfig(caller_key=KEY, **config))


REDACTOR = redactor()


def test_the_corpus_covers_every_kind_and_plenty_of_look_alikes():
    assert len(CORPUS) >= 60
    for case in CORPUS:
        assert {"text", "pii", "types", "keep", "note"} <= set(case) <= {"text", "pii", "types", "keep", "note", "over"}
        assert len(case["pii"]) == len(case["types"]) and set(case["types"]) <= PLACEHOLDERS, case["note"]
        assert all(s in case["text"] for s in case["pii"] + case["keep"]), case["note"]
    assert {t for case in CORPUS for t in case["types"]} == PLACEHOLDERS
    assert sum(not case["pii"] for case in CORPUS) >= 20


@pytest.mark.parametrize("case", CORPUS, ids=[case["note"] for case in CORPUS])
def test_corpus(case):
    redacted = REDACTOR.redact(case["text"])
    expected = case["text"]
    for pii, kind in [*zip(case["pii"], case["types"], strict=True), *case.get("over", [])]:
        expected = expected.replace(pii, f"[{kind}]")
    for pii in case["pii"]:
        assert pii not in redacted
    for keep in case["keep"]:
        assert keep in redacted
    assert redacted == expected  # each item replaced by its own placeholder, nothing else touched
    assert REDACTOR.redact(redacted) == redacted


def test_text_without_digits_at_signs_or_patterns_comes_back_as_is():
    text = "How many vacation days carry over? Ask HR: they know."
    assert REDACTOR.redact(text) is text


# -- caller pseudonyms -----------------------------------------------------------------------------


def test_pseudonyms_are_deterministic_keyed_and_short():
    one = REDACTOR.pseudonymize_caller("u-123")
    assert one == redactor().pseudonymize_caller("u-123")
    assert one.startswith("caller:") and len(one) == len("caller:") + 24
    assert int(one.removeprefix("caller:"), 16) >= 0
    assert one != REDACTOR.pseudonymize_caller("u-124")
    other_key = Redactor(RedactionConfig(caller_key=KEY + "!"))
    assert one != other_key.pseudonymize_caller("u-123")
    assert "u-123" not in one


def test_an_empty_key_is_refused_where_samples_are_stored():
    with pytest.raises(ValueError, match=r"redaction\.caller_key"):
        Redactor(RedactionConfig())
    text_only = Redactor(RedactionConfig(), require_key=False)
    assert text_only.redact("mail alice@example.com") == "mail [EMAIL]"
    with pytest.raises(ValueError, match=r"redaction\.caller_key"):
        text_only.pseudonymize_caller("u-1")


def test_a_short_key_is_a_configuration_error():
    with pytest.raises(ValidationError, match="caller_key"):
        RedactionConfig(caller_key="short")


def test_the_key_is_secret_in_reprs():
    assert KEY not in repr(RedactionConfig(caller_key=KEY))


# -- configured patterns and switches ------------------------------------------------------------


def test_configured_patterns_get_their_own_placeholder_and_run_before_the_built_ins():
    r = redactor(patterns=[{"name": "employee_id", "regex": r"\bEMP-[0-9]{6}\b"},
                           {"name": "badge", "regex": r"(?i)\bbadge [0-9]{3}-[0-9]{3}-[0-9]{4}\b"},
                           {"name": "customer_email", "regex": r"[\w.]+@customers\.example"}])
    text = "EMP-004211 (badge 555-123-4567) asked; phone 555-987-6543, mail ann@customers.example, bo@x.org"
    assert r.redact(text) == "[EMPLOYEE_ID] ([BADGE]) asked; phone [PHONE], mail [CUSTOMER_EMAIL], [EMAIL]"
    # what a configured pattern replaced keeps its placeholder where a secret's key word stands before it
    assert r.redact("token=EMP-004211; pass: 'EMP-004212' https://ann:EMP-004213@db.example") == (
        "token=[EMPLOYEE_ID]; pass: '[EMPLOYEE_ID]' https://ann:[EMPLOYEE_ID]@db.example")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ({"name": "ticket", "regex": "INC-[0-9"}, "pattern 'ticket': not a valid regular expression"),
        ({"name": "anything", "regex": "x*"}, "pattern 'anything': matches the empty string"),
        ({"name": "9lives", "regex": "x"}, "name"),
        ({"name": "t", "regex": "x", "flags": "i"}, "flags"),
    ],
)
def test_bad_patterns_are_errors_naming_the_pattern(pattern, message):
    with pytest.raises(ValidationError, match=message):
        RedactionConfig(caller_key=KEY, patterns=[pattern])


def test_pattern_names_are_unique():
    with pytest.raises(ValidationError, match="unique.*TICKET"):
        RedactionConfig(patterns=[{"name": "ticket", "regex": "a"}, {"name": "TICKET", "regex": "b"}])


def test_built_in_detectors_can_be_switched_off():
    text = "gateway 10.0.0.1, mail ops@example.com"
    assert redactor(disabled_detectors=["ip"]).redact(text) == "gateway 10.0.0.1, mail [EMAIL]"
    assert redactor(disabled_detectors=["email"]).redact(text) == "gateway [IP], mail ops@example.com"
    with pytest.raises(ValidationError, match="disabled_detectors"):
        RedactionConfig(disabled_detectors=["names"])


# -- whole trace events ---------------------------------------------------------------------------

PII = ["alice@example.com", "+44 20 7946 0958", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
       "192.168.1.10", "536-22-8714", "u-123", "bob@example.com"]


def passage(pid: str, score: float, text: str) -> dict:
    return {"id": pid, "score": score, "doc_id": pid.split("#")[0], "doc_version": "2026-3", "span": [0, 480],
            "text": text, "acl": ["group:staff", "user:u-123", "tenant:acme"], "indexed_at": 1_795_000_000.0,
            "embedding_model": "e5-large-v2@2"}


def full_trace() -> dict:
    first = passage("leave-policy#4", 0.82, "Questions to alice@example.com or +44 20 7946 0958.")
    second = passage("payroll#2", 0.41, "Refunds go to DE89 3704 0044 0532 0130 00 within 5 days.")
    return {
        "type": "trace", "trace_id": "9f1c2e", "time": 1_796_000_000.0, "tenant": "acme", "conversation_id": "c-77",
        "caller": {"id": "u-123", "groups": ["staff", "hr"]},
        "query": "My card 4111 1111 1111 1111 was charged twice, I logged in from 192.168.1.10",
        "index": {"name": "policies", "version": "2026-11-28"},
        "retrievals": [{"retriever": "bm25", "passages": [first, second]},
                       {"retriever": "vector", "passages": [second], "query": "charged twice bob@example.com"}],
        "turn": 3,
        "context": [first],
        "answer": {"text": "Your SSN 536-22-8714 is not needed; see leave-policy#4.", "abstained": False,
                   "citations": ["leave-policy#4"]},
        "latency_ms": {"retrieve": 41, "total": 910}, "usage": {"input_tokens": 1200, "cost_usd": 0.0031},
    }


def test_a_redacted_trace_holds_no_personal_data_and_keeps_the_rest():
    event = full_trace()
    original = json.dumps(event)
    out = REDACTOR.redact_trace(event)
    assert json.dumps(event) == original  # a copy: the input is untouched
    dumped = json.dumps(out)
    for pii in PII:
        assert pii not in dumped
    pseudonym = REDACTOR.pseudonymize_caller("u-123")
    assert out["caller"] == {"id": pseudonym, "groups": ["staff", "hr"]}
    assert out["query"] == "My card [CARD] was charged twice, I logged in from [IP]"
    assert out["answer"] == {"text": "Your SSN [NATIONAL_ID] is not needed; see leave-policy#4.", "abstained": False,
                             "citations": ["leave-policy#4"]}
    first, second = out["retrievals"][0]["passages"]
    assert first["text"] == "Questions to [EMAIL] or [PHONE]."
    assert second["text"] == "Refunds go to [IBAN] within 5 days."
    assert out["context"][0] == first and out["retrievals"][1]["passages"][0] == second
    # what a retriever searched is free text like the user's message; a list without one searched the message
    assert out["retrievals"][1]["query"] == "charged twice [EMAIL]" and "query" not in out["retrievals"][0]
    # a permission case still shows the caller's own principal, under the same pseudonym
    assert first["acl"] == ["group:staff", f"user:{pseudonym}", "tenant:acme"]
    for key in ("trace_id", "time", "tenant", "index", "latency_ms", "usage", "turn"):
        assert out[key] == event[key]
    # a conversation id (often built from a user's name or email) would undo the caller's pseudonym
    conversation = REDACTOR.pseudonymize_conversation("c-77")
    assert out["conversation_id"] == conversation and conversation.startswith("conversation:")
    assert conversation[len("conversation:"):] != REDACTOR.pseudonymize_caller("c-77")[len("caller:"):]
    for kept, source in ((first, event["context"][0]), (second, event["retrievals"][0]["passages"][1])):
        assert {k: v for k, v in kept.items() if k not in ("text", "acl")} == {
            k: v for k, v in source.items() if k not in ("text", "acl")}


def test_ids_and_names_in_a_redacted_trace_are_shown_ids():
    """Ids and names a sender chose become shown ids (the id itself when nothing fires on it), so
    a sample names them as the findings and metrics do; two ids that redact alike stay apart."""
    private = {"trace_id": "t-alice@example.com", "tenant": "bob@example.org", "index": "idx-AKIAIOSFODNN7EXAMPLE",
               "passage": "notes-carol@example.net#1", "doc": "notes-carol@example.net", "retriever": "dan@example.com"}
    passage = {"id": private["passage"], "doc_id": private["doc"], "doc_version": "v-erin@example.com", "score": 0.5}
    event = {"type": "trace", "trace_id": private["trace_id"], "time": 1.0, "query": "q", "tenant": private["tenant"],
             "index": {"name": private["index"], "version": "v1"}, "context": [passage],
             "retrievals": [{"retriever": private["retriever"], "passages": [passage]}],
             "answer": {"text": "a", "citations": [private["passage"], "clean#2"]}}
    out = REDACTOR.redact_trace(event)
    shown = REDACTOR.shown_id
    assert (out["trace_id"], out["tenant"], out["index"]["name"]) == (
        shown(private["trace_id"]), shown(private["tenant"]), shown(private["index"]))
    assert out["retrievals"][0]["retriever"] == shown(private["retriever"])
    assert (out["context"][0]["id"], out["context"][0]["doc_id"]) == (shown(private["passage"]), shown(private["doc"]))
    assert out["answer"]["citations"] == [shown(private["passage"]), "clean#2"]
    assert out["context"][0]["doc_version"] == "[EMAIL]"  # a version: redacted text, no hash
    assert shown(private["trace_id"]).startswith("[EMAIL]~k")
    assert shown("t-alice@example.com") != shown("t-zoe@example.com")
    for value in private.values():
        assert value not in json.dumps(out)


def test_feedback_comments_are_redacted():
    event = {"type": "feedback", "trace_id": "9f1c2e", "kind": "comment", "comment": "call me on 555-123-4567"}
    assert REDACTOR.redact_trace(event) == dict(event, comment="call me on [PHONE]")
    joined = dict(full_trace(), feedback=[{"kind": "comment", "comment": "write to bob@example.com"}])
    assert REDACTOR.redact_trace(joined)["feedback"] == [{"kind": "comment", "comment": "write to [EMAIL]"}]


def test_sparse_and_odd_traces_do_not_break_redaction():
    bare = {"type": "trace", "trace_id": "t", "time": 1.0, "query": "", "index": {"name": "i"}}
    assert REDACTOR.redact_trace(bare) == bare
    odd = dict(bare, caller={"groups": ["g"]}, answer=None, context=None, retrievals=[{"retriever": "x"}, "junk"])
    assert REDACTOR.redact_trace(odd) == dict(odd, retrievals=[{"retriever": "x"}])  # not an object: dropped


def test_fields_not_in_the_event_model_are_dropped_wherever_they_are():
    """An allowlist: a field nobody declared safe does not reach a sample, whatever it holds."""
    planted = "jane.roe@example.com"
    event = dict(full_trace(), x_debug=planted, metadata={"owner": planted})
    event["caller"] = dict(event["caller"], email=planted)
    event["context"] = [dict(p, extra={"note": planted}) for p in event["context"]]
    redacted = REDACTOR.redact_trace(event)
    assert planted not in json.dumps(redacted)
    assert "x_debug" not in redacted and "metadata" not in redacted and "email" not in redacted["caller"]


# -- arbitrary text ---------------------------------------------------------------------------------

FRAGMENTS = sorted({s for case in CORPUS for s in case["pii"] + case["keep"]}) + [
    " ", "-", ".", ":", "@", "+", "(", ")", "/", "#", "0", "1", "4", "9", "12", "555", "2026", "x", "DE", "[IP]"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="0123456789 -.:@+()/#abefXDEG[]_"),
                 st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join)))
def test_redaction_never_raises_and_is_stable(text):
    once = REDACTOR.redact(text)
    assert isinstance(once, str)
    assert REDACTOR.redact(once) == once


def test_adversarial_text_of_the_largest_allowed_size_is_redacted_quickly():
    texts = ["1 " * 30_000, "4" * 60_000, "a" * 60_000 + "@", "a." * 30_000 + "@x", ":" * 60_000 + "1",
             "+1 " * 20_000, "1." * 30_000, "DE89 " * 12_000, "a@" * 30_000 + "b.com", "0-" * 30_000,
             "4111111111111111 " * 3_800, "555-123-4567 " * 5_000, "call " + "1 " * 30_000, "10.0.0.1 " * 7_000]
    # CPU time, not wall-clock: a pattern that backtracks burns CPU for minutes, while a machine
    # busy with other work only makes the wait longer
    started = time.process_time()
    for text in texts:
        REDACTOR.redact(text)
    assert time.process_time() - started < 5


def test_the_typed_trace_is_redacted_exactly_as_its_json():
    """The sampler redacts the decoded struct (``redact_event``); the JSON-shaped reference
    (``redact_trace``) must give the same, on simulated traffic with the corpus planted in every text."""
    from ragmon.monitor.app.simulate import Simulator
    from ragmon.monitor.config.pipeline import Limits
    from ragmon.monitor.core.decode import Decoder
    from ragmon.monitor.core.model import TraceEvent

    decoder = Decoder(Limits(), lambda: time.time())
    texts = itertools.cycle([case["text"] for case in CORPUS])
    simulator = Simulator(seed=5, start=time.time() - 86400, rate=5.0)
    compared = 0
    for event in simulator.traffic(300):
        if event.get("type") != "trace":
            continue
        event["query"] = next(texts)
        if event.get("answer"):
            event["answer"]["text"] = next(texts)
        for retrieval in event.get("retrievals", [])[::2]:  # some lists searched a rewrite, the others the message
            retrieval["query"] = next(texts)
        for passage in [p for r in event.get("retrievals", []) for p in r["passages"]] + (event.get("context") or []):
            passage["text"] = next(texts)
            passage["acl"] = [*passage.get("acl", []), "user:u-77"]
        trace = decoder.decode(json.dumps(event).encode())
        assert isinstance(trace, TraceEvent)
        typed = REDACTOR.redact_event(trace)
        assert typed == REDACTOR.redact_trace(msgspec.to_builtins(trace))
        compared += 1
    assert compared > 200


def test_an_id_without_personal_data_is_shown_as_it_is():
    for clean in ("4bf92f3577b34da6a3ce929d0e0e4736", "9f1c2e", "acme", "leave-policy-2026#4", "policies"):
        assert REDACTOR.shown_id(clean) == clean


def test_a_private_id_is_shown_redacted_with_a_keyed_hash_that_two_ids_never_share():
    alice, bob = REDACTOR.shown_id("collide-alice@example.com"), REDACTOR.shown_id("collide-bob@example.org")
    # both redact to the same text; what is shown still tells them apart
    assert REDACTOR.redact("collide-alice@example.com") == REDACTOR.redact("collide-bob@example.org") == "[EMAIL]"
    assert alice != bob and alice.startswith("[EMAIL]~k") and bob.startswith("[EMAIL]~k")
    assert "alice" not in alice and "example" not in alice
    # stable for the same key, different for another key
    assert REDACTOR.shown_id("collide-alice@example.com") == alice
    assert Redactor(RedactionConfig(caller_key="another-key-0123456789")).shown_id("collide-alice@example.com") != alice


def test_a_sender_cannot_forge_the_shown_id_of_another():
    victim = REDACTOR.shown_id("carol@example.com")
    # the shown id sent as a trace id of its own is hashed again: it holds the separator
    assert REDACTOR.shown_id(victim) != victim
    assert REDACTOR.shown_id("a~b") != "a~b"


@given(st.text(min_size=1, max_size=60))
@settings(max_examples=300, deadline=None)
def test_a_shown_id_passes_the_detectors_unchanged(value):
    shown = REDACTOR.shown_id(value)
    assert REDACTOR.redact(shown) == shown
    assert len(shown) <= max(len(value), 64 + 2 + 16)


def test_a_shown_id_needs_the_key_only_when_it_hashes():
    keyless = Redactor(RedactionConfig(), require_key=False)
    assert keyless.shown_id("acme") == "acme"
    with pytest.raises(ValueError, match="caller_key"):
        keyless.shown_id("bob@example.com")
