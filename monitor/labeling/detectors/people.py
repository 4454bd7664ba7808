"""Person names and street addresses, by the shape they take in writing.

No language model does this here: the NER models that install from the package index (spaCy's
small English pipeline, as re-uploaded there, and Presidio on it) found 50-84% of the names and
almost none of the street addresses of our corpus (docs/sampling.md). Instead:

- **names**: two to five capitalised name words in a row (particles such as ``de``, ``van``,
  ``von``, ``di``, ``del`` allowed inside, initials such as ``H.-Dieter``), optionally after a
  title (Mr, Dr, Frau, Mme, Sig., Dhr. ...) and before a degree (PhD, B.Sc. ...). Common words
  at a run's start are dropped (a sentence's first word is capitalised whatever it is); a run is
  cut at capitalised function words ("Directed By Jane Roe"); what is left is not a name when
  every word is a common capitalised word of documents (``_NOT_NAMES``), a word ends like a common
  noun, it starts like a place (San, Port, Lake ...) or ends like a town (-ville, -furt ...), or
  it ends in a company form (Inc, GmbH ...). A title alone also makes one following word a name.
- **street addresses**: a house number and name words ending in a street type (``12 Baker
  Street``, USPS and Royal Mail types), a street type and name words then a number (``Calle
  Mayor 5``, ``Via Roma, 12``, ``rue de la Paix``), or one compound word ending in a street type
  then a number (``Hauptstr. 4-6``, ``Keizersgracht 123``); each with a flat, suite or floor
  after it.

What is missed: single names without a title ("ask Smith"), names written in lower case, streets
without a type word. What is over-redacted: other runs of capitalised words (product names such
as "Microsoft Teams", song titles, countries of two words).
"""

from __future__ import annotations

import re

from ragmon.monitor.labeling.detectors.base import Rule, whole_match

PERSON, ADDRESS = "[PERSON]", "[ADDRESS]"


def _words(text: str) -> list[str]:
    return text.split()


_UP = "A-ZÀ-ÖØ-ÞĀ-Ž"
_LOW = "a-zß-öø-ÿā-ž"
# A name word: Anne, O'Neil, D'Angelo, McCoy, DeShawn, Müller-Lüdenscheidt; or an initial: H., H.-Dieter
_WORD = (rf"(?:[{_UP}](?:['’][{_UP}]?)?[{_LOW}]+(?:[{_UP}][{_LOW}]+)?(?:-[{_UP}][{_LOW}]+)*"
         rf"|[{_UP}]\.(?:-[{_UP}][{_LOW}]+)?)")
_PARTICLE = r"(?:de|da|do|dos|das|del|della|di|du|des|la|le|van|von|der|den|ten|ter|zu|y|e|i|bin|al|el|ibn)"
_TITLE = (r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame|Herr|Frau|Hr|Fr|Mme|Mlle|Mme|Me|Sr|Sra|Srta|Dña|Don|Doña"
          r"|Sig|Sig\.ra|Sig\.na|Dott|Dott\.ssa|Ing|Avv|Dhr|Mevr|Mw|Ir|Drs|Mag|Univ\.Prof|Dipl\.-Ing)\.?")
_DEGREE = (r"(?:,?\s(?:Jr\.|Sr\.|II|III|IV|MD|DDS|DVM|PhD|Ph\.D\.|MBA|B\.Sc\.|M\.Sc\.|B\.A\.|M\.A\.|B\.Eng\."
           r"|M\.Eng\.|BSc|MSc|BA|MA|LLB|LLM|CPA))")
# A title is not a word of a run: "Dear Ms. Roe" is "Dear", then a title and a name.
_RUN_WORD = rf"(?!{_TITLE}\s){_WORD}"
_NAME = re.compile(
    rf"(?<![\w.@/#-])(?:({_TITLE})\s+)?"
    rf"({_RUN_WORD}(?:(?:[ \t\u00a0]+|-(?={_PARTICLE} ))(?:{_PARTICLE} +){{0,2}}{_RUN_WORD}){{0,4}})"
    rf"{_DEGREE}?(?![\w@])")

