"""Wording of counts and names in reports and messages: one place for singular and plural, "a" or
"an", so no report says "1 calls" or "a audit case"."""

from __future__ import annotations

# Nouns whose plural is not the noun plus "s".
IRREGULAR = {"was": "were", "is": "are", "has": "have", "this": "these", "analysis": "analyses",
             "entry": "entries", "property": "properties", "summary": "summaries"}


def plural_of(noun: str) -> str:
    """The plural of ``noun`` (the last word of a phrase takes it: "judge call" -> "judge calls")."""
    head, _, last = noun.rpartition(" ")
    if last in IRREGULAR:
        word = IRREGULAR[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        word = last + "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def noun_for(count: int | float, noun: str) -> str:
    """``noun`` as it goes with ``count``: singular for exactly 1, plural otherwise (0, 2, 1.5)."""
    return noun if count == 1 else plural_of(noun)


def count_of(count: int | float, noun: str) -> str:
    """``count`` and ``noun`` agreeing: "1 call", "2 calls", "0 cases"."""
    return f"{count} {noun_for(count, noun)}"


def with_article(word: str) -> str:
    """``word`` with "a" or "an" by its first sound (letters only: "an audit", "a template")."""
    text = str(word)
    return ("an " if text[:1].lower() in ("a", "e", "i", "o", "u") else "a ") + text
