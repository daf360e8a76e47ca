"""Text features the offline judge reasons with: sentences, key terms, numbers, dates, negation,
direction, entities. Plain, deterministic, and language-naive (English) on purpose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

STOPWORDS = frozenset("""
a an the and or but if then else of to in on at by for with from into onto over under about as is are
was were be been being it its this that these those there here which who whom whose what when where why
how do does did done has have had having not no nor so than too very can could should would may might
must will shall i you he she we they me him her us them my your his our their one also just only any all
some such each other more most much many own same both either neither whether per via up down out off
answer response question whether number value name
""".split())

NEGATIONS = frozenset("not no never none nor neither without cannot can't won't isn't aren't wasn't "
                      "weren't doesn't don't didn't hasn't haven't hadn't fails fail lacks absent".split())
UP = frozenset("increase increased increases increasing rise rose rises rising grow grew grows growth "
               "higher more gain gained gains up surge surged improve improved improves improvement "
               "expand expanded expansion exceed exceeded boost boosted raise raised strengthen "
               "strengthened above accelerate accelerated positive climb climbed climbs jump jumped "
               "soar soared rally rallied".split())
DOWN = frozenset("decrease decreased decreases decreasing fall fell falls falling decline declined "
                 "declines declining drop dropped drops lower less loss lost down shrink shrank shrinking "
                 "reduce reduced reduces reduction cut cuts worsen worsened weaken weakened below "
                 "slow slowed slowdown contraction contracted negative slip slipped slips collapse "
                 "collapsed plunge plunged plummeted lowered lowers sank".split())
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                     "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1_000_000, "dozen": 12})
MONTHS = ("january february march april may june july august september october november december").split()

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*|\d[\d,]*(?:\.\d+)?")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?|(?<![\w.])[-+]?\d+(?:\.\d+)?%?")
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b(?:" + "|".join(MONTHS) + r")\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b|"
    r"\b\d{1,2}(?:st|nd|rd|th)? (?:" + "|".join(MONTHS) + r"),? \d{4}\b|\b\d{1,2}/\d{1,2}/\d{4}\b", re.I)
_ENTITY = re.compile(r"\b(?:[A-Z][a-zA-Z0-9+/'-]*[A-Z0-9+][a-zA-Z0-9+/'-]*|[A-Z]{2,}[0-9]*|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)(?![\w+])")
_ENUMERATION = re.compile(r"(?:[\w+/'-]+(?: [\w+/'-]+){0,3}, )+[\w+/'-]+(?: [\w+/'-]+){0,3},? (?:and|or) [\w+/'-]+(?: [\w+/'-]+){0,3}"
                          r"|(?:[\w+/'-]+(?: [\w+/'-]+){0,2}, ){2,}[\w+/'-]+(?: [\w+/'-]+){0,2}(?=\s*[.;]?\s*$)")


FRACTIONS = {"half": 50.0, "halves": 50.0, "third": 100 / 3, "thirds": 100 / 3, "quarter": 25.0,
             "quarters": 25.0, "fifth": 20.0, "fifths": 20.0, "tenth": 10.0, "tenths": 10.0}
SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9, "m": 1e6, "k": 1e3}
HEDGED = frozenset("about around roughly nearly almost approximately some circa approx".split())
_QUANTITY = re.compile(
    r"(?<![\w.])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?(?P<pct>%|per ?cent\b)?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|m|k)\b)?"
    r"|\b(?P<word>a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty)"
    r"(?:\s(?P<frac>half|halves|thirds?|quarters?|fifths?|tenths?)\b)?", re.I)


@dataclass(frozen=True)
class Quantity:
    """A number in a text: its value (scaled: 2.3 million -> 2300000), whether it is a percent
    (fractions such as 'two thirds' count as percents), whether it is hedged ('about 20%'),
    and the key terms around it (its slot: what it counts)."""

    value: float
    percent: bool
    hedged: bool
    window: frozenset[str]
    raw: str


def quantities(text: str, width: int = 4) -> list[Quantity]:
    """The quantities written in ``text`` (digits, number words, fractions), with their context."""
    out = []
    for m in _QUANTITY.finditer(text):
        if m.group("num"):
            value = float(m.group("num").replace(",", "")) * SCALES.get((m.group("scale") or "").lower(), 1.0)
            percent = bool(m.group("pct"))
        else:
            word, frac = m.group("word").lower(), (m.group("frac") or "").lower()
            count = 1.0 if word in ("a", "an") else float(NUMBER_WORDS.get(word, 0))
            if frac:
                value, percent = count * FRACTIONS[frac], True
            elif word in ("a", "an"):
                continue
            else:
                value, percent = count, False
        before = words(text[: m.start()])[-width:]
        after = words(text[m.end():])[:width]
        hedged = bool(before) and before[-1] in HEDGED
        window = frozenset(stem(w) for w in before + after
                           if w not in STOPWORDS and w not in NUMBER_WORDS and not w[0].isdigit())
        out.append(Quantity(value, percent, hedged, window, m.group()))
    return out


@dataclass(frozen=True)
class Span:
    """A verbatim piece of a text and where it starts."""

    text: str
    start: int


def sentences(text: str) -> list[Span]:
    """The sentences (and list items) of ``text`` as verbatim spans, stripped."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        piece = text[a:b]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        if piece:
            out.append(Span(piece, a + lead))
    return out


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    """A light English stemmer: enough to match 'pairs' with 'pair' and 'commanded' with 'commander'."""
    w = word.lower().strip("'")
    if len(w) > 5 and w.endswith(("ably", "ibly")):
        return w[:-1]  # 'irreversibly' meets 'irreversible' (-> 'irreversibl')
    for suffix in ("ational", "ization", "ations", "ation", "ings", "ing", "edly", "ers", "er", "ed",
                   "ies", "es", "ly", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            base = w[: -len(suffix)]
            return base + "y" if suffix == "ies" else base
    return w[:-1] if len(w) > 4 and w.endswith("e") else w  # 'chromosome' meets 'chromosomes


def words(text: str) -> list[str]:
    """Every word and number of ``text``, lowercased."""
    return [w.lower() for w in _WORD.findall(text)]


def _content_words(text: str) -> list[str]:
    """The content words of ``text``, lowercased, in order (stopwords and numbers dropped; the parts
    of a hyphenated word count as words: 'placebo-controlled' gives 'placebo' and 'controlled')."""
    out = []
    for w in words(text.replace("_", " ")):
        for part in w.split("-") if "-" in w else (w,):
            if part and part not in STOPWORDS and not part[0].isdigit() and len(part) > 1:
                out.append(part)
    return out


def terms(text: str) -> list[str]:
    """The content words of ``text``, stemmed, in order: 'placebo-controlled' meets 'placebo' and
    'controls'."""
    return [stem(w) for w in _content_words(text)]


def term_words(text: str) -> dict[str, str]:
    """Each term of ``text`` with the first word of the text it stems from, so a term can be shown
    to a reader as the text wrote it ('modul' -> 'modules')."""
    out: dict[str, str] = {}
    for w in _content_words(text):
        out.setdefault(stem(w), w)
    return out


def term_set(text: str) -> frozenset[str]:
    """The text's terms as a set."""
    return frozenset(terms(text))


def numbers(text: str) -> list[float]:
    """The numbers written in ``text`` (digits, with thousands commas and percent; number words)."""
    found = []
    for raw in _NUMBER.findall(text):
        try:
            found.append(float(raw.rstrip("%").replace(",", "")))
        except ValueError:
            continue
    for w in words(text):
        if w in NUMBER_WORDS and w not in ("hundred", "thousand", "million"):
            found.append(float(NUMBER_WORDS[w]))
    return found


def dates(text: str) -> list[str]:
    """The dates written in ``text``, as ISO ``YYYY-MM-DD`` strings."""
    from dateutil import parser as dateparser

    out = []
    for raw in _DATE.findall(text):
        try:
            out.append(dateparser.parse(raw, fuzzy=True).date().isoformat())
        except (ValueError, OverflowError):
            continue
    return out


def negated(text: str) -> bool:
    """True when ``text`` carries a negation cue."""
    return any(w in NEGATIONS or w.endswith("n't") for w in words(text))


def direction(text: str) -> int:
    """+1 when ``text`` speaks of a rise, -1 of a fall, 0 for neither or both (negation flips it)."""
    ws = set(words(text))
    up, down = bool(ws & UP), bool(ws & DOWN)
    sign = 1 if up and not down else -1 if down and not up else 0
    return -sign if negated(text) else sign


def entities(text: str) -> list[str]:
    """Proper names, symbols and acronyms (capitalised runs not opening a sentence), in order."""
    out = []
    for span in sentences(text):
        for m in _ENTITY.finditer(span.text):
            name = m.group()
            if m.start() == 0 and name.lower() in STOPWORDS | {"the", "a", "an"}:
                continue
            if m.start() == 0 and " " not in name and not any(c.isdigit() or c.isupper() for c in name[1:]):
                continue  # an ordinary word that only opens the sentence
            name = re.sub(r"^(?:The|A|An) ", "", name)
            if name not in out:
                out.append(name)
    return out


def enumeration(text: str) -> list[str] | None:
    """The items of the longest 'A, B, C and D' list in ``text`` (three items at least), or None.

    Items are cut to the shortest item's length from the end ('clotting factors II, VII, IX and X'
    -> II, VII, IX, X).
    """
    runs = [m.group() for m in _ENUMERATION.finditer(text)]
    if not runs:
        return None
    items = [i.strip() for i in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", max(runs, key=len)) if i.strip()]
    if len(items) < 3:
        return None
    return trim_items(items)


def trim_items(items: list[str]) -> list[str]:
    """Cut list items to the length of the shortest one, from the end: the lead-in words of the
    first item ('clotting factors II') are not part of the list."""
    usual = min(len(i.split()) for i in items)
    return [" ".join(i.split()[-usual:]) if len(i.split()) > usual else i for i in items]


def overlap(wanted: frozenset[str], have: frozenset[str]) -> float:
    """Share of ``wanted`` found in ``have`` (0.0 when nothing is wanted)."""
    return len(wanted & have) / len(wanted) if wanted else 0.0


def is_year(value: float, raw: str = "") -> bool:
    """A whole number from 1000 to 2100 written plainly: a year, which only equals itself."""
    return value == int(value) and 1000 <= value <= 2100 and "," not in raw and "%" not in raw


def same_number(a: float, b: float) -> bool:
    """Equal numbers: whole numbers exactly (1969 is not 1971), others within 0.5%."""
    if a == int(a) and b == int(b):
        return a == b
    return close(a, b, 0.005)


def close(a: float, b: float, tolerance: float = 0.0) -> bool:
    """Equal numbers, or within a relative ``tolerance``."""
    if a == b:
        return True
    return tolerance > 0 and abs(a - b) <= tolerance * max(abs(a), abs(b))
