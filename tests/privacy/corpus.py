"""A redaction corpus nobody here wrote by hand: personal data and secrets made by third-party
generators (Faker's providers in seven locales, keys made by ``cryptography``, tokens in the
formats their vendors publish) planted into the kinds of text a RAG system carries (questions,
answers, passages), and scored against what :class:`Redactor` replaces.

Scoring works on character spans of the original text: a planted item is *caught* when every
letter and digit of it lies inside a span the redactor replaced (a secret token: inside one span,
replaced whole); a replaced span is *right* when it overlaps a planted item. Recall is per planted
type, precision per placeholder.

``python -m tests.privacy.corpus`` prints the table kept in docs/sampling.md.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import hmac
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from faker import Faker

LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL"]
# The detectors were tuned looking at the misses of another seed (20261201); the figures in the
# docs and the floors in the test come from this one, whose items nobody looked at while tuning.
SEED = 4242

# Types whose floors docs/sampling.md and tests/privacy/test_corpus.py state.
STRUCTURED = ["email", "email_upper", "phone", "card", "iban", "ssn", "ipv4", "ipv6"]
SECRETS = ["aws_access_key_id", "aws_secret_key", "google_api_key", "azure_connection_string", "openai_key",
           "github_token", "slack_token", "stripe_key", "jwt", "bearer_token", "url_password",
           "password_pair", "pem_private_key", "high_entropy_token", "aws_key_after_digit", "email_glued_to_key"]
# A token is caught only when it is replaced whole, by one placeholder: "[SECRET].[SECRET].[SECRET]"
# for a JWT left its shape and, had one part escaped, its claims. An address glued to a key is two.
WHOLE_TOKENS = frozenset(SECRETS) - {"email_glued_to_key"}
PEOPLE = ["person_name"]
ADDRESSES = ["street_address"]
TYPES = STRUCTURED + SECRETS + PEOPLE + ADDRESSES


@dataclass(frozen=True)
class Item:
    """One planted value: ``before`` and ``after`` belong to the surrounding text (a key name,
    ``Bearer ``), ``value`` is what must go."""

    kind: str
    value: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class Sample:
    text: str
    items: tuple[tuple[str, int, int], ...]  # (kind, start, end) of each planted value
    locale: str


# -- generators: each takes a Faker and returns an Item ---------------------------------------------

_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


def _chars(fake: Faker, alphabet: str, n: int) -> str:
    return "".join(fake.random.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _card(fake: Faker) -> Item:
    number = fake.credit_card_number()
    style = fake.random.choice(["plain", " ", "-", ".", "groups"])
    if style in (" ", "-", ".") and len(number) == 16:
        number = style.join(number[i:i + 4] for i in range(0, 16, 4))
    return Item("card", number)


def _iban(fake: Faker) -> Item:
    iban = fake.iban()
    if fake.random.random() < 0.5:
        iban = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    return Item("iban", iban)


def _ssn(fake: Faker) -> Item:
    us = Faker("en_US")
    us.seed_instance(fake.random.random())
    ssn = us.ssn()
    if fake.random.random() < 0.3:
        return Item("ssn", ssn.replace("-", ""), before=fake.random.choice(
            ["social security number ", "SSN: ", "Social Security No. "]))
    return Item("ssn", ssn)


def _email_upper(fake: Faker) -> Item:
    email = fake.email()
    return Item("email_upper", email.upper() if fake.random.random() < 0.5 else email.title())


def _aws_secret(fake: Faker) -> Item:
    before = fake.random.choice(["aws_secret_access_key = ", "AWS_SECRET_ACCESS_KEY=", "secret key ", ""])
    return Item("aws_secret_key", _chars(fake, _B64, 40), before=before)


def _azure(fake: Faker) -> Item:
    account = fake.user_name().replace("_", "").replace(".", "")[:20].lower() or "store"
    key = base64.b64encode(fake.binary(64)).decode()
    return Item("azure_connection_string", key,
                before=f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey=",
                after=";EndpointSuffix=core.windows.net")


def _openai(fake: Faker) -> Item:
    prefix = fake.random.choice(["sk-", "sk-proj-", "sk-svcacct-"])
    return Item("openai_key", prefix + _chars(fake, _URLSAFE, fake.random.choice([48, 64, 96, 156])))


def _github(fake: Faker) -> Item:
    if fake.random.random() < 0.25:
        return Item("github_token", "github_pat_" + _chars(fake, _ALNUM, 22) + "_" + _chars(fake, _ALNUM, 59))
    return Item("github_token", fake.random.choice(["ghp_", "gho_", "ghs_", "ghu_", "ghr_"]) + _chars(fake, _ALNUM, 36))


def _slack(fake: Faker) -> Item:
    digits = "0123456789"
    kind = fake.random.choice(["xoxb", "xoxp", "xoxa", "xoxs"])
    token = f"{kind}-{_chars(fake, digits, 12)}-{_chars(fake, digits, 13)}-{_chars(fake, _ALNUM, 24)}"
    return Item("slack_token", token)


def _stripe(fake: Faker) -> Item:
    prefix = fake.random.choice(["sk_live_", "sk_test_", "rk_live_", "whsec_"])
    return Item("stripe_key", prefix + _chars(fake, _ALNUM, fake.random.choice([24, 32, 99])))


def _jwt(fake: Faker) -> Item:
    """Signed tokens with a full set of claims, and the short ones test fixtures and unsigned
    (``alg: none``) tokens carry: a claims segment of a few characters, an empty signature."""
    algorithm = fake.random.choice(["HS256", "HS256", "RS256", "none"])
    header = _b64url(json.dumps({"alg": algorithm, "typ": "JWT"}).encode())
    claims = fake.random.choice([
        {"sub": fake.uuid4(), "name": fake.name(), "email": fake.email(), "iat": fake.unix_time()},
        {"sub": fake.user_name()[:2]},
        {"sub": str(fake.random.randint(1, 99))},
        {},
    ])
    payload = _b64url(json.dumps(claims).encode())
    if algorithm == "none":
        return Item("jwt", f"{header}.{payload}.")
    signature = _b64url(hmac.new(fake.binary(32), f"{header}.{payload}".encode(), hashlib.sha256).digest())
    return Item("jwt", f"{header}.{payload}.{signature}")


def _bearer(fake: Faker) -> Item:
    token = fake.random.choice(
        [fake.sha256(), _chars(fake, _URLSAFE, 43), fake.password(length=32, special_chars=False)])
    return Item("bearer_token", token, before=fake.random.choice(["Authorization: Bearer ", "bearer "]))


def _url_password(fake: Faker) -> Item:
    scheme = fake.random.choice(["https", "postgresql", "redis", "amqp", "mongodb+srv"])
    return Item("url_password", fake.password(special_chars=False), before=f"{scheme}://{fake.user_name()}:",
                after=f"@{fake.domain_name()}/{fake.uri_path()}")


def _password_pair(fake: Faker) -> Item:
    key = fake.random.choice(["password=", "password: ", "passwd=", "pwd=", "secret=", "client_secret: ",
                              "token=", "api_key=", "Password: ", "PASSWORD="])
    return Item("password_pair", fake.password(length=fake.random.randint(8, 20)).replace(" ", ""), before=key)


def _pem(fake: Faker) -> Item:
    kind = fake.random.choice(["rsa", "ec", "ed25519"])
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        fmt = fake.random.choice([serialization.PrivateFormat.TraditionalOpenSSL, serialization.PrivateFormat.PKCS8])
    elif kind == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
        fmt = fake.random.choice([serialization.PrivateFormat.TraditionalOpenSSL, serialization.PrivateFormat.PKCS8])
    else:
        key = ed25519.Ed25519PrivateKey.generate()
        fmt = fake.random.choice([serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.OpenSSH])
    pem = key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode().strip()
    return Item("pem_private_key", pem)


def _high_entropy(fake: Faker) -> Item:
    token = fake.random.choice([_chars(fake, _URLSAFE, 43), _chars(fake, _B64, 44), _chars(fake, _ALNUM, 32)])
    return Item("high_entropy_token", token, before=fake.random.choice(["key ", "the value ", "use ", ""]))


def _aws_key_id(fake: Faker) -> str:
    return fake.random.choice(["AKIA", "ASIA"]) + _chars(fake, _B32, 16)


def _aws_after_digit(fake: Faker) -> Item:
    """A key id after a number and a hyphen, as a numbered list or an id made of parts puts it."""
    return Item("aws_key_after_digit", _aws_key_id(fake), before=f"{fake.random.randint(0, 99)}-")


def _email_glued_to_key(fake: Faker) -> Item:
    """An address and a key pasted together with one character between them: both must go, the
    address's local part too."""
    key = fake.random.choice([_aws_key_id(fake), _chars(fake, _B64, 40), _chars(fake, _URLSAFE, 43)])
    return Item("email_glued_to_key", fake.email() + fake.random.choice(["-", "/", ":", "|"]) + key)


