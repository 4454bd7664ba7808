"""Secrets: credentials that give access to something, wherever they were pasted.

Three families, most specific first (docs/sampling.md lists them with their rules):

- **by shape**: private keys in PEM, JSON Web Tokens, and tokens whose issuers give them a fixed
  prefix (AWS, Google, OpenAI, GitHub, GitLab, Slack, Stripe, Hugging Face, npm, SendGrid), with
  the lengths and alphabets they publish, as gitleaks and detect-secrets define them;
- **by context**: the value after ``password=``, ``secret:``, ``token=``, ``api_key``,
  ``AccountKey=`` and their kin, after ``Bearer``/``Basic``, and the password in ``scheme://user:password@``;
- **by entropy**: a run of 20 or more base64 or URL-safe characters with digits and letters of
  both cases whose Shannon entropy is near that of random text (see :func:`_random_looking`);
  these rules (:data:`BY_ENTROPY`) run after the e-mail detector, the others (:data:`RULES`) before.
  Hex strings alone are taken for digests and ids (commit hashes, trace ids) and left to the two
  families above: a hex secret is caught when a key word or ``Bearer`` stands before it.

The whole secret becomes ``[SECRET]``; a key word before it is kept, so the text still says what
was there.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from ragmon.monitor.labeling.detectors.base import Rule, whole_match

PLACEHOLDER = "[SECRET]"
_TOKEN_CHARS = r"A-Za-z0-9_\-"
_AFTER = rf"(?![{_TOKEN_CHARS}])"  # a token ends where its alphabet ends

_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,\-]*)", re.DOTALL)

# A JSON Web Token: a JSON header (base64url of '{"' is "eyJ"), claims and a signature, which an
# unsigned token leaves empty. The claims need not start "eyJ": '{}' is "e30".
_JWT = re.compile(
    rf"(?<![{_TOKEN_CHARS}])eyJ[{_TOKEN_CHARS}]{{8,}}\.[{_TOKEN_CHARS}]{{2,}}\.[{_TOKEN_CHARS}]*{_AFTER}")

_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_])(?:"
    # AWS access key ids; their alphabet has no hyphen, so a hyphen before or after one is a boundary,
    # not part of a longer token as it is for the others (``sk-``, ``xoxb-``): "1-AKIA…" is a key
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z2-7]{16}(?![A-Za-z0-9_])"
    r"|(?<!-)(?:"
    r"AIza[0-9A-Za-z_\-]{35}|GOCSPX-[0-9A-Za-z_\-]{28}|ya29\.[0-9A-Za-z_\-]{20,}"  # Google API key, OAuth
    r"|sk-(?:proj-|svcacct-|admin-|ant-[a-z]+[0-9]{2}-)?(?=[A-Za-z_\-]*[0-9])[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic
    r"|gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,247}|whsec_[A-Za-z0-9+/=]{20,}"  # Stripe
    r"|hf_[A-Za-z]{34}|npm_[A-Za-z0-9]{36}"  # Hugging Face, npm
    r"|SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"  # SendGrid
    rf"){_AFTER})")

# scheme://user:password@host - the password goes, the user name is left to the other detectors
_URL_PASSWORD = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s/?#@:\[\]]{0,256}:([^\s/?#@\[\]]{1,256})@")

_KEY_WORDS = (r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key"
              r"|client[_\-]?secret|credentials?|account[_\-]?key|shared[_\-]?access[_\-]?key|sig|signature")
_PAIR = re.compile(
    rf"(?i)(?<![A-Za-z])(?:{_KEY_WORDS})[A-Za-z0-9_.\-]{{0,24}}?[\"']?[ \t]{{0,8}}(=>|=|:|\bis\b)[ \t]{{0,8}}"
    r"(?![A-Za-z_.\-]+[:=](?:\s|$))(\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|(?:[^\s\"'<>;,&]|&(?![\w.\-]+=)){1,256})")
_BEARER = re.compile(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9\-._~+/]{8,}=*)")

_PAIR_SIGN = re.compile(r"[:=]|\bis\b")
_BEARER_WORD = re.compile(r"(?i)bearer|basic")
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{20,}={0,2}(?![A-Za-z0-9+/_\-=])")
_HEX = re.compile(r"[0-9a-fA-F\-]+")


def _value(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The value of a ``key = value`` pair. After ``=`` any value is a secret; after ``:`` or
    "is", which prose also uses ("token: a unit of text"), only one that looks like a password:
    six characters or more with letters and something else in it, or twelve or more."""
    start, end = m.span(2)
    value = m.group(2).strip("\"'")
    if not value or (value.startswith("[") and value.endswith("]")):
        return None  # empty, or a placeholder already
    if m.group(1) in ("=", "=>"):
        return start, end
    mixed = any(c.isalpha() for c in value) and not value.isalpha()
    looks_like_one = len(value) >= 12 or (len(value) >= 6 and mixed)
    return (start, end) if looks_like_one else None


def _group1(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The first group as it is: the URL password's group excludes ``[`` and ``]``, so it is never a
    placeholder of an earlier pass."""
    return m.span(1)


def _bearer(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    token = m.group(1)
    return m.span(1) if len(token) >= 16 or any(c.isdigit() for c in token) else None


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _random_looking(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """A token of 20+ base64/URL-safe characters is a secret when it mixes upper case, lower
    case and digits, is not hex alone (digests, ids), is no path (two parts between slashes of three
    or more lower-case letters: ``/usr/lib/...``), and its Shannon entropy is at least
    min(4.0, log2(length) - 0.8) bits per character: random text of that length and alphabet is
    well above it, words, paths and identifiers of words are below. The tests read the token
    without its ``=`` padding."""
    token = m.group().rstrip("=")
    if _HEX.fullmatch(token):
        return None
    if sum(part.isalpha() and part.islower() for part in token.split("/") if len(part) > 2) >= 2:
        return None  # a path: lower-case words between slashes
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return None
    if _entropy(token) < min(4.0, math.log2(len(token)) - 0.8):
        return None
    return m.span()


# by shape and by context: these run before the e-mail detector (a URL's password sits before an @)
RULES = [
    Rule("secret", PLACEHOLDER, _PEM, whole_match, "-----BEGIN"),
    Rule("secret", PLACEHOLDER, _JWT, whole_match, "eyJ"),
    Rule("secret", PLACEHOLDER, _PREFIXED, whole_match),
    Rule("secret", PLACEHOLDER, _URL_PASSWORD, _group1, "://"),
    Rule("secret", PLACEHOLDER, _PAIR, _value, _PAIR_SIGN),
    Rule("secret", PLACEHOLDER, _BEARER, _bearer, _BEARER_WORD),
]
# by entropy: after the e-mail detector. A random-looking run may start inside an address's domain
# ("bob@example.com-Xk3…": the run "com-Xk3…"); taken first, it would leave "bob@example.[SECRET]",
# the local part kept and the address no longer whole for the e-mail detector to find.
BY_ENTROPY = [Rule("secret", PLACEHOLDER, _CANDIDATE, _random_looking)]
