"""Redaction before anything is stored or exported (docs/sampling.md).

:class:`Redactor` replaces personal data in free text by typed placeholders (``[EMAIL]``,
``[PHONE]``, ``[CARD]``, ``[IBAN]``, ``[IP]``, ``[NATIONAL_ID]``, and ``[NAME]`` for an operator's
pattern ``name``) and replaces caller ids by a keyed hash, so a stored sample can still be grouped
by caller without saying who the caller is. Groups are kept: permission cases need them.

Detection leans on checks, not on shapes alone: card numbers must pass Luhn, IBANs their country's
length and mod-97, IP addresses must parse, national ids their issuing rules. What merely looks
like a number (dates, versions, times, amounts, section numbers, ids such as ``policy-2026#4``)
is left alone. Detectors run in a fixed order, the most specific first: an e-mail address may hold
digits, an IBAN or a card number may look like a phone number, an IPv6 address may end in IPv4.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec
from msgspec import structs
from pydantic import Field, SecretStr, field_validator, model_validator

from ragmon.monitor.config.section import ConfigSection
from ragmon.monitor.core.model import Passage, TraceEvent

Detector = Literal["email", "phone", "card", "iban", "ip", "national_id"]
MIN_KEY_LENGTH = 16
PSEUDONYM_PREFIX = "caller:"
PSEUDONYM_HEX_CHARS = 24  # 96 bits: no collisions among realistic caller populations
_MAX_PASSES = 4  # redact() repeats until nothing changes (see Redactor.redact)


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
        "Must be set wherever samples are stored; changing it changes every pseudonym.",
    )
    patterns: list[RedactionPattern] = Field(
        default_factory=list,
        description="Extra kinds of personal data as {name, regex}, applied before the built-in detectors.",
    )
    disabled_detectors: list[Detector] = Field(
        default_factory=list,
        description="Built-in detectors to switch off (email, phone, card, iban, ip, national_id), for corpora "
        "where such strings are content rather than personal data. Empty: all on.",
    )

    @field_validator("caller_key")
    @classmethod
    def _key_long_enough(cls, key: SecretStr) -> SecretStr:
        if 0 < len(key.get_secret_value()) < MIN_KEY_LENGTH:
            raise ValueError(f"must be at least {MIN_KEY_LENGTH} characters (or empty where nothing is stored)")
        return key

    @field_validator("patterns")
    @classmethod
    def _names_unique(cls, patterns: list[RedactionPattern]) -> list[RedactionPattern]:
        names = [p.name.upper() for p in patterns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pattern names must be unique (case-insensitive): {', '.join(duplicates)}")
        return patterns


# A check looks at a candidate match and returns the span to replace, or None to leave it.
Check = Callable[[str, re.Match[str]], tuple[int, int] | None]

_DIGIT = re.compile(r"[0-9]")
_DATE = re.compile(r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4}")


def _clean_end(text: str, end: int, glue: str) -> bool:
    """The candidate ends at a boundary: not glued to a word, nor continued by a ``glue`` character
    and a digit (`.5`, `-7`). Each detector's look-behind refuses the same characters before a
    candidate, so a candidate refused here never makes its neighbour acceptable, or the reverse:
    what one pass leaves, the next leaves too."""
    if end >= len(text):
        return True
    char = text[end]
    if char.isalnum() or char == "_":
        return False
    return not (char in glue and end + 1 < len(text) and text[end + 1].isdigit())


def _whole(text: str, m: re.Match[str], glue: str, group: int = 0) -> tuple[int, int] | None:
    return m.span(group) if _clean_end(text, m.end(), glue) else None


def _count_digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


# -- e-mail --------------------------------------------------------------------------------------

_LOCAL = r"[\w.%+\-']"  # the local part as people write it (RFC 5322 allows more, URLs use those)
_EMAIL = re.compile(rf"(?<!{_LOCAL}){_LOCAL}+@(?:[\w\-]+\.)+(?:[^\W\d_]{{2,63}}|xn--[\w\-]+)(?!\w)")


# -- IBAN ----------------------------------------------------------------------------------------

# Lengths from the SWIFT IBAN registry; a country not listed is not detected.
_IBAN_LENGTHS = dict(
    AD=24, AE=23, AL=28, AT=20, AZ=28, BA=20, BE=16, BG=22, BH=22, BI=27, BR=29, BY=28, CH=21, CR=22, CY=28,
    CZ=24, DE=22, DJ=27, DK=18, DO=28, EE=20, EG=29, ES=24, FI=18, FK=18, FO=18, FR=27, GB=22, GE=22, GI=23,
    GL=18, GR=27, GT=28, HR=21, HU=28, IE=22, IL=23, IQ=23, IS=26, IT=27, JO=30, KW=30, KZ=20, LB=28, LC=32,
    LI=21, LT=20, LU=20, LV=21, LY=25, MC=27, MD=24, ME=22, MK=19, MN=20, MR=27, MT=31, MU=30, NI=28, NL=18,
    NO=15, OM=23, PK=24, PL=28, PS=29, QA=29, RO=24, RS=22, RU=33, SA=24, SC=31, SD=18, SE=24, SI=19, SK=24,
    SM=27, SO=23, ST=25, SV=28, TL=23, TN=24, TR=26, UA=29, VA=22, VG=24, XK=20, YE=30,
)
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})([0-9]{2})")
_IBAN_SEPARATORS = " -\u00a0"


def _alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _iban(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """Read exactly the country's length of characters (single separators allowed between them)."""
    country = m.group(1).upper()
    length = _IBAN_LENGTHS.get(country)
    if length is None:
        return None
    chars: list[str] = []
    i, n = m.end(), len(text)
    while len(chars) < length - 4 and i < n:
        if _alnum(text[i]):
            chars.append(text[i])
        elif not (text[i] in _IBAN_SEPARATORS and i + 1 < n and _alnum(text[i + 1])):
            break
        i += 1
    if len(chars) < length - 4 or (i < n and _alnum(text[i])):
        return None
    rearranged = "".join(chars).upper() + country + m.group(2)
    number = "".join(str(int(c, 36)) for c in rearranged)
    return (m.start(), i) if int(number) % 97 == 1 else None