GENERATORS: dict[str, Callable[[Faker], Item]] = {
    "email": lambda f: Item("email", f.random.choice([f.email(), f.free_email(), f.company_email()])),
    "email_upper": _email_upper,
    "phone": lambda f: Item("phone", f.phone_number()),
    "card": _card,
    "iban": _iban,
    "ssn": _ssn,
    "ipv4": lambda f: Item("ipv4", f.random.choice([f.ipv4_public(), f.ipv4_private(), f.ipv4()])),
    "ipv6": lambda f: Item("ipv6", f.ipv6()),
    "aws_access_key_id": lambda f: Item("aws_access_key_id", _aws_key_id(f)),
    "aws_secret_key": _aws_secret,
    "google_api_key": lambda f: Item("google_api_key", "AIza" + _chars(f, _URLSAFE, 35)),
    "azure_connection_string": _azure,
    "openai_key": _openai,
    "github_token": _github,
    "slack_token": _slack,
    "stripe_key": _stripe,
    "jwt": _jwt,
    "bearer_token": _bearer,
    "url_password": _url_password,
    "password_pair": _password_pair,
    "pem_private_key": _pem,
    "high_entropy_token": _high_entropy,
    "aws_key_after_digit": _aws_after_digit,
    "email_glued_to_key": _email_glued_to_key,
    "person_name": lambda f: Item("person_name", f.name()),
    "street_address": lambda f: Item("street_address", " ".join(f.street_address().split())),
}

