"""Redaction before anything is stored or exported (docs/sampling.md).

:class:`Redactor` replaces secrets and personal data in free text by typed placeholders
(``[SECRET]``, ``[EMAIL]``, ``[PHONE]``, ``[CARD]``, ``[IBAN]``, ``[IP]``, ``[NATIONAL_ID]``,
``[ADDRESS]``, ``[PERSON]``, and ``[NAME]`` for an operator's pattern ``name``) and replaces caller
and conversation ids by keyed hashes, so a stored sample can still be grouped by caller without
saying who the caller is. Groups are kept: permission cases need them.

The detectors live in ``detectors/``, one module per family. They run in a fixed order, the most
specific first: the operator's own patterns; secrets by shape and context (a URL's password sits
before an ``@``, a key may hold anything); e-mail (an address may hold digits and names); secrets by
entropy (a random-looking run can start inside an address's domain); the structured kinds; street
addresses (which hold capitalised words); names last.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec
from msgspec import structs
from pydantic import Field, SecretStr, field_validator, model_validator

from ragmon.monitor.config.section import ConfigSection
from ragmon.monitor.core.model import Passage, TraceEvent
from ragmon.monitor.labeling.detectors import people, secrets, structured
from ragmon.monitor.labeling.detectors.base import DIGIT, Rule, replace_all
from ragmon.monitor.labeling.keyring import CallerKeyring

Detector = Literal["secret", "email", "phone", "card", "iban", "ip", "national_id", "address", "person"]
MIN_KEY_LENGTH = 16
PSEUDONYM_PREFIX = "caller:"
PSEUDONYM_HEX_CHARS = 24  # 96 bits: no collisions among realistic caller populations
SHOWN_SEPARATOR = "~"  # in a shown id: the redacted text, this, and the keyed hash (see Redactor.shown_id)
SHOWN_HEX_CHARS = 16  # 64 bits: two private ids of one deployment do not share a shown id
SHOWN_TEXT_CHARS = 64  # of a private id's redacted text, shown before its keyed hash
_MAX_PASSES = 4  # redact() repeats until nothing changes (see Redactor.redact)
_SHORT, _SHORT_CACHE_ENTRIES = 80, 16384  # at most about 3 MB of remembered strings
_CALLER_CACHE_ENTRIES = 4096  # caller ids and their pseudonyms: about 1 MB at most, ids of up to 256 characters


class RedactionPattern(ConfigSection):
    """An operator's own kind of personal data, e.g. employee or customer numbers."""

    name: str = Field(
        ..., pattern=r"^[A-Za-z][A-Za-z0-9_]{0,31}$",
        description="Name of the kind; matches are replaced by `[NAME]` (upper-cased).",
    )
    regex: str = Field(..., description="Python regular expression; use (?i) for case-insensitive matching.")

    @model_validator(mode="after")
    def _regex_compiles(self) -> RedactionPattern:
        try:
            compiled = re.compile(self.regex)
        except re.error as error:
            raise ValueError(f"pattern {self.name!r}: not a valid regular expression: {error}") from None
        if compiled.fullmatch(""):
            raise ValueError(f"pattern {self.name!r}: matches the empty string")
        return self


