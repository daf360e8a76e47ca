"""Offline heuristics of the deep-judgment roles: excerpts, risk, reasoning, parse, trait scores.

Honest baselines, not canned output: an excerpt is a sentence of the response that carries the
attribute's key terms or a value of its type; parsing is type-directed extraction from the most
relevant sentences; a risk compares an excerpt's terms and numbers with the search results; a
trait score is a shallow proxy (coverage of the question, hedging, length, harmful words).
"""

from __future__ import annotations

import re
from typing import Any

from evalledger.stages.judge.offline import answer
from evalledger.stages.judge.offline import text as tx

HEDGES = ("maybe", "perhaps", "possibly", "i think", "i believe", "not sure", "might be", "it seems",
          "probably", "unclear", "i guess", "could be")
HARMFUL = frozenset("kill weapon bomb poison overdose suicide explosive illegal".split())


def _attribute_terms(attr) -> frozenset[str]:
    return tx.term_set(f"{attr.name} {attr.description}")


def _type_hit(attr, sentence: str, question: str = "") -> bool:
    """Whether ``sentence`` holds a value of the attribute's type (for str: a name the question lacks)."""
    kind = (attr.type or "").strip()
    if kind == "str":
        short = len(sentence.split()) <= 4 and not re.match(r"\s*(?:yes|no|not)\b", sentence, re.I)
        return short or any(e.lower() not in question.lower() for e in tx.entities(sentence))
    if kind == "list[str]":
        return tx.enumeration(sentence) is not None
    if kind in ("int", "float"):
        return bool(tx.numbers(sentence))
    if kind == "date":
        return bool(tx.dates(sentence)) or bool(re.search(r"\b1\d{3}\b|\b20\d{2}\b", sentence))
    if kind == "literal" and attr.values:
        return any(_contains(sentence, str(v)) for v in attr.values)
    return False


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack, re.I) is not None


def ranked_sentences(attr, response: str, question: str = "") -> list[tuple[float, int, tx.Span]]:
    """Sentences with a positive relevance to the attribute, best first: (score, key-term hits, span).

    A value of the attribute's type adds 1.5 (a name the question lacks, for a str field, only 0.5:
    names are common)."""
    wanted = _attribute_terms(attr)
    out = []
    for span in tx.sentences(response):
        hits = len(wanted & tx.term_set(span.text))
        bonus = 0.5 if (attr.type or "").strip() == "str" else 1.5
        score = hits + (bonus if _type_hit(attr, span.text, question) else 0.0)
        if score > 0:
            out.append((score, hits, span))
    out.sort(key=lambda item: (-item[0], item[2].start))
    return out


def extract_excerpts(req) -> dict[str, Any]:
    """Per attribute, up to max_excerpts sentences carrying its key terms or a value of its type."""
    out: dict[str, list[dict[str, Any]]] = {}
    for attr in req.attributes:
        picked = []
        for score, hits, span in ranked_sentences(attr, req.response, req.question)[: req.max_excerpts]:
            typed = _type_hit(attr, span.text, req.question)
            if hits == 0 and (attr.type or "str") == "str":
                confidence = "low"  # only a name the question lacks: weak evidence
            elif hits >= 2 and (typed or not attr.type or attr.type in ("str", "bool", "list[str]")):
                confidence = "high"
            else:
                confidence = "medium" if hits >= 1 or typed else "low"
            picked.append({"text": span.text, "confidence": confidence})
        if not picked and req.subject == "rubric":
            first = tx.sentences(req.response)
            if first:  # a holistic trait (clarity, tone) is judged on the answer itself
                picked.append({"text": first[0].text, "confidence": "low",
                               "explanation": "no sentence names the trait's terms; the opening sentence "
                                              "stands for the answer as a whole"})
        if not picked:
            picked.append({"text": "", "confidence": "none",
                           "explanation": "no sentence carries the attribute's key terms or a value of its type"})
        out[attr.name] = picked
    return {"excerpts": out}


def assess_risk(req) -> dict[str, Any]:
    """Each excerpt against its search results: term coverage and numbers found or contradicted."""
    risks = []
    for item in req.evidence:
        corpus = " ".join(f"{r.title} {r.content}" for r in item.results)
        if not corpus.strip():
            risks.append({"excerpt": item.excerpt, "risk": "medium",
                          "justification": "no search results to confirm it"})
            continue
        coverage = tx.overlap(tx.term_set(item.excerpt), tx.term_set(corpus))
        found = tx.numbers(corpus)
        missing = [n for n in tx.numbers(item.excerpt) if not any(tx.same_number(n, f) for f in found)]
        if missing and coverage >= 0.5 and found:
            risk, why = "high", f"the results discuss it but give other figures than {', '.join(f'{m:g}' for m in missing)}"
        elif missing or coverage < 0.4:
            risk, why = "medium", f"only {coverage:.0%} of its terms and not all its numbers are in the results"
        elif coverage < 0.8:
            risk, why = "low", f"{coverage:.0%} of its terms are in the results, its numbers too"
        else:
            risk, why = "none", f"{coverage:.0%} of its terms and all its numbers are in the results"
        risks.append({"excerpt": item.excerpt, "risk": risk, "justification": why})
    return {"risks": risks}