# Capitalised words of documents and headings: a run of these alone is not a name.
_NOT_NAMES = frozenset(_words(r"""
a an and the of in on at to for from by with as or nor but if when where what who whom whose which why how
this that these those it its we you he she they i my our your their his her me us them all any each every no
not yes please note see also new old next last first second third other more most many much some such dear
hi hello thanks thank regards best kind sincerely cheers monday tuesday wednesday thursday friday saturday
sunday january february march april may june july august september october november december today tomorrow
yesterday section chapter part table figure appendix annex article clause page step item example examples
note notes policy policies team teams department office manager managers guide handbook report review
meeting status ticket invoice customer customers service services support security training release version
update data system systems software foundation standard library language reference operations operation
functions function objects object types type statement statements expression expressions error errors
exception class classes module modules package packages python unicode boolean string strings integer
integers number numbers list lists dictionary dictionaries set sets file files input output value values
name names key keys index code changed added deprecated human resources finance engineering sales marketing
legal board company group groups project projects program plan budget account accounts general annual
quarterly monthly weekly daily north south east west central united states kingdom european union america
american british english german french spanish italian dutch europe asia africa australia canada internet
web online email phone help desk it hr api sso faq vpn pdf id information technology center centre
management committee council director directors executive officer chief president vice senior junior head
lead staff employee employees contractor contractors user users admin administrator question questions
answer answers request requests access approval approvals process procedure procedures rules rule terms
conditions privacy notice agreement contract contracts order orders payment payments price prices product
products platform cloud server client network database storage cluster social health safety quality risk
compliance audit tax taxes insurance benefits leave travel expense expenses holiday holidays vacation remote
work office offices building room floor desk overview introduction summary conclusion background purpose
scope definitions responsibilities contact contacts details street road avenue lane drive way place square
park court types annotations descriptors sequence mode feed return separator tab character hints imports
arrays scopes blocks commands model support core custom text form line control record paragraph horizontal
vertical byte mapping immutable mutable abstract base common extended variable direct instance super numeric
decimal generic alias relative outer inner structural pattern context format syntax specification escape
development carriage practices debugger document tuples coroutine binding
personal info contact details award awarded directed
search hybrid vector vectors dense sparse semantic keyword retriever retrievers retrieval reranker rerank
knowledge wiki portal store hub docs documents assistant chat bot agent model models embedding embeddings
"""))
# Function words written with a capital inside a run make it a title ("Musicians Of The Night").
_TITLE_WORDS = frozenset(_words("of the and to by my in on for at a an with from is are was i'm i've now"))
# A run starting with one of these, or ending like a town, names a place ("San Marino", "Port Steven").
_PLACE_STARTS = frozenset(_words("san santa santo são sao saint st sainte port lake mount fort las los el bad"))
_PLACE_ENDINGS = ("ville", "furt", "side", "haven", "mouth", "borough", "burgh", "view", "hausen")
# A run ending in one of these names a company: "Acme Corp", "Initech GmbH".
_COMPANY = frozenset(_words("inc corp corporation ltd llc llp gmbh ag sa sas sarl srl spa bv nv plc co limited"))
# Endings of common nouns and adjectives that are hardly ever names (Specification, Management, Syntax...)
_NOUN_ENDINGS = ("tion", "tions", "sion", "sions", "ment", "ments", "ness", "ity", "ities", "ance", "ence",
                 "ics", "ism", "ogy", "ure", "ures", "ive", "ives", "able", "ible", "ous", "ary", "ator",
                 "ators", "ings", "ax", "ization")


def _is_name(words: list[str]) -> bool:
    """A run of capitalised words (common words at its start already dropped) is a name unless
    it reads as a place, a company, a heading or a title."""
    names = [w for w in words if w.lower() not in _PARTICLE_SET]
    if len(names) < 2:
        return False
    lower = [w.lower().rstrip(".") for w in names]
    if any(w.endswith(_NOUN_ENDINGS) for w in lower) or lower[-1] in _COMPANY or lower[0] in _PLACE_STARTS:
        return False
    if lower[-1].endswith(_PLACE_ENDINGS):
        return False
    return any(w not in _NOT_NAMES for w in lower)


_PARTICLE_SET = frozenset(_PARTICLE.strip("(?:)").split("|"))
_WORD_SPAN = re.compile(r"\S+")


