"""Structured personal data: e-mail addresses, IBANs, payment cards, national ids, IP addresses
and phone numbers.

Detection leans on checks, not on shapes alone: card numbers must pass Luhn, IBANs their country's
length and mod-97, IP addresses must parse, national ids their issuing rules. What merely looks
like a number (dates, versions, times, amounts, section numbers, ids such as ``policy-2026#4``)
is left alone.
"""

from __future__ import annotations

import ipaddress
import re
from functools import partial

from ragmon.monitor.labeling.detectors.base import DIGIT, Rule, clean_end, count_digits, whole

_DATE = re.compile(r"[0-9]{4}[-/.][0-9]{1,2}[-/.][0-9]{1,2}|[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4}")

# -- e-mail --------------------------------------------------------------------------------------

_LOCAL = r"[\w.%+\-']"  # the local part as people write it (RFC 5322 allows more, URLs use those)
EMAIL = re.compile(rf"(?<!{_LOCAL}){_LOCAL}+@(?:[\w\-]+\.)+(?:[^\W\d_]{{2,63}}|xn--[\w\-]+)(?!\w)")


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
    """Read exactly the country's length of characters: a single space, hyphen or no-break space may
    stand between two of them; any other character, or two separators in a row, ends the reading, and
    a reading one character short (or long) is no IBAN."""
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
_CARD_GROUP = re.compile(r"(?:[1-9]|0(?=604))(?<![\w.][0-9])(?:[0-9]{3}(?=[ .\-][0-9])|[0-9]{11,18}(?![0-9]))")
# Maestro numbers may have 12 digits; other cards have 13 to 19.
_MAESTRO = ("50", "56", "57", "58", "6", "0604")
_DIGITS = re.compile(r"[0-9]+")
# \Z, not $: the head ends right before the card (at most 40 characters), not before a line break.
_IBAN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ \-][A-Za-z0-9]{4}){0,7}[ \-]\Z")


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = ord(char) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_layout(groups: list[str], separators: list[str]) -> bool:
    """One block of digits, or how cards are printed: 4-4-4-4(-3) and shorter tails, Amex 4-6-5, Diners 4-6-4,
    one separator throughout. Any other layout (4-5-4, 4-4-6-3, 4-4-4-5, a space and a hyphen) is no card."""
    if len(groups) == 1:
        return True
    if len(set(separators)) != 1:
        return False
    sizes = [len(g) for g in groups]
    return (all(s == 4 for s in sizes[:-1]) and 1 <= sizes[-1] <= 4) or sizes in ([4, 6, 5], [4, 6, 4])