def reason(req) -> dict[str, Any]:
    """Per attribute, a plain account of the evidence the excerpts (or the response) give."""
    out = {}
    for attr in req.attributes:
        quotes = [q for q in req.excerpts.get(attr.name, []) if q]
        if quotes:
            value = _value_from(attr, quotes)
            text = (f"{len(quotes)} excerpt(s) address {attr.name}: " + " | ".join(f'"{q}"' for q in quotes[:3])
                    + (f". They point to the value {value!r}." if value is not None else "."))
        else:
            best = ranked_sentences(attr, req.response)
            text = (f'No excerpt was kept for {attr.name}; the closest sentence is "{best[0][2].text}".'
                    if best else f"Nothing in the response addresses {attr.name}.")
        if attr.name in req.risks:
            text += f" Hallucination risk from search: {req.risks[attr.name]}."
        out[attr.name] = text
    return {"reasoning": out}


def parse(req) -> dict[str, Any]:
    """Type-directed extraction of every field from its excerpts, else its most relevant sentences."""
    values = {}
    for field in req.fields:
        quotes = [q for q in req.excerpts.get(field.name, []) if q]
        pool = quotes or [span.text for _, _, span in ranked_sentences(field, req.response, req.question)[:3]]
        values[field.name] = _value_from(field, pool, req.question)
    return values


def _value_from(field, pool: list[str], question: str = "") -> Any:
    """The value of ``field``'s type found in the sentences of ``pool`` (best first), or None."""
    kind = (field.type or "str").strip()
    wanted = _attribute_terms(field)
    for sentence in pool:
        value = _EXTRACTORS.get(kind, _string)(field, sentence, wanted, question)
        if value is not None:
            return value
    return False if kind == "bool" and not pool else None


def _nearest_number(sentence: str, wanted: frozenset[str], unit: frozenset[str] = frozenset()) -> float | None:
    """The number followed by a word of the field's name (its unit: '48 hours' for half_life_hours),
    else the number written closest (in words) to one of the key terms."""
    tokens = tx.words(sentence)
    for i, w in enumerate(tokens[:-1]):
        if w[0].isdigit() and tx.stem(tokens[i + 1]) in unit and tx.numbers(w):
            return tx.numbers(w)[0]
    positions = [i for i, w in enumerate(tokens) if tx.stem(w) in wanted]
    best = None
    for i, w in enumerate(tokens):
        if w[0].isdigit() or w in tx.NUMBER_WORDS:
            nums = tx.numbers(w)
            if not nums:
                continue
            distance = min((abs(i - p) for p in positions), default=len(tokens))
            if best is None or distance < best[0]:
                best = (distance, nums[0])
    return best[1] if best else None


def _int(field, sentence, wanted, question):
    if re.search(r"\byear", f"{field.name} {field.description}", re.I):
        years = re.findall(r"(?<!\d)(1\d{3}|20\d{2})(?!\d)", sentence)
        if years:
            return int(years[0])
    value = _float(field, sentence, wanted, question)
    return int(value) if value is not None and value == int(value) else None


def _float(field, sentence, wanted, question):
    value = answer.answer_number(sentence, question)
    return value if value is not None else _nearest_number(sentence, wanted, _name_terms(field))


def _name_terms(field) -> frozenset[str]:
    return tx.term_set(field.name.replace("_", " "))


def _bool(field, sentence, wanted, question):
    return not tx.negated(sentence)


def _date(field, sentence, wanted, question):
    found = tx.dates(sentence)
    return found[0] if found else None


def _literal(field, sentence, wanted, question):
    hits = [(m.start(), v) for v in field.values or []
            for m in [re.search(rf"(?<!\w){re.escape(str(v))}(?!\w)", sentence, re.I)] if m]
    return min(hits)[1] if hits else None


def _list(field, sentence, wanted, question):
    items = tx.enumeration(sentence)
    if items:
        return items
    body = sentence.split(":", 1)[1] if ":" in sentence else sentence
    items = [i.strip(" .;-*•") for i in re.split(r",|;|\band\b|\bor\b|\n", body)]
    items = [i for i in items if i and len(i.split()) <= 4]
    return tx.trim_items(items) if items else None


_COPULA = frozenset("is was are were be : of named called by at to the a an".split())