# -- the text around them ----------------------------------------------------------------------------

QUESTIONS = [
    "Can you update my record? {}",
    "Why was my reimbursement rejected? Details: {}",
    "Who owns this: {}",
    "I pasted this from the ticket: {} - is that allowed in the wiki?",
    "Please check the access request for {} before Friday.",
    "What is the travel policy for {} when flying to Berlin?",
    "hi, it says '{}' in the form, what now",
    "How do I reset the account linked to {}?",
]
ANSWERS = [
    "According to the onboarding checklist, {} must be approved by the team lead.",
    "The expense report lists {}; the limit for 2026 is 1,200 EUR per quarter.",
    "Based on section 4.2 of the handbook, contact {} for laptop setup.",
    "The record shows {} (updated 2026-11-03).",
    "I don't know based on the provided documents whether {} is still valid.",
]
PASSAGES = [
    "Ticket #4471 - reporter: {}. Status: resolved in release 3.14.2 on 12/03/2025.",
    "Meeting notes, Q3 review. Attendees agreed that {} would take over the budget review.",
    "config.yaml excerpt:\n  endpoint: https://api.example.internal/v2\n  credentials: {}\n  timeout: 30s",
    "From the HR export (row 118): {}; department: Finance; start date 2021-06-01.",
    "Slack thread #infra: deploy failed with {} - retried at 14:05 UTC, version 2.8.1.",
    "Invoice INV-2026-0042 for 349.99 USD, customer reference {}, due in 30 days.",
]
TEMPLATES = QUESTIONS + ANSWERS + PASSAGES


def _types_for(kind: str) -> list[str]:
    return [kind]


