"""The answer-like value of a short answer: the result after '=', the name the sentence is about.

People answer "20 x 69 = 1380." and "Jupiter is the largest planet.": the value asked for is the
result after the equals sign (not the first operand) and the named subject (not the predicate
that repeats the question). These rules run before the offline parser's general ones and give
way to them (return None) when a sentence has no such shape.
"""

from __future__ import annotations

import re

# Words that announce a result; the number after the last of them is the answer.
_RESULT = re.compile(r"=|\bequals?\b|\bequal to\b|\bgives?\b|\bmakes?\b|\bgets?\b|\bget\b|\bcomes? to\b"
                     r"|\b(?:result|answer|total|product|sum|difference|quotient)\s+(?:is|was|of)\b", re.I)
# A number with its sign: '-19' is negative, '40 - 59' is a subtraction.
_SIGNED = re.compile(r"(?<![\w.])(?:(?<=\s)|^)?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")
_COPULA = re.compile(r"\s+(?:is|was|are|were|would be|will be|be)\s+", re.I)
# Openers that carry no content: 'Definitely Saturn', 'I believe it is Venus'.
_OPENERS = frozenset("definitely certainly surely clearly obviously probably likely yes well so actually "
                     "indeed perhaps maybe i it that this answer".split())
_NAME = re.compile(r"^[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3}$")  # a capitalised run: 'Proxima Centauri'
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)


def _signed_numbers(text: str) -> list[float]:
    out = []
    for raw in _SIGNED.findall(text):
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def answer_number(sentence: str, question: str) -> float | None:
    """The number after the last result word ('= 1380', 'gives -19'), else the one number the
    sentence has that the question does not (the operands are in the question), else None."""
    marks = list(_RESULT.finditer(sentence))
    if marks:
        after = _signed_numbers(sentence[marks[-1].end():])
        if after:
            return after[0]
    asked = set(_signed_numbers(question))
    fresh = [n for n in _signed_numbers(sentence) if n not in asked and abs(n) not in asked]
    return fresh[0] if len(set(fresh)) == 1 and asked else None


def _clean(phrase: str) -> str:
    phrase = phrase.split(" (", 1)[0]  # an aside in brackets is not the answer: 'N-acetylcysteine (NAC)'
    words = phrase.strip().strip(".,;:!?\"'()").split()
    while words and words[0].lower().strip(",;:") in _OPENERS:
        words = words[1:]
    return _ARTICLE.sub("", " ".join(words).strip(".,;:!?\"'()"))


def answer_name(sentence: str, question: str) -> str | None:
    """The name or short phrase a short answer gives, or None when the sentence has no such shape.

    'Jupiter is the largest planet' -> 'Jupiter' (the subject, when the predicate is what the
    question asked about); 'The capital of Canada is Ottawa' -> 'Ottawa' (a short tail after the
    last copula); 'Mercury - it is ...', 'Nairobi, without a doubt' -> the name before the break;
    'Titan.' -> 'Titan'.
    """
    asked = question.lower()
    text = sentence.strip()
    head = re.split(r"\s+[-\u2013\u2014]\s+|[,;:]\s+|\s+\(", text, maxsplit=1)
    if len(head) == 2:
        first = _clean(head[0])
        if first and len(first.split()) <= 3 and first.lower() not in asked and not _COPULA.search(f" {head[0]} "):
            return first
    parts = _COPULA.split(text)
    if len(parts) >= 2 and len(text.split()) <= 12:  # a long sentence is not a short answer
        subject, tail = _clean(parts[0]), _clean(parts[-1])
        if _NAME.match(subject) and subject.lower() not in asked:
            return subject  # 'Jupiter is the largest planet'
        if tail and len(tail.split()) <= 4 and tail.lower() not in asked:
            return tail     # 'The capital of Canada is Ottawa'
    short = _clean(text)
    if short and len(short.split()) <= 3 and short.lower() not in asked:
        return short
    return None