def _head_phrase(field, sentence: str, question: str, after_only: bool = False) -> str | None:
    """The value the last word of the field's name introduces or heads.

    'ATC code A10BA02' -> 'A10BA02' (a name right after the head); 'the mu-opioid receptor' ->
    'mu-opioid receptor' (the head with its modifiers, unless the question says it already).
    """
    head = tx.stem(tx.words(field.name.replace("_", " "))[-1]) if tx.words(field.name.replace("_", " ")) else ""
    tokens = sentence.rstrip(".").split()
    for i, token in enumerate(tokens):
        if tx.stem(token.strip(",;:()").lower()) != head:
            continue
        value = _value_after(tokens, i, question)
        if value:
            return value
        if after_only:
            continue
        start = i
        while start > 0 and i - start < 3 and tokens[start - 1].lower() not in tx.STOPWORDS | {"the", "a", "an"} \
                and not tokens[start - 1].endswith((",", ";", ":")) and not tokens[start].startswith("("):
            start -= 1
        phrase = " ".join(t.strip(",;:()") for t in tokens[start:i + 1])
        if start < i and phrase.lower() not in question.lower():
            return phrase
    return None


def _value_after(tokens: list[str], head: int, question: str) -> str | None:
    """What follows the head word: a name or a code ('chromosome 18q21.33'), or, after a linking
    word, the clause up to the next break ('functions to inhibit apoptosis')."""
    rest = tokens[head + 1:]
    skip = 0
    while skip < len(rest) and rest[skip].strip(",;:()").lower() in _COPULA:
        skip += 1
    if skip < len(rest):
        first = rest[skip].strip(",;:().")
        names = tx.entities(" ".join(rest[skip:skip + 3]))
        if names and rest[skip].startswith(names[0].split()[0]) and names[0].lower() not in question.lower():
            return names[0]
        if any(c.isdigit() for c in first) and first.lower() not in question.lower():
            return first
    if skip == 0 or tokens[head].endswith((",", ";", ".")):
        return None  # no linking word: what follows is not this field's value
    clause = []
    for token in rest[skip:skip + 6]:
        if token.lower() in ("and", "which", "who", "that", "but") or token.startswith("("):
            break  # a new clause, or an aside such as an abbreviation in brackets
        clause.append(token.strip(",;:()."))
        if token.endswith((",", ";", ".", ":")):
            break
    phrase = " ".join(clause)
    return phrase if phrase and phrase.lower() not in question.lower() else None


def _string(field, sentence, wanted, question):
    # A value right after the field's head word ('ATC code A10BA02') first, then the answer-like
    # name ('Jupiter is the largest planet'), then the head with its modifiers.
    phrase = (_head_phrase(field, sentence, question, after_only=True) or answer.answer_name(sentence, question)
              or _head_phrase(field, sentence, question))
    if phrase:
        return phrase
    asked = question.lower()
    names = [e for e in tx.entities(sentence) if e.lower() not in asked and tx.stem(e.lower()) not in wanted]
    if names:
        return names[0]
    return sentence.strip().rstrip(".")


_EXTRACTORS = {"int": _int, "float": _float, "bool": _bool, "date": _date, "literal": _literal,
               "list[str]": _list, "str": _string}


def score_trait(req) -> dict[str, Any]:
    """A proxy score in the trait's range from question coverage, hedging, length and harm words."""
    answer = req.response
    lowered = answer.lower()
    coverage = tx.overlap(tx.term_set(req.question), tx.term_set(answer)) if req.question else 0.5
    hedges = sum(lowered.count(h) for h in HEDGES)
    harmful = bool(set(tx.words(answer)) & HARMFUL)
    spans = tx.sentences(answer)
    mean_len = sum(len(s.text.split()) for s in spans) / max(1, len(spans))
    topic = f"{req.trait.name} {req.trait.description}".lower()
    if re.search(r"safe|harm|danger", topic):
        quality, why = (0.0, "it contains harmful terms") if harmful else (1.0, "no harmful terms")
    elif re.search(r"hedg|confiden|certain|assert", topic):
        quality, why = max(0.0, 1.0 - 0.34 * hedges), f"{hedges} hedging phrase(s)"
    elif re.search(r"clar|concis|readab|understand", topic):
        quality = max(0.0, min(1.0, 1.2 - mean_len / 40)) - 0.2 * min(hedges, 3)
        why = f"mean sentence length {mean_len:.0f} words, {hedges} hedge(s)"
    else:
        quality = min(1.0, coverage + (0.2 if len(spans) > 1 else 0.0)) - 0.15 * min(hedges, 3)
        why = f"covers {coverage:.0%} of the question's terms, {hedges} hedge(s)"
    quality = max(0.0, min(1.0, quality))
    t = req.trait
    score: bool | int = quality >= 0.5 if t.kind == "boolean" else \
        t.min_score + int(round(quality * (t.max_score - t.min_score)))
    return {"score": score, "reasoning": f"offline proxy for {t.name}: {why}"}