def _name(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """With a title, the whole match. Without, the first part of the run, cut at capitalised
    function words ("Directed By Jane Roe"), that is a name once the common words at its start
    are dropped (a sentence's first word is capitalised whatever it is)."""
    if m.group(1) is not None:
        return m.span()
    base, run = m.start(2), m.group(2)
    segment: list[re.Match[str]] = []
    for word in [*_WORD_SPAN.finditer(run), None]:
        if word is not None and word.group().lower() not in _TITLE_WORDS:
            segment.append(word)
            continue
        while segment and segment[0].group().lower() in _NOT_NAMES:
            segment.pop(0)
        if segment and _is_name([w.group() for w in segment]):
            end = m.end() if word is None else base + segment[-1].end()  # a degree follows the run's end
            return base + segment[0].start(), end
        segment = []
    return None


# -- street addresses --------------------------------------------------------------------------------

# Street types written after the name (USPS Publication 28 and Royal Mail usage).
_SUFFIXES = _words(r"""
Alley Annex Arcade Avenue Ave Bayou Beach Bend Bluffs? Bottom Boulevard Blvd Branch Bridge Brooks? Burgs?
Bypass Camp Canyon Cape Causeway Centers? Centres? Circles? Cliffs? Close Club Commons? Corners? Course
Courts? Ct Coves? Creek Crescent Cres Crest Crossing Crossroads? Curve Dale Dam Divide Drives? Dr Drove
Estates? Expressway Expy Extensions? Falls? Ferry Fields? Flats? Fords? Forest Forges? Forks? Fort Freeway
Gardens? Gateway Glens? Greens? Groves? Harbors? Haven Heights Highway Hwy Hills? Hollow Inlet Islands? Isle
Junctions? Keys? Knolls? Lakes? Land Landing Lane Ln Lights? Loaf Locks? Lodge Loop Mall Manors? Meadows?
Mews Mills? Mission Motorway Mount Mountains? Neck Orchard Oval Overpass Parade Parks? Parkways? Pkwy Pass
Passage Path Pike Pines? Place Pl Plains? Plaza Points? Ports? Prairie Radial Ramp Ranch Rapids? Rest
Ridges? Rise River Roads? Rd Route Row Rue Run Shoals? Shores? Skyway Springs? Spurs? Squares? Sq Station
Stravenue Stream Streets? St Summit Terrace Ter Throughway Trace Track Trafficway Trail Trailer Tunnel
Turnpike Underpass Unions? Valleys? Vale Via Viaduct Views? Villages? Ville Vista Walks? Wall Ways? Wells?
Wharf Yard
""")
_ABBREVIATIONS = "Ave|Blvd|Ct|Cres|Dr|Expy|Hwy|Ln|Pkwy|Pl|Rd|Sq|St|Ter"
# Street types written before the name (French, Spanish, Italian, Portuguese, English "Avenue of").
_PREFIXES = _words(r"""
rue avenue boulevard bd chemin allée allee impasse quai cours route Rue Avenue Boulevard Chemin Allée
Impasse Quai Cours Route Place Passage Square Calle C/ Avenida Avda\. Paseo Plaza Camino Carrera Ronda
Rambla Pasaje Travesía Vía Cañada Alameda Callejón Urbanización Glorieta Cuesta Acceso Carretera Pasadizo
Calleja Vial C\. Carrer Praça Rua Travessa Largo Via Viale Piazza Piazzale Corso Vicolo Contrada Borgo
Strada Stretto Rotonda Canale Incrocio Lungomare
""")
# Street types ending a compound word (German, Dutch): Hauptstraße, Lindenstr., Keizersgracht.
_COMPOUND_ENDS = _words(r"""
straße strasse str\. weg gasse allee platz ring damm ufer steig pfad chaussee markt berg hof graben wall
kamp feld garten straat laan plein gracht kade singel pad steeg dreef dijk park plantsoen baan markt wijk
boulevard
""")
_HYPHEN_ENDS = _words(r"""
Straße Strasse Str\. Weg Gasse Allee Platz Ring Damm Ufer Steig Pfad Chaussee Markt Berg Hof Graben Wall
Kamp Feld Garten Park Straat Laan Plein
""")

_NUMBER = r"[0-9]{1,5}(?:\s?[A-Za-z](?![\w]))?(?:\s?[-/]\s?[0-9]{1,5}[A-Za-z]?)?"
# A unit's number may start with a letter (USPS secondary units: "Apt B2", "# 3C", "Unit C3"), and is
# taken whole or not at all: ending the match inside it ("#" before "B2") made the check refuse the
# whole address.
_UNIT = (r"(?:,?\s+(?:Apt\.?|Apartment|Suite|Ste\.?|Unit|Flat|Floor|Fl\.|#|Piso|Puerta|Apto\.?|Bajo|Esc\.?"
         r"|Piano|Appartamento|Interno|Scala|bis|ter)\s*(?:[0-9]{1,5}[A-Za-z]?|[A-Za-z][0-9]{0,5})?(?![\w]))*")
_STREET_WORDS = rf"(?:(?:{_PARTICLE}|l'|d'|dell'|dei|degli|delle|do|das|St\.)\s+|{_WORD}\s+)"
_ADDRESS_EN = re.compile(
    rf"(?<![\w.,/-])(?:(?:Flat|Studio|Apartment|Unit)\s+[0-9]{{1,4}}[A-Za-z]?,?\s+)?"
    rf"(?:{_NUMBER},?\s+)?(?:[NSEW]\.?\s+)?{_STREET_WORDS}{{0,3}}{_WORD}\s+(?:(?:{'|'.join(_SUFFIXES)})(?![\w])|(?:{_ABBREVIATIONS})\.?(?![\w]))"
    rf"{_UNIT}")
_ADDRESS_PREFIXED = re.compile(
    rf"(?<![\w/-])(?:{_NUMBER},?\s+)?(?:{'|'.join(_PREFIXES)})\s+{_STREET_WORDS}{{0,4}}(?:{_WORD}|[0-9]{{1,2}}\s+de\s+\w+)"
    rf"(?:,?\s+(?:n\.?\s*|nº\s*|no\.?\s*)?{_NUMBER}(?![\w]))?{_UNIT}")
_ADDRESS_COMPOUND = re.compile(
    rf"(?<![\w/-])(?:[{_UP}][{_LOW}A-Za-z\-]*\s+)?[{_UP}][{_LOW}\-]{{2,}}"
    rf"(?:{'|'.join(_COMPOUND_ENDS)}|(?:-[{_UP}][{_LOW}]*)*-(?:{'|'.join(_HYPHEN_ENDS)}))\.?\s+{_NUMBER}(?![\w]){_UNIT}")


def _street(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """An English-style street needs a house number or a flat in front, or two name words of which
    one, its dot stripped, is no common word: "Heather Drive" is a street, "the Drive" and
    "A. Park Lane" are not."""
    span = m.group()
    if not span[0].isdigit() and not span.startswith(("Flat", "Studio", "Apartment", "Unit")):
        words = [w for w in span.split() if w[:1].isupper()]
        if len(words) < 2 or all(w.lower().rstrip(".") in _NOT_NAMES for w in words[:-1]):
            return None
        if any(w.lower() in _TITLE_WORDS for w in words):
            return None  # "Carry Me Back To Old Virginny"
    return m.span()  # the pattern ends where no word character follows: nothing is glued to it


def _prefixed(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """"rue de la Paix" and "Via Roma, 12": a lower-case French type needs its name, an upper-case
    one at a sentence start (Place, Route, Passage) also a number, since they are common words."""
    span = m.group()
    if not any(c.isdigit() for c in span):
        first = span.split()[0]
        if first[0].isupper() and first in ("Place", "Route", "Passage", "Square", "Plaza", "Largo", "Via", "Corso"):
            return None
    return m.span()


# Every rule needs a capital followed by a small letter somewhere (ids and slugs have none); the
# street rules other than the French one also a digit, or the English one two capitalised words.
_CAPITALISED = re.compile(rf"[{_UP}][{_LOW}]")
_NUMBERED = re.compile(r"[0-9]")
_TWO_CAPITALISED = re.compile(rf"[{_UP}][{_LOW}]+[ \t]+[{_UP}]")

RULES = [
    Rule("address", ADDRESS, _ADDRESS_COMPOUND, whole_match, _NUMBERED),
    Rule("address", ADDRESS, _ADDRESS_EN, _street, _CAPITALISED),
    Rule("address", ADDRESS, _ADDRESS_PREFIXED, _prefixed, _CAPITALISED),
    Rule("person", PERSON, _NAME, _name, _CAPITALISED),
]