def generate(per_type: int = 100, seed: int = SEED) -> list[Sample]:
    """``per_type`` items of every type, each planted alone into a template, locales in turn; one
    sample in five carries a second item of another type, so neighbours are tried too."""
    fakes = {}
    for i, locale in enumerate(LOCALES):
        fakes[locale] = Faker(locale)
        fakes[locale].seed_instance(seed + i)
    Faker.seed(seed)  # providers that use the shared random (e.g. binary)
    samples = []
    for kind in TYPES:
        for n in range(per_type):
            locale = LOCALES[n % len(LOCALES)]
            fake = fakes[locale]
            items = [GENERATORS[kind](fake)]
            if n % 5 == 4:
                items.append(GENERATORS[TYPES[(TYPES.index(kind) + n) % len(TYPES)]](fake))
            template = TEMPLATES[(n * 7 + TYPES.index(kind)) % len(TEMPLATES)]
            samples.append(_plant(template, items, locale))
    return samples


def _plant(template: str, items: list[Item], locale: str) -> Sample:
    head, _, tail = template.partition("{}")
    text, spans = head, []
    for i, item in enumerate(items):
        if i:
            text += " and "
        text += item.before
        spans.append((item.kind, len(text), len(text) + len(item.value)))
        text += item.value + item.after
    return Sample(text + tail, tuple(spans), locale)


def prose_texts(limit: int = 3000) -> list[str]:
    """Real prose nobody here wrote: the paragraphs of Python's own reference documentation
    (``pydoc_data.topics``), full of capitalised terms, versions, numbers and code."""
    from pydoc_data.topics import topics  # noqa: PLC0415

    paragraphs = [p.strip() for text in topics.values() for p in text.split("\n\n")]
    return [p for p in dict.fromkeys(paragraphs) if len(p) >= 40][:limit]


# -- presidio-evaluator's templates -------------------------------------------------------------------

# What its placeholders plant: our type (scored), or None for context (a city, a company, a date:
# not scored as personal data, and a placeholder put on one counts against precision).
TEMPLATE_KINDS = {
    "person": "person_name", "name": "person_name", "name_female": "person_name", "name_male": "person_name",
    "first_name": "single_name", "last_name": "single_name", "first_name_male": "single_name",
    "first_name_female": "single_name", "first_name_nonbinary": "single_name", "last_name_male": "single_name",
    "last_name_female": "single_name", "credit_card_number": "card", "phone_number": "phone", "email": "email",
    "iban": "iban", "ssn": "ssn", "ip_address": "ip", "address": "street_address", "street_name": "address_part",
    "building_number": "address_part", "secondary_address": "address_part", "us_driver_license": "driver_license",
}
TEMPLATE_FLOORS = {"person_name": 0.90, "street_address": 0.85, "card": 0.99, "phone": 0.99, "email": 0.99,
                   "iban": 0.99, "ssn": 0.99, "ip": 0.99}


def _template_value(fake: Faker, us: Faker, name: str) -> Item:
    kind = TEMPLATE_KINDS.get(name)
    if kind == "person_name":
        return Item(kind, {"name_female": fake.name_female, "name_male": fake.name_male}.get(name, fake.name)())
    if kind == "single_name":
        return Item(kind, getattr(fake, name.replace("_nonbinary", ""))())
    if kind == "street_address":  # the street line is the item, postcode and city its context
        return Item(kind, " ".join(fake.street_address().split()), after=f", {fake.postcode()} {fake.city()}")
    if kind in ("card", "iban"):
        return GENERATORS[kind](fake)
    if kind == "ssn":
        return Item(kind, us.ssn())
    if kind == "ip":
        return Item(kind, fake.random.choice([fake.ipv4_public(), fake.ipv6()]))
    if kind == "address_part":
        return Item(kind, {"street_name": fake.street_name, "building_number": fake.building_number,
                           "secondary_address": us.secondary_address}[name]())
    if kind == "driver_license":
        return Item(kind, us.bothify("?#######").upper())
    if kind is not None:
        return Item(kind, getattr(fake, {"phone": "phone_number"}.get(kind, kind))())
    context = {"organization": fake.company, "city": fake.city, "country": fake.country, "job": fake.job,
               "nationality": fake.country, "nation_woman": fake.country, "nation_plural": fake.country,
               "age": lambda: str(fake.random_int(18, 90)), "year": fake.year, "date_time": lambda: str(fake.date()),
               "date_of_birth": lambda: str(fake.date_of_birth()), "day_of_week": fake.day_of_week,
               "state_abbr": us.state_abbr, "zipcode": fake.postcode, "postcode": fake.postcode, "url": fake.url,
               "prefix": fake.prefix, "prefix_male": fake.prefix_male, "prefix_female": fake.prefix_female}
    return Item("", context[name]())