class RedactionConfig(ConfigSection):
    """Redaction of samples before they are stored or exported (docs/sampling.md)."""

    caller_key: SecretStr = Field(
        SecretStr(""),
        description=f"Secret key of the caller-id hash (HMAC-SHA256), at least {MIN_KEY_LENGTH} characters. "
        "Must be set wherever samples are stored. New pseudonyms are made with it; to rotate it, move the old "
        "one to `previous_caller_keys` (docs/deployment.md, \"Rotating secrets\").",
    )
    previous_caller_keys: list[SecretStr] = Field(
        default_factory=list,
        description="Keys `caller_key` had before, newest first: stored pseudonyms made under them are still "
        "matched (erase, trace and findings look-ups, `samples --tenant`, restore); none makes new ones. Drop one "
        "once `ragmon keys rotate` says no stored row needs it (docs/deployment.md, \"Rotating secrets\").",
    )
    patterns: list[RedactionPattern] = Field(
        default_factory=list,
        description="Extra kinds of personal data as {name, regex}, applied before the built-in detectors.",
    )
    disabled_detectors: list[Detector] = Field(
        default_factory=list,
        description="Built-in detectors to switch off (secret, email, phone, card, iban, ip, national_id, address, "
        "person), for corpora where such strings are content rather than personal data. Empty: all on.",
    )

    @field_validator("caller_key")
    @classmethod
    def _key_long_enough(cls, key: SecretStr) -> SecretStr:
        if 0 < len(key.get_secret_value()) < MIN_KEY_LENGTH:
            raise ValueError(f"must be at least {MIN_KEY_LENGTH} characters (or empty where nothing is stored)")
        return key

    @field_validator("previous_caller_keys")
    @classmethod
    def _previous_keys_long_enough(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for i, key in enumerate(keys):
            if len(key.get_secret_value()) < MIN_KEY_LENGTH:
                raise ValueError(f"[{i}]: must be at least {MIN_KEY_LENGTH} characters")
        return keys

    @field_validator("patterns")
    @classmethod
    def _names_unique(cls, patterns: list[RedactionPattern]) -> list[RedactionPattern]:
        names = [p.name.upper() for p in patterns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pattern names must be unique (case-insensitive): {', '.join(duplicates)}")
        return patterns


# A rule as _apply reads it: (needs, its pattern's search, pattern, check, placeholder)
_Unpacked = tuple[Any, Any, re.Pattern[str], Any, str]


def _unpacked(rules: Iterable[Rule]) -> tuple[_Unpacked, ...]:
    return tuple((rule.needs, rule.pattern.search, rule.pattern, rule.check, rule.placeholder) for rule in rules)


class Redactor:
    """Redacts text and trace events. Build one per configuration and share it; it is stateless."""

    def __init__(self, config: RedactionConfig, *, require_key: bool = True) -> None:
        """``require_key``: refuse an empty ``caller_key`` (anywhere samples are stored or exported).
        Without it, only :meth:`redact` is usable and :meth:`pseudonymize_caller` raises.
        Pseudonyms are made with ``caller_key``; the ``*_candidates`` look-ups give them under
        ``previous_caller_keys`` too (``keyring.py``)."""
        self._ring = CallerKeyring(config.caller_key.get_secret_value(),
                                   [key.get_secret_value() for key in config.previous_caller_keys])
        self._key = bool(self._ring)
        if require_key and not self._key:
            raise ValueError(_NO_KEY)
        self._patterns = [(re.compile(p.regex), f"[{p.name.upper()}]") for p in config.patterns]
        off = set(config.disabled_detectors)
        self._secrets = _unpacked(r for r in secrets.RULES if r.detector not in off)
        self._email = "email" not in off
        self._random = _unpacked(r for r in secrets.BY_ENTROPY if r.detector not in off)
        self._structured = _unpacked(r for r in structured.RULES if r.detector not in off)
        self._people = _unpacked(r for r in people.RULES if r.detector not in off)
        # Ids, versions and model names recur from trace to trace: short strings are remembered.
        self._redact_short = functools.lru_cache(maxsize=_SHORT_CACHE_ENTRIES)(self._redact)
        # So do callers, and the users named by documents' ACLs: a trace's findings, its sample and
        # its chat turn each name its caller, an HMAC apiece (the keys never change in a Redactor)
        self._caller_pseudonym = functools.lru_cache(maxsize=_CALLER_CACHE_ENTRIES)(self._hmac_caller)

    def redact(self, text: str) -> str:
        """``text`` with every detected secret and piece of personal data replaced by its typed
        placeholder.

        Replacing a match changes what its neighbours see, so the passes repeat until nothing
        changes (almost always one pass with nothing to do, or two): the result is stable,
        ``redact(redact(x)) == redact(x)``.
        """
        return self._redact_short(text) if len(text) <= _SHORT else self._redact(text)

    def _redact(self, text: str) -> str:
        for _ in range(_MAX_PASSES):
            redacted = self._pass(text)
            if redacted == text:
                break
            text = redacted
        return text

    def _pass(self, text: str) -> str:
        for pattern, placeholder in self._patterns:  # first: the operator's kinds are the more specific
            text = pattern.sub(lambda m, p=placeholder: p if m.group() else "", text)
        text = self._apply(self._secrets, text)
        if self._email and "@" in text:
            text = structured.EMAIL.sub("[EMAIL]", text)
        text = self._apply(self._random, text)
        if DIGIT.search(text):  # every structured detector needs a digit
            text = self._apply(self._structured, text)
        return self._apply(self._people, text)

    @staticmethod
    def _apply(rules: tuple[_Unpacked, ...], text: str) -> str:
        # a rule's `needs` and replace_all's first search, inlined: nearly every text matches nearly no
        # rule, and a call per rule cost more than the search (every id and text of a sample or a
        # chat turn goes through some twenty rules)
        for needs, search, pattern, check, placeholder in rules:
            if needs is not None and (needs not in text if needs.__class__ is str else needs.search(text) is None):
                continue
            first = search(text)
            if first is not None:
                text = replace_all(text, pattern, check, placeholder, first)
        return text

    @property
    def key_id(self) -> str:
        """The id of the key new pseudonyms are made with (``keyring.key_id``; "" without a key)."""
        return self._ring.newest_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key of the ring, the newest first."""
        return self._ring.ids

    def pseudonymize_caller(self, caller_id: str) -> str:
        """A stable stand-in for a caller id: ``caller:`` and the first 24 hex digits of
        HMAC-SHA256(caller_key, caller_id). Same key, same id: same pseudonym."""
        if not self._key:
            raise ValueError(_NO_KEY)
        return self._caller_pseudonym(caller_id)

    def _hmac_caller(self, caller_id: str) -> str:
        return PSEUDONYM_PREFIX + self._ring.digest(caller_id.encode())[:PSEUDONYM_HEX_CHARS]

    def caller_candidates(self, caller_id: str) -> tuple[str, ...]:
        """The pseudonyms ``caller_id`` has under every key of the ring, the newest first: what a
        stored row naming that caller may hold."""
        if not self._key:
            raise ValueError(_NO_KEY)
        return tuple(PSEUDONYM_PREFIX + digest[:PSEUDONYM_HEX_CHARS] for digest in self._ring.digests(
            caller_id.encode()))

    def pseudonymize_conversation(self, conversation_id: str) -> str:
        """A stable stand-in for a conversation id, ``conversation:`` and 24 hex digits: conversation
        ids are often built from the user's name or email, which would undo the caller's pseudonym.
        Keyed apart from callers, so a conversation id equal to a caller id does not link the two."""
        if not self._key:
            raise ValueError(_NO_KEY)
        return "conversation:" + self._ring.digest(_CONVERSATION + conversation_id.encode())[:PSEUDONYM_HEX_CHARS]

    def conversation_candidates(self, conversation_id: str) -> tuple[str, ...]:
        """The pseudonyms ``conversation_id`` has under every key of the ring, the newest first."""
        if not self._key:
            raise ValueError(_NO_KEY)
        return tuple("conversation:" + digest[:PSEUDONYM_HEX_CHARS] for digest in self._ring.digests(
            _CONVERSATION + conversation_id.encode()))

    def shown_id(self, value: str) -> str:
        """How every surface shows an id a sender chose (a trace id, a tenant or index name, a
        document id) and the key it is stored and looked up by: the labeling queue, the findings,
        ``trace show``, the status page, pushed alerts, exemplars and metric labels all use this.

        An id on which no detector fires (a hex trace id, ``acme``, ``leave-policy``) is shown as
        it is, so it can still be found in the application's own logs and tracing. Any other id
        is shown as its redacted text (at most 64 characters), ``~k``, and 16 hex digits of
        HMAC-SHA256 keyed with ``caller_key`` over ``id`` + a NUL byte + the id (the ``k`` keeps an
        all-digit hash from looking like a card number: a shown id passes the detectors unchanged,
        ``redact(shown_id(x)) == shown_id(x)``). So two different
        ids never share what is shown: an id shown as it is holds no ``~``, and one with a keyed
        hash differs from every other by that hash (an id holding ``~`` is always hashed, so a
        sender cannot forge another's shown id). Same key, same id: same shown id, on every
        replica and after a replay."""
        return self._shown(value, every_key=False)[0]

    def shown_candidates(self, value: str) -> tuple[str, ...]:
        """The shown ids ``value`` has under every key of the ring, the newest first (one, itself,
        when it is shown as it is): what a stored row naming it may hold."""
        return self._shown(value, every_key=True)

    def _shown(self, value: str, *, every_key: bool) -> tuple[str, ...]:
        redacted = self.redact(value)
        if SHOWN_SEPARATOR not in value and redacted == value:
            return (value,)
        if not self._key:
            raise ValueError(_NO_KEY)
        data = b"id\x00" + value.encode()
        digests = self._ring.digests(data) if every_key else (self._ring.digest(data),)
        return tuple(redacted[:SHOWN_TEXT_CHARS] + SHOWN_SEPARATOR + "k" + digest[:SHOWN_HEX_CHARS]
                     for digest in digests)

    def redact_event(self, trace: TraceEvent) -> dict[str, Any]:
        """A redacted copy of a decoded trace as JSON-shaped data: what :meth:`redact_trace` gives
        for the same trace, built from the typed struct (no encoding, decoding or deep copy).

        Only the fields the event model knows are there (the decoder drops the others). Ids and
        names a sender chose (of the trace, passages and documents, citations, tenant, index and
        retrievers) become their shown ids (:meth:`shown_id`), so a sample names them as the
        findings, alerts and metrics do; free text (query, each retrieval's searched query, answer,
        passage texts) and the other strings a sender chose (versions, embedding model) pass
        through the detectors; caller
        ids, ``user:`` principals and conversation ids become pseudonyms."""
        done: dict[int, Passage] = {}
        text, shown = self._optional, self.shown_id

        def passage(p: Passage) -> Passage:
            if id(p) not in done:  # a passage shared by two lists: once
                done[id(p)] = structs.replace(
                    p, id=shown(p.id), doc_id=None if p.doc_id is None else shown(p.doc_id),
                    doc_version=text(p.doc_version), text=text(p.text), embedding_model=text(p.embedding_model),
                    acl=None if p.acl is None else [self.principal(principal) for principal in p.acl])
            return done[id(p)]

        changes: dict[str, Any] = {
            "trace_id": shown(trace.trace_id), "query": self.redact(trace.query), "tenant": shown(trace.tenant),
            "index": structs.replace(trace.index, name=shown(trace.index.name), version=text(trace.index.version)),
        }
        if trace.retrievals:
            changes["retrievals"] = [
                structs.replace(r, retriever=shown(r.retriever), passages=[passage(p) for p in r.passages],
                                query=text(r.query))
                for r in trace.retrievals]
        if trace.context is not None:
            changes["context"] = [passage(p) for p in trace.context]
        if trace.answer is not None:
            changes["answer"] = structs.replace(trace.answer, text=text(trace.answer.text),
                                                citations=[shown(c) for c in trace.answer.citations])
        if trace.caller is not None:
            changes["caller"] = structs.replace(
                trace.caller, id=None if trace.caller.id is None else self.pseudonymize_caller(trace.caller.id),
                groups=[self.principal(group) for group in trace.caller.groups])
        if trace.conversation_id is not None:
            changes["conversation_id"] = self.pseudonymize_conversation(trace.conversation_id)
        return msgspec.to_builtins(structs.replace(trace, **changes))

    def _optional(self, text: str | None) -> str | None:
        return None if text is None else self.redact(text)

    def principal(self, principal: str) -> str:
        """``user:`` principals become pseudonyms; other principals (``group:``, ``tenant:``) pass
        through the detectors (a group may be named after a person)."""
        if principal.startswith("user:"):
            return "user:" + self.pseudonymize_caller(principal[5:])
        return self.redact(principal)

    def redact_trace(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted copy of a native trace (or feedback) event as JSON-shaped data (docs/events.md),
        by allowlist: fields not in the event model are dropped, ids and names become shown ids,
        every other string kept goes through the detectors, and caller ids, ``user:`` principals
        and conversation ids become pseudonyms (see :meth:`redact_event`, which the sampler uses;
        this is its reference)."""
        return self._walk(copy.deepcopy(dict(event)), _TRACE_FIELDS)

    def _walk(self, data: dict[str, Any], allowed: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key not in allowed:
                continue  # not known to be safe: dropped
            rule = allowed[key]
            if isinstance(rule, Mapping):
                if isinstance(value, dict):
                    out[key] = self._walk(value, rule)
                elif isinstance(value, list):  # of objects: anything else in it is dropped
                    out[key] = [self._walk(v, rule) for v in value if isinstance(v, dict)]
                elif value is None:
                    out[key] = None
            else:
                out[key] = self._value(value, rule)
        return out

    def _value(self, value: Any, rule: str) -> Any:
        if isinstance(value, list):
            return [self._value(v, rule) for v in value]
        if not isinstance(value, str):
            return value
        if rule == "caller":
            return self.pseudonymize_caller(value)
        if rule == "conversation":
            return self.pseudonymize_conversation(value)
        if rule == "principal":
            return self.principal(value)
        if rule == "id":
            return self.shown_id(value)
        return value if rule == "keep" else self.redact(value)


# The reference allowlist of redact_trace: "text" goes through the detectors, "id" becomes a shown
# id, "keep" is kept (numbers, times, enumerations, the event type), the rest as named.
_PASSAGE_FIELDS = {"id": "id", "score": "keep", "doc_id": "id", "doc_version": "text", "span": "keep",
                   "text": "text", "acl": "principal", "indexed_at": "keep", "source_modified_at": "keep",
                   "embedding_model": "text"}
_TRACE_FIELDS = {
    "type": "keep", "trace_id": "id", "time": "keep", "query": "text", "tenant": "id",
    "conversation_id": "conversation", "turn": "keep", "index": {"name": "id", "version": "text"},
    "caller": {"id": "caller", "groups": "principal"},
    "retrievals": {"retriever": "id", "query": "text", "passages": _PASSAGE_FIELDS}, "context": _PASSAGE_FIELDS,
    "answer": {"text": "text", "abstained": "keep", "citations": "id"},
    "latency_ms": {"retrieve": "keep", "rerank": "keep", "generate": "keep", "total": "keep"},
    "usage": {"input_tokens": "keep", "output_tokens": "keep", "cost_usd": "keep"},
    # a feedback event, or feedback joined to its trace
    "kind": "keep", "value": "keep", "comment": "text",
    "feedback": {"type": "keep", "trace_id": "id", "kind": "keep", "time": "keep", "value": "keep",
                 "comment": "text"},
}


_CONVERSATION = b"conversation\x00"  # keys conversations apart from callers
_NO_KEY = ("redaction.caller_key is empty: set it (RAGMON_REDACTION__CALLER_KEY, at least "
           f"{MIN_KEY_LENGTH} characters) before samples are stored or exported")

