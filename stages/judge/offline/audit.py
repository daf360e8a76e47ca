"""Offline heuristics of the VerifyFast audit roles: decompose, check facts, check logic.

Facts are the output's most checkable sentences (numbers, names, directions). A fact is checked
by comparing its numbers, negations, directions and names with the context sentence that shares
most of its terms; a reasoning chain by its conclusion's direction, absolute words and support.
Levels and severities follow verifyfast-audit.md; the credit score is computed elsewhere, by code.
"""

from __future__ import annotations

import re
from typing import Any

from stages.judge.offline import text as tx

CAUSAL_AFTER = re.compile(r"\b(?:because|since|due to|as a result of|given that)\b", re.I)
CAUSAL_BEFORE = re.compile(r"\b(?:therefore|thus|hence|so|consequently|which means|this means|"
                           r"leads? to|led to|results? in|resulted in|indicates?|suggests?|implies|"
                           r"shows? that|proves?)\b", re.I)
ABSOLUTES = frozenset("always never all every guarantee guarantees guaranteed certainly definitely "
                      "inevitably undoubtedly entirely completely impossible proves".split())
SYCOPHANCY = re.compile(r"\b(?:as you (?:said|suggested|noted|expected|mentioned)|you(?:'re| are) "
                        r"(?:right|correct)|i agree with you|great question)\b", re.I)


def _checkability(sentence: str) -> int:
    return 2 * bool(tx.numbers(sentence)) + bool(tx.entities(sentence)) + bool(tx.direction(sentence))


def decompose(req) -> dict[str, Any]:
    """At most max_facts checkable sentences, and the chains marked by causal connectives."""
    spans = tx.sentences(req.model_output)
    ranked = sorted(spans, key=lambda s: (-_checkability(s.text), s.start))[: min(5, req.max_facts)]
    facts = [s.text for s in sorted(ranked, key=lambda s: s.start)]
    chains = []
    for i, span in enumerate(spans):
        chain = _chain(span.text, spans[i - 1].text if i else None)
        if chain:
            chains.append(chain)
    return {"facts": facts, "reasoning_chains": chains}


def _chain(sentence: str, previous: str | None) -> dict[str, Any] | None:
    """A premises -> conclusion pair from one sentence (or a 'Therefore ...' after the previous one)."""
    lead = re.match(r"\s*(therefore|thus|hence|so|consequently|as a result)\b[,:]?\s*", sentence, re.I)
    if lead and previous:
        return {"premises": [previous], "conclusion": sentence[lead.end():].strip() or sentence}
    after = CAUSAL_AFTER.search(sentence)
    if after and after.start() > 0:
        return {"premises": [sentence[after.end():].strip(" ,.")], "conclusion": sentence[:after.start()].strip(" ,")}
    before = CAUSAL_BEFORE.search(sentence)
    if before and before.start() > 0:
        return {"premises": [sentence[:before.start()].strip(" ,;")], "conclusion": sentence[before.end():].strip(" ,.")}
    return None


def _best_sentence(claim: str, context: str) -> tuple[float, str]:
    wanted = tx.term_set(claim)
    scored = [(tx.overlap(wanted, tx.term_set(s.text)), s.text) for s in tx.sentences(context)]
    return max(scored, key=lambda item: item[0], default=(0.0, ""))


def _fact_error(fact: str, context: str, threshold: float) -> dict[str, Any] | None:
    """The most severe error of one fact against the context, or None."""
    share, sentence = _best_sentence(fact, context)
    context_numbers = tx.numbers(context)
    near_numbers = tx.numbers(sentence) or context_numbers
    for n in tx.numbers(fact):
        if any(tx.close(n, c, 0.005) for c in context_numbers):
            continue
        if not near_numbers:
            return _err("unsupported", "high", f"the figure {n:g} appears nowhere in the context", fact)
        nearest = min(near_numbers, key=lambda c: abs(c - n))
        deviation = abs(n - nearest) / max(abs(nearest), 1e-9)
        opposite = tx.direction(fact) * tx.direction(sentence) < 0
        if deviation <= threshold and not opposite:
            return _err("contradiction", "low", f"{n:g} deviates {deviation:.1%} from the context's {nearest:g}", fact)
        return _err("contradiction", "high", f"{n:g} against the context's {nearest:g} "
                    f"({deviation:.0%} off{', opposite direction' if opposite else ''})", fact)
    if share >= 0.3 and tx.direction(fact) * tx.direction(sentence) < 0:
        return _err("contradiction", "high", f'the direction is reversed against the context: "{sentence}"', fact)
    if share >= 0.6 and tx.negated(fact) != tx.negated(sentence):
        return _err("contradiction", "high", f'negation differs from the context: "{sentence}"', fact)
    unknown = [e for e in tx.entities(fact) if e.lower() not in context.lower()]
    if unknown:
        return _err("unsupported", "low", f"the context never names {', '.join(unknown[:3])}", fact)
    coverage = tx.overlap(tx.term_set(fact), tx.term_set(context))
    if coverage < 0.5:
        return _err("unsupported", "low", f"only {coverage:.0%} of its terms are in the context", fact)
    return None


def check_facts(req) -> dict[str, Any]:
    """One error at most per fact: numbers, directions, negations, names, then plain support."""
    errors = [e for f in req.facts if (e := _fact_error(f, req.context_input, req.numeric_deviation_threshold))]
    return {"errors": errors}


def check_logic(req) -> dict[str, Any]:
    """One error at most per chain: a reversed or sycophantic conclusion, an absolute claim, a leap."""
    errors = []
    sycophantic = bool(SYCOPHANCY.search(req.model_output))
    context_words = set(tx.words(req.context_input))
    for chain in req.reasoning_chains:
        conclusion = chain.conclusion
        claim = f"{' '.join(chain.premises)} -> {conclusion}"
        share, sentence = _best_sentence(conclusion, req.context_input)
        if share >= 0.3 and tx.direction(conclusion) * tx.direction(sentence) < 0:
            what = "sycophancy distorts the direction" if sycophantic else "the conclusion reverses the context's direction"
            errors.append(_err("contradiction", "high", f'{what}: "{sentence}"', claim))
            continue
        absolutes = sorted((set(tx.words(conclusion)) & ABSOLUTES) - context_words)
        if absolutes:
            errors.append(_err("unsupported", "low", f"overgeneralisation ({', '.join(absolutes)})", claim))
            continue
        support = tx.term_set(req.context_input + " " + " ".join(chain.premises))
        coverage = tx.overlap(tx.term_set(conclusion), support)
        if coverage < 0.5:
            errors.append(_err("unsupported", "low", f"a leap: {coverage:.0%} of the conclusion's terms are "
                               "in the premises or the context", claim))
    return {"errors": errors}


def _err(level: str, severity: str, detail: str, claim: str) -> dict[str, Any]:
    return {"level": level, "severity": severity, "detail": detail, "claim": claim}