_SLOT = re.compile(r"\{\{([a-z_]+)\}\}")


def template_samples(templates: str, rounds: int = 10, seed: int = SEED) -> list[Sample]:
    """Each of presidio-evaluator's templates filled ``rounds`` times, locales in turn, by Faker."""
    # the file writes line breaks inside a template as \\n and commas as \\,
    lines = [line.strip().replace("\\n", "\n").replace("\\,", ",") for line in templates.splitlines() if line.strip()]
    fakes = [Faker(locale) for locale in LOCALES]
    us = Faker("en_US")
    for i, fake in enumerate([*fakes, us]):
        fake.seed_instance(seed + 100 + i)
    samples = []
    for n in range(rounds):
        for j, line in enumerate(lines):
            fake = fakes[(n + j) % len(fakes)]
            text, spans, at = "", [], 0
            for m in _SLOT.finditer(line):
                item = _template_value(fake, us, m.group(1))
                text += line[at:m.start()] + item.before
                if item.kind:
                    spans.append((item.kind, len(text), len(text) + len(item.value)))
                text += item.value + item.after
                at = m.end()
            samples.append(Sample(text + line[at:], tuple(spans), fake.locales[0]))
    return samples


def clean_texts() -> list[str]:
    """Text with nothing to redact: the simulator's passages, questions and answers."""
    from ragmon.monitor.app.simulate import Simulator  # noqa: PLC0415 - only where clean text is scored

    texts: list[str] = []
    for event in Simulator(seed=7).traffic(2000):
        if event.get("type") != "trace":
            continue
        texts.append(event["query"])
        if event.get("answer", {}).get("text"):
            texts.append(event["answer"]["text"])
        texts.extend(p["text"] for p in event.get("context") or [] if p.get("text"))
    return list(dict.fromkeys(texts))


# -- scoring -------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\[([A-Z][A-Z_]*)\]")


def replaced_spans(original: str, redacted: str) -> list[tuple[int, int, list[str]]]:
    """Spans of ``original`` that the redactor replaced, each with the placeholders put there.

    Each placeholder becomes one private-use character before the diff, so that no letter of
    ``[EMAIL]`` can be aligned with a letter of the address it replaced."""
    names = _PLACEHOLDER.findall(redacted)
    marked = _PLACEHOLDER.sub(_numbered_marks(), redacted)
    matcher = difflib.SequenceMatcher(None, original, marked, autojunk=False)
    spans = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            spans.append((i1, i2, [names[ord(c) - _MARK] for c in marked[j1:j2] if ord(c) >= _MARK]))
    return spans


_MARK = 0xF0000  # supplementary private use area: no text here holds it


def _numbered_marks() -> Callable[[re.Match[str]], str]:
    count = iter(range(1 << 16))
    return lambda m: chr(_MARK + next(count))


@dataclass
class Score:
    planted: Counter = field(default_factory=Counter)
    caught: Counter = field(default_factory=Counter)
    placeholders: Counter = field(default_factory=Counter)
    right: Counter = field(default_factory=Counter)
    misses: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    clean_texts: int = 0
    clean_changed: int = 0
    false_redactions: list[str] = field(default_factory=list)

    def recall(self, kind: str) -> float:
        return self.caught[kind] / self.planted[kind]

    def precision(self, placeholder: str) -> float:
        return self.right[placeholder] / self.placeholders[placeholder] if self.placeholders[placeholder] else 1.0

    def clean_precision(self) -> float:
        return 1 - self.clean_changed / self.clean_texts