def _card(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The longest run of whole digit groups, starting at this one, that is a Luhn-valid 13-19 digit
    number printed the way cards are (a longer number, or more groups, after it does not stop it being
    one). A card inside an IBAN-shaped string is the IBAN's business."""
    first = m.group()
    if _IBAN_HEAD.search(text, max(0, m.start() - 40), m.start()):
        return None
    groups, separators, ends = [first], [], [m.end()]
    while len(groups) < 5 and ends[-1] + 1 < len(text) and text[ends[-1]] in " .-" and text[ends[-1] + 1].isdigit():
        group = _DIGITS.match(text, ends[-1] + 1).group()  # type: ignore[union-attr]  # a digit is there
        separators.append(text[ends[-1]])
        groups.append(group)
        ends.append(ends[-1] + 1 + len(group))
    digits, best = "", None
    for j, group in enumerate(groups):
        digits += group
        if len(digits) > 19:
            break
        long_enough = len(digits) >= 13 or (len(digits) == 12 and digits.startswith(_MAESTRO))
        if (long_enough and _card_layout(groups[: j + 1], separators[:j]) and _luhn(digits)
                and clean_end(text, ends[j], ".")):
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
    return whole(text, m, ".-/") if _ssn_valid(m.group(1), m.group(3), m.group(4)) else None


def _ssn_keyword(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    return whole(text, m, ".-/", 1) if _ssn_valid(m.group(2), m.group(3), m.group(4)) else None


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
# Dotted numbers after these words are versions or section numbers, not addresses: the word must
# start at most 20 characters before the address ("Version:" and padding in a column).
_NOT_AN_ADDRESS = re.compile(
    r"(?i)(?:\b(?:versions?|ver|v|releases?|builds?|rev|revision|sections?|sec|clauses?|chapters?|articles?|art"
    r"|para|paragraphs?|rules?|steps?|items?|tables?|figures?|fig|appendix|annex)\.?|§)[\s:]*$")


def _ipv4(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    if _NOT_AN_ADDRESS.search(text, max(0, m.start() - 20), m.start()):
        return None
    return whole(text, m, ".")


def _ipv6(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """A valid address that is no hex word or ratio: the address, its zone (%eth0) and prefix length
    set aside, needs a digit and a group of at least two characters (1::2 and 1::2%eth0 are refused,
    12::34 is taken), and nothing glued to its end."""
    address = m.group().partition("%")[0].partition("/")[0]
    if not DIGIT.search(address) or not clean_end(text, m.end(), ".:"):
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
_PHONE_TRUNK = re.compile(
    _NO_PHONE_BEFORE
    + r"(?:\(0[0-9]{1,4}\)[ .\-/]?[0-9]{2,8}|0[1-9][0-9]{0,3}[ .\-/][0-9]{2,8})(?:[ .\-/][0-9]{2,8}){0,4}")
# Digits alone, in the locales docs/sampling.md names: a national number with its trunk 0 (9 to 11
# digits: UK, Germany, France, Italy, the Netherlands), a North American number (area code and
# exchange do not start with 0 or 1), an Italian mobile (3 and 9 to 10 digits).
_PHONE_BARE = re.compile(
    r"(?<![\w+.\-/#$€£:])(?<![0-9],)(?:0[1-9][0-9]{7,9}|[2-9][0-9]{2}[2-9][0-9]{6}|3[0-9]{8,10})(?![0-9])")
_EXTENSION = re.compile(r"\s?(?:x|ext\.?|extension)\s?[0-9]{1,6}(?![\w])", re.IGNORECASE)
_PHONE_KEYWORD = re.compile(  # phone, tel(ephone), mobile, cell, call, fax, whatsapp, sms; a first letter is faster
    r"(?i)[cfmpstw](?<!\w\w)(?:(?<=p)hone|(?<=t)el(?:ephone)?|(?<=m)obile|(?<=c)(?:ell|all)|(?<=f)ax|(?<=w)hatsapp"
    r"|(?<=s)ms)\b(?:\s+(?:me|us|no\.?|number|nr\.?))?"
    r"(?:\s+(?:at|on))?[\s:#.]*(\+?\(?[0-9][0-9 ().\-]{5,22}[0-9])")


def _phone(text: str, m: re.Match[str], low: int, high: int, group: int = 0) -> tuple[int, int] | None:
    """A phone number of ``low`` to ``high`` digits (a ``(0)`` and a leading 00 not counted) in group
    ``group`` of the match; a longer one loses its trailing space-separated groups until it fits, and
    a date, even after a ``+`` (``+2026-11-29``, a line added in a diff), is none. The rules bind the
    bounds with a partial, not a closure: the check stays a module-level function whose body runs on
    every call, not once at import."""
    start, end = m.span(group)
    candidate = text[start:end]
    while (digits := count_digits(candidate) - ("(0)" in candidate) - 2 * candidate.startswith("00")) > high:
        candidate = candidate[: max(candidate.rfind(" "), 0)]  # too long: drop trailing space-separated groups
    if not low <= digits <= high or _DATE.fullmatch(candidate.lstrip("+")):
        return None
    if candidate.startswith("00") and candidate.isdigit():
        return None  # 00 and digits alone: more likely an id with leading zeros
    end = start + len(candidate)
    if (extension := _EXTENSION.match(text, end)) is not None:
        end = extension.end()
    return (start, end) if clean_end(text, end, ".-/") else None


# -- in order ------------------------------------------------------------------------------------

# The most specific first: an IBAN or a card number may look like a phone number, an IPv6 address
# may end in IPv4.
RULES = [
    Rule("iban", "[IBAN]", _IBAN_START, _iban, None),
    Rule("card", "[CARD]", _CARD_GROUP, _card, None),
    Rule("national_id", "[NATIONAL_ID]", _SSN, _ssn, None),
    Rule("national_id", "[NATIONAL_ID]", _SSN_KEYWORD, _ssn_keyword, None),
    Rule("national_id", "[NATIONAL_ID]", _NINO, _nino, None),
    Rule("national_id", "[NATIONAL_ID]", _DNI, _dni, None),
    Rule("ip", "[IP]", _IPV6, _ipv6, ":"),
    Rule("ip", "[IP]", _IPV4, _ipv4, "."),
    Rule("phone", "[PHONE]", _PHONE_INTL, partial(_phone, low=8, high=15), None),
    Rule("phone", "[PHONE]", _PHONE_NANP, partial(_phone, low=10, high=11), None),
    Rule("phone", "[PHONE]", _PHONE_TRUNK, partial(_phone, low=9, high=12), None),
    Rule("phone", "[PHONE]", _PHONE_KEYWORD, partial(_phone, low=7, high=15, group=1), None),
    Rule("phone", "[PHONE]", _PHONE_BARE, partial(_phone, low=9, high=11), None),
]