# -- payment cards -------------------------------------------------------------------------------

# The first group of a card: 4 digits and more to come, or 13-19 digits. Digit first: a faster scan.
_CARD_GROUP = re.compile(r"[1-9](?<![\w.][1-9])(?:[0-9]{3}(?=[ \-][0-9])|[0-9]{12,18}(?![0-9]))")
_DIGITS = re.compile(r"[0-9]+")
_IBAN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ \-][A-Za-z0-9]{4}){0,7}[ \-]$")


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = ord(char) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_layout(groups: list[str], separators: list[str]) -> bool:
    """One block of digits, or how cards are printed: 4-4-4-4(-3) and shorter tails, Amex 4-6-5, Diners 4-6-4."""
    if len(groups) == 1:
        return True
    if len(set(separators)) != 1:
        return False
    sizes = [len(g) for g in groups]
    return (all(s == 4 for s in sizes[:-1]) and 1 <= sizes[-1] <= 4) or sizes in ([4, 6, 5], [4, 6, 4])


def _card(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The longest run of whole digit groups, starting at this one, that is a Luhn-valid 13-19 digit
    number printed the way cards are. A card inside an IBAN-shaped string is the IBAN's business."""
    first = m.group()
    if _IBAN_HEAD.search(text, max(0, m.start() - 40), m.start()):
        return None
    groups, separators, ends = [first], [], [m.end()]
    while len(groups) < 5 and ends[-1] + 1 < len(text) and text[ends[-1]] in " -" and text[ends[-1] + 1].isdigit():
        group = _DIGITS.match(text, ends[-1] + 1).group()  # type: ignore[union-attr]  # a digit is there
        separators.append(text[ends[-1]])
        groups.append(group)
        ends.append(ends[-1] + 1 + len(group))
    digits, best = "", None
    for j, group in enumerate(groups):
        digits += group
        if len(digits) > 19:
            break
        if (len(digits) >= 13 and _card_layout(groups[: j + 1], separators[:j]) and _luhn(digits)
                and _clean_end(text, ends[j], ".")):
            best = (m.start(), ends[j])
    return best


# -- national ids --------------------------------------------------------------------------------

_SSN = re.compile(r"(?<![\w.\-/])([0-9]{3})([\- ])([0-9]{2})\2([0-9]{4})")
_SSN_KEYWORD = re.compile(
    r"(?i)\b(?:ssn|social security(?:\s+(?:number|no\.?))?)[\s:#.]*(([0-9]{3})([0-9]{2})([0-9]{4}))")
_NINO = re.compile(r"(?<!\w)([A-Z]{2}) ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D](?!\w)")
_NINO_FIRST, _NINO_SECOND = set("ABCEGHJKLMNOPRSTWXYZ"), set("ABCEGHJKLMNPRSTWXYZ")
_NINO_UNALLOCATED = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}
_DNI = re.compile(r"(?<![\w\-])(?:([XYZxyz])-?([0-9]{7})|([0-9]{8}))-?([A-Za-z])(?!\w)")
_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def _ssn_valid(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _ssn(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    return _whole(text, m, ".-/") if _ssn_valid(m.group(1), m.group(3), m.group(4)) else None


def _ssn_keyword(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    return _whole(text, m, ".-/", 1) if _ssn_valid(m.group(2), m.group(3), m.group(4)) else None


def _nino(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """UK National Insurance number: prefix letters as HMRC allocates them, suffix A-D."""
    first, second = m.group(1)
    ok = first in _NINO_FIRST and second in _NINO_SECOND and m.group(1) not in _NINO_UNALLOCATED
    return m.span() if ok else None


def _dni(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """Spanish DNI (8 digits) or NIE (X/Y/Z and 7 digits) with its mod-23 control letter."""
    prefix, nie, dni, letter = m.groups()
    number = int(str("XYZ".index(prefix.upper())) + nie) if prefix else int(dni)
    return m.span() if _DNI_LETTERS[number % 23] == letter.upper() else None


# -- IP addresses --------------------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = re.compile(rf"(?<![\w.])(?:{_OCTET}\.){{3}}{_OCTET}(?:/[0-9]{{1,2}}(?![0-9]))?")
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f]{0,4})"
    r"(?:%[0-9A-Za-z_.\-]+)?(?:/[0-9]{1,3}(?![0-9]))?")
# Dotted numbers after these words are versions or section numbers, not addresses.
_NOT_AN_ADDRESS = re.compile(
    r"(?i)(?:\b(?:versions?|ver|v|releases?|builds?|rev|revision|sections?|sec|clauses?|chapters?|articles?|art"
    r"|para|paragraphs?|rules?|steps?|items?|tables?|figures?|fig|appendix|annex)\.?|§)[\s:]*$")


def _ipv4(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    if _NOT_AN_ADDRESS.search(text, max(0, m.start() - 20), m.start()):
        return None
    return _whole(text, m, ".")


def _ipv6(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    address = m.group().partition("%")[0].partition("/")[0]
    if not _DIGIT.search(address) or not _clean_end(text, m.end(), ".:"):
        return None
    if address != "::1" and max(len(g) for g in address.split(":")) < 2:
        return None  # 1::2 is a valid address, but far more often a ratio or a rule number
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return None
    return m.span()


# -- phone numbers -------------------------------------------------------------------------------

# Not glued to a word, an amount or an id, nor the continuation of a longer run of digit groups.
_NO_PHONE_BEFORE = r"(?<![\w+.\-/#$€£])(?<![0-9][ .\-/])"
_PHONE_INTL = re.compile(  # + or the 00 international access prefix, then the country code
    r"(?<![\w+])(?:\+|(?<![0-9][ .\-/])00(?=[1-9]))[0-9]{1,3}(?:[ .\-]?\(0\))?"
    r"(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,6})){1,7}")
_PHONE_NANP = re.compile(
    _NO_PHONE_BEFORE
    + r"(?:1[ .\-]?)?(?:\([0-9]{3}\)[ .\-]?[0-9]{3}[ .\-]?[0-9]{4}|[0-9]{3}([ .\-])[0-9]{3}\1[0-9]{4})")
_PHONE_TRUNK = re.compile(_NO_PHONE_BEFORE + r"(?:\(0[1-9][0-9]{0,3}\)|0[1-9][0-9]{0,3})(?:[ .\-/][0-9]{2,8}){1,5}")
_PHONE_KEYWORD = re.compile(  # phone, tel(ephone), mobile, cell, call, fax, whatsapp, sms; a first letter is faster
    r"(?i)[cfmpstw](?<!\w\w)(?:(?<=p)hone|(?<=t)el(?:ephone)?|(?<=m)obile|(?<=c)(?:ell|all)|(?<=f)ax|(?<=w)hatsapp"
    r"|(?<=s)ms)\b(?:\s+(?:me|us|no\.?|number|nr\.?))?"
    r"(?:\s+(?:at|on))?[\s:#.]*(\+?\(?[0-9][0-9 ().\-]{5,22}[0-9])")


def _phone(low: int, high: int, group: int = 0) -> Check:
    def check(text: str, m: re.Match[str]) -> tuple[int, int] | None:
        start, end = m.span(group)
        candidate = text[start:end]
        while (digits := _count_digits(candidate) - ("(0)" in candidate) - 2 * candidate.startswith("00")) > high:
            candidate = candidate[: max(candidate.rfind(" "), 0)]  # too long: drop trailing space-separated groups
        if not low <= digits <= high or _DATE.fullmatch(candidate.lstrip("+")):
            return None
        if candidate.startswith("00") and candidate.isdigit():
            return None  # 00 and digits alone: more likely an id with leading zeros
        end = start + len(candidate)
        return (start, end) if _clean_end(text, end, ".-/") else None

    return check


# -- the redactor --------------------------------------------------------------------------------

# (detector, placeholder, pattern, check, a character the text must contain for the pattern to apply)
_BUILT_IN: list[tuple[Detector, str, re.Pattern[str], Check, str | None]] = [
    ("iban", "[IBAN]", _IBAN_START, _iban, None),
    ("card", "[CARD]", _CARD_GROUP, _card, None),
    ("national_id", "[NATIONAL_ID]", _SSN, _ssn, None),
    ("national_id", "[NATIONAL_ID]", _SSN_KEYWORD, _ssn_keyword, None),
    ("national_id", "[NATIONAL_ID]", _NINO, _nino, None),
    ("national_id", "[NATIONAL_ID]", _DNI, _dni, None),
    ("ip", "[IP]", _IPV6, _ipv6, ":"),
    ("ip", "[IP]", _IPV4, _ipv4, "."),
    ("phone", "[PHONE]", _PHONE_INTL, _phone(8, 15), None),
    ("phone", "[PHONE]", _PHONE_NANP, _phone(10, 11), None),
    ("phone", "[PHONE]", _PHONE_TRUNK, _phone(9, 12), None),
    ("phone", "[PHONE]", _PHONE_KEYWORD, _phone(7, 15, 1), None),
]


def _replace(text: str, pattern: re.Pattern[str], check: Check, placeholder: str) -> str:
    # Each replacement goes into the text before the search goes on, so that what follows sees its
    # neighbour as the placeholder (as a second pass would): "555-123-4567 555-987-6543" is two phones.
    at = 0
    while (m := pattern.search(text, at)) is not None:
        span = check(text, m)
        if span is None:
            at = max(m.end(), m.start() + 1)
            continue
        text = text[: span[0]] + placeholder + text[span[1] :]
        at = span[0] + len(placeholder)
    return text


class Redactor:
    """Redacts text and trace events. Build one per configuration and share it; it is stateless."""

    def __init__(self, config: RedactionConfig, *, require_key: bool = True) -> None:
        """``require_key``: refuse an empty ``caller_key`` (anywhere samples are stored or exported).
        Without it, only :meth:`redact` is usable and :meth:`pseudonymize_caller` raises."""
        self._key = config.caller_key.get_secret_value().encode()
        if require_key and not self._key:
            raise ValueError(_NO_KEY)
        self._patterns = [(re.compile(p.regex), f"[{p.name.upper()}]") for p in config.patterns]
        self._email = "email" not in config.disabled_detectors
        self._detectors = [d[1:] for d in _BUILT_IN if d[0] not in config.disabled_detectors]

    def redact(self, text: str) -> str:
        """``text`` with every detected piece of personal data replaced by its typed placeholder.

        Replacing a match changes what its neighbours see, so the passes repeat until nothing
        changes (almost always one pass with nothing to do, or two): the result is stable,
        ``redact(redact(x)) == redact(x)``.
        """
        for _ in range(_MAX_PASSES):
            redacted = self._pass(text)
            if redacted == text:
                break
            text = redacted
        return text

    def _pass(self, text: str) -> str:
        for pattern, placeholder in self._patterns:  # first: the operator's kinds are the more specific
            text = pattern.sub(lambda m, p=placeholder: p if m.group() else "", text)
        if self._email and "@" in text:  # then e-mail: an address may hold anything the others look for
            text = _EMAIL.sub("[EMAIL]", text)
        if not _DIGIT.search(text):
            return text  # every built-in detector below needs a digit
        for placeholder, pattern, check, needs in self._detectors:
            if needs is None or needs in text:
                text = _replace(text, pattern, check, placeholder)
        return text

    def pseudonymize_caller(self, caller_id: str) -> str:
        """A stable stand-in for a caller id: ``caller:`` and the first 24 hex digits of
        HMAC-SHA256(caller_key, caller_id). Same key, same id: same pseudonym."""
        if not self._key:
            raise ValueError(_NO_KEY)
        digest = hmac.new(self._key, caller_id.encode(), hashlib.sha256).hexdigest()
        return PSEUDONYM_PREFIX + digest[:PSEUDONYM_HEX_CHARS]

    def pseudonymize_conversation(self, conversation_id: str) -> str:
        """A stable stand-in for a conversation id, ``conversation:`` and 24 hex digits: conversation
        ids are often built from the user's name or email, which would undo the caller's pseudonym.
        Keyed apart from callers, so a conversation id equal to a caller id does not link the two."""
        if not self._key:
            raise ValueError(_NO_KEY)
        digest = hmac.new(self._key, b"conversation\x00" + conversation_id.encode(), hashlib.sha256).hexdigest()
        return "conversation:" + digest[:PSEUDONYM_HEX_CHARS]

    def redact_event(self, trace: TraceEvent) -> dict[str, Any]:
        """A redacted copy of a decoded trace as JSON-shaped data: what :meth:`redact_trace` gives
        for the same trace, built from the typed struct (no encoding, decoding or deep copy)."""
        done: dict[int, Passage] = {}

        def passage(p: Passage) -> Passage:
            if id(p) not in done:  # a passage shared by two lists: once
                changes: dict[str, Any] = {}
                if p.text is not None:
                    changes["text"] = self.redact(p.text)
                if p.acl:
                    changes["acl"] = [self._principal(principal) for principal in p.acl]
                done[id(p)] = structs.replace(p, **changes) if changes else p
            return done[id(p)]

        changes: dict[str, Any] = {"query": self.redact(trace.query)}
        if trace.retrievals:
            changes["retrievals"] = [structs.replace(r, passages=[passage(p) for p in r.passages])
                                     for r in trace.retrievals]
        if trace.context is not None:
            changes["context"] = [passage(p) for p in trace.context]
        if trace.answer is not None and trace.answer.text is not None:
            changes["answer"] = structs.replace(trace.answer, text=self.redact(trace.answer.text))
        if trace.caller is not None and trace.caller.id is not None:
            changes["caller"] = structs.replace(trace.caller, id=self.pseudonymize_caller(trace.caller.id))
        if trace.conversation_id is not None:
            changes["conversation_id"] = self.pseudonymize_conversation(trace.conversation_id)
        return msgspec.to_builtins(structs.replace(trace, **changes))

    def _principal(self, principal: str) -> str:
        return "user:" + self.pseudonymize_caller(principal[5:]) if principal.startswith("user:") else principal

    def redact_trace(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted copy of a native trace (or feedback) event as JSON-shaped data (docs/events.md).

        Redacted: the query, the answer text, every passage text (retrieval lists and context), the
        feedback comment (of a feedback event, or of feedback joined under ``feedback``). The caller
        id, and ``user:`` principals in passage ACLs, become pseudonyms (so a permission case still
        shows whether the caller was allowed), and so does the conversation id. Kept as they are:
        groups, ids, scores, times and all other fields, including unknown ones, so pass decoded
        events rather than raw input.
        """
        out = copy.deepcopy(dict(event))
        self._redact_key(out, "query")
        self._redact_key(out.get("answer"), "text")
        self._redact_key(out, "comment")
        for feedback in _dicts(out.get("feedback")):
            self._redact_key(feedback, "comment")
        passages = [p for r in _dicts(out.get("retrievals")) for p in _dicts(r.get("passages"))]
        passages += _dicts(out.get("context"))
        for passage in {id(p): p for p in passages}.values():  # a passage shared by two lists: once
            self._redact_passage(passage)
        caller = out.get("caller")
        if isinstance(caller, dict) and isinstance(caller.get("id"), str):
            caller["id"] = self.pseudonymize_caller(caller["id"])
        if isinstance(out.get("conversation_id"), str):
            out["conversation_id"] = self.pseudonymize_conversation(out["conversation_id"])
        return out

    def _redact_key(self, data: Any, key: str) -> None:
        if isinstance(data, dict) and isinstance(data.get(key), str):
            data[key] = self.redact(data[key])

    def _redact_passage(self, passage: dict[str, Any]) -> None:
        self._redact_key(passage, "text")
        acl = passage.get("acl")
        if isinstance(acl, list):
            passage["acl"] = [self._principal(p) if isinstance(p, str) else p for p in acl]


_NO_KEY = ("redaction.caller_key is empty: set it (RAGMON_REDACTION__CALLER_KEY, at least "
           f"{MIN_KEY_LENGTH} characters) before samples are stored or exported")


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