def score(redact: Callable[[str], str], samples: list[Sample], clean: list[str]) -> Score:
    result = Score()
    for sample in samples:
        redacted = redact(sample.text)
        spans = replaced_spans(sample.text, redacted)
        covered = set()
        for start, end, _ in spans:
            covered.update(range(start, end))
        for kind, start, end in sample.items:
            result.planted[kind] += 1
            needed = [i for i in range(start, end) if sample.text[i].isalnum()]
            if kind in WHOLE_TOKENS:
                caught = any(s <= needed[0] and needed[-1] < e for s, e, _ in spans)
            else:
                caught = all(i in covered for i in needed)
            if caught:
                result.caught[kind] += 1
            else:
                result.misses[kind].append(sample.text[start:end])
        for start, end, placeholders in spans:
            right = any(start < e and s < end for _, s, e in sample.items)
            for placeholder in placeholders:
                result.placeholders[placeholder] += 1
                result.right[placeholder] += right
    for text in clean:
        result.clean_texts += 1
        redacted = redact(text)
        if redacted != text:
            result.clean_changed += 1
            result.false_redactions.append(redacted)
            for placeholder in _PLACEHOLDER.findall(redacted):
                result.placeholders[placeholder] += 1
    return result


def table(result: Score, kinds: list[str] | None = None) -> Iterator[str]:
    yield "| planted type | items | caught | recall |"
    yield "|---|---:|---:|---:|"
    for kind in kinds or TYPES:
        yield f"| {kind} | {result.planted[kind]} | {result.caught[kind]} | {result.recall(kind):.1%} |"
    yield ""
    yield "| placeholder | put in | on a planted item | precision |"
    yield "|---|---:|---:|---:|"
    for placeholder in sorted(result.placeholders):
        yield (f"| [{placeholder}] | {result.placeholders[placeholder]} | {result.right[placeholder]} "
               f"| {result.precision(placeholder):.1%} |")
    if result.clean_texts:
        yield ""
        yield (f"Clean text (the simulator's questions, answers and passages): {result.clean_texts} texts, "
               f"{result.clean_changed} changed ({result.clean_precision():.1%} left as they were).")


def main() -> None:
    import sys  # noqa: PLC0415

    from ragmon.monitor.labeling.redact import RedactionConfig, Redactor  # noqa: PLC0415

    redactor = Redactor(RedactionConfig(caller_key="corpus-scoring-key-0123"))
    samples = generate()
    result = score(redactor.redact, samples, clean_texts())
    print(f"{len(samples)} samples, {sum(result.planted.values())} planted items of {len(TYPES)} types, "
          f"locales {', '.join(LOCALES)}\n")
    print("\n".join(table(result)))
    prose = prose_texts()
    changed = sum(redactor.redact(text) != text for text in prose)
    print(f"\nPython's reference documentation: {len(prose)} paragraphs, {changed} changed "
          f"({1 - changed / len(prose):.1%} left as they were).")
    from tests.services.harness import PRESIDIO_EVALUATOR_VERSION, presidio_templates  # noqa: PLC0415

    filled = template_samples(presidio_templates().read_text(encoding="utf-8", errors="replace"))
    on_templates = score(redactor.redact, filled, [])
    print(f"\npresidio-evaluator {PRESIDIO_EVALUATOR_VERSION}'s templates, each filled 10 times: {len(filled)} "
          f"samples, {sum(on_templates.planted.values())} planted items\n")
    print("\n".join(table(on_templates, sorted(on_templates.planted))))
    if "-v" in sys.argv:
        for kind, missed in on_templates.misses.items():
            print(f"\ntemplates, {kind}: {len(missed)} missed, e.g. {missed[:8]}")
        for kind, missed in result.misses.items():
            print(f"\n{kind}: {len(missed)} missed, e.g. {missed[:8]}")
        print("\nfalse redactions:", result.false_redactions[:10])


if __name__ == "__main__":
    main()
