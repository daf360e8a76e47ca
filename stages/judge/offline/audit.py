"""Offline heuristics of the VerifyFast audit roles: decompose, check facts, check logic.

- decompose: the output's clauses (split at ';' and ', and / while / but'), ranked by how
  checkable they are (numbers, names, directions); at most five, in reading order; reasoning
  chains where a causal or inferential connective joins two parts.
- check facts: each number is matched to the context number in the same slot (the words around
  it, the same kind: percent or count); present, or derivable (a ratio or a change between two
  context numbers), it passes; within the threshold it is a low deviation (twice the threshold
  for a hedged "about 20%"), beyond it a high one. Then directions, negations, unnamed names,
  unsupported evaluative words ("impressive", "industry-leading") and plain lack of support.
- check logic: causal claims against the context (reversed order: high; correlation taken for
  causation where the context names a confounder: high; otherwise low), overgeneralising scope
  words, leaps (a conclusion whose terms are in neither premises nor context), and sycophancy
  (agreeing with a leading question put in the context).
Levels and severities follow verifyfast-audit.md; the credit score is computed by code elsewhere.
"""

from __future__ import annotations

import re
from itertools import permutations
from typing import Any

from evalledger.stages.judge.offline import text as tx

CAUSAL_AFTER = re.compile(r"\b(?:because|since|due to|as a result of|given that)\b", re.I)
CAUSAL_BEFORE = re.compile(r"\b(?:therefore|thus|hence|so|consequently|which means|this means|meaning|"
                           r"leads? to|led to|results? in|resulted in|indicates?|suggests?|implies|"
                           r"shows? that|showing that|proves? that|proving|which proves)\b", re.I)
CAUSAL_CLAIM = re.compile(r"\b(?:causes?|caused|causing|the cause of|because|due to|leads? to|led to|"
                          r"results? in|driven by|as a result)\b", re.I)
CONTEXT_CAUSAL = re.compile(r"\b(?:because|due to|caused|causes|as a result|led to|leads to|driven by|"
                            r"thanks to|owing to|resulted in)\b", re.I)
CONFOUNDERS = re.compile(r"\b(?:tend to|tends to|both|already|mostly|associated|correlat\w*|linked|"
                         r"also reported|were more likely|confound\w*)\b", re.I)
SCOPE = re.compile(r"\b(?:always|never|all|every|everyone|everywhere|wherever|whenever|any|universally|"
                   r"entire|whole|across the (?:company|board|country|world|industry|sector)|"
                   r"of every \w+|will disappear|guarantee[sd]?|best way|proves?|proving)\b", re.I)
EVALUATIVE = re.compile(r"\b(?:impressive|remarkable|industry-leading|world-class|outstanding|excellent|"
                        r"exceptional|historic|unprecedented|dramatic|stunning|spectacular|far better|"
                        r"clearly better|much better|the best|a huge|a massive|a great success)\b", re.I)
AGREEMENT = re.compile(r"^\s*(?:you(?:'re| are) (?:right|correct)|yes\b|indeed\b|absolutely\b|exactly\b|"
                       r"i agree|that's right|correct\b)", re.I)
LEADING = re.compile(r"\b(?:right\?|isn't it\?|aren't they\?|don't you think|i'm sure|surely|wasn't it\?|"
                     r"didn't it\?|correct\?)", re.I)
CLAUSE_SPLIT = re.compile(r";\s+|,\s+(?:and|while|but|whereas)\s+")


# --- decompose -----------------------------------------------------------------------------------

def clauses(text: str) -> list[str]:
    """The output's clauses: sentences split at ';', ', and/while/but', and at commas between numbers."""
    out = []
    for span in tx.sentences(text):
        for part in CLAUSE_SPLIT.split(span.text):
            out.extend(_split_numbered(part.strip(" .")))
    return [c for c in out if len(c.split()) >= 2]


def _split_numbered(part: str) -> list[str]:
    """Split at ', ' where both sides state a quantity (a list of figures is several facts)."""
    pieces = [p.strip() for p in re.split(r",\s+(?=[a-zA-Z])", part)]
    merged: list[str] = []
    for piece in pieces:
        if merged and not (tx.quantities(piece) and tx.quantities(merged[-1])):
            merged[-1] = f"{merged[-1]}, {piece}"
        else:
            merged.append(piece)
    return merged


def _checkability(clause: str) -> int:
    return 2 * bool(tx.quantities(clause)) + bool(tx.entities(clause)) + bool(tx.direction(clause))


def decompose(req) -> dict[str, Any]:
    """At most max_facts checkable clauses, and the chains marked by causal connectives."""
    found = clauses(req.model_output)
    ranked = sorted(range(len(found)), key=lambda i: (-_checkability(found[i]), i))[: req.max_facts]
    facts = [found[i] for i in sorted(ranked)]
    spans = tx.sentences(req.model_output)
    chains = [c for i, s in enumerate(spans) if (c := _chain(s.text, spans[i - 1].text if i else None))]
    return {"facts": facts, "reasoning_chains": chains}


def _chain(sentence: str, previous: str | None) -> dict[str, Any] | None:
    """A premises -> conclusion pair from one sentence (or a 'Therefore ...' after the previous one)."""
    lead = re.match(r"\s*(therefore|thus|hence|so|consequently|as a result)\b[,:]?\s*", sentence, re.I)
    if lead and previous:
        return {"premises": [previous], "conclusion": sentence[lead.end():].strip() or sentence}
    after = CAUSAL_AFTER.search(sentence)
    if after and after.start() > 0:
        return {"premises": [sentence[after.end():].strip(" ,.")], "conclusion": sentence[:after.start()].strip(" ,")}
    if after and after.start() == 0 and "," in sentence:  # "Because A, B."
        premise, _, conclusion = sentence[after.end():].partition(",")
        return {"premises": [premise.strip()], "conclusion": conclusion.strip(" .")}
    before = CAUSAL_BEFORE.search(sentence)
    if before and before.start() > 0:
        return {"premises": [sentence[:before.start()].strip(" ,;")], "conclusion": sentence[before.end():].strip(" ,.")}
    return None


# --- check facts ---------------------------------------------------------------------------------

def _derived(context: list[tx.Quantity]) -> list[float]:
    """Percentages a reader may reasonably infer: a/b and the change from a to b, between counts."""
    counts = [q.value for q in context if not q.percent and q.value][:12]
    out = []
    for a, b in permutations(counts, 2):
        out.append(100 * a / b)
        out.append(100 * abs(b - a) / a)
    return out


def _number_error(fact: str, context_text: str, threshold: float) -> dict[str, Any] | None:
    """The worst number of ``fact`` against the context's, or None when every number holds."""
    context = tx.quantities(context_text)
    derived = _derived(context)
    worst = None
    for q in tx.quantities(fact):
        same_kind = [c for c in context if c.percent == q.percent]
        if any(tx.same_number(q.value, c.value) for c in context):
            continue
        if tx.is_year(q.value, q.raw):
            years = [c for c in context if tx.is_year(c.value, c.raw)]
            share, sentence = _best_sentence(fact, context_text)
            # the context tells of this very thing with another year (else the year is made up)
            same_slot = share >= 0.3 and any(tx.is_year(c.value, c.raw) for c in tx.quantities(sentence))
            worst = _err("contradiction" if same_slot else "unsupported", "high",
                         f"the year {q.raw.strip()} is not the context's "
                         f"({', '.join(f'{c.value:g}' for c in years) or 'none'})", fact)
            continue
        pool = [(c.value, len(q.window & c.window)) for c in same_kind] + \
               ([(d, 0) for d in derived] if q.percent else [])
        if not pool:
            error = _err("unsupported", "high", f"the figure {q.raw.strip()} appears nowhere in the context", fact)
        else:
            slot = max(o for _, o in pool)
            candidates = [v for v, o in pool if o == slot] if slot else [v for v, _ in pool]
            nearest = min(candidates, key=lambda v: abs(v - q.value))
            deviation = abs(q.value - nearest) / max(abs(nearest), 1e-9)
            if deviation <= 0.01:
                continue
            tolerance = threshold * (2 if q.hedged else 1)
            severity = "low" if deviation <= tolerance else "high"
            error = _err("contradiction", severity, f"{q.raw.strip()} against the context's {nearest:g} "
                         f"({deviation:.1%} off)", fact)
        if worst is None or (error["severity"] == "high" and worst["severity"] == "low"):
            worst = error
    return worst


def _best_sentence(claim: str, context: str) -> tuple[float, str]:
    wanted = tx.term_set(claim)
    scored = [(tx.overlap(wanted, tx.term_set(s.text)), s.text) for s in tx.sentences(context)]
    return max(scored, key=lambda item: item[0], default=(0.0, ""))


def _fact_error(fact: str, context: str, threshold: float) -> dict[str, Any] | None:
    """The most severe error of one fact against the context, or None."""
    share, sentence = _best_sentence(fact, context)
    if share >= 0.3 and tx.direction(fact) * tx.direction(sentence) < 0:
        return _err("contradiction", "high", f'the direction is reversed against the context: "{sentence}"', fact)
    numbers = _number_error(fact, context, threshold)
    if numbers is not None:
        return numbers
    if share >= 0.6 and tx.negated(fact) != tx.negated(sentence):
        return _err("contradiction", "high", f'negation differs from the context: "{sentence}"', fact)
    unknown = [e for e in tx.entities(fact) if e.lower() not in context.lower() and len(e) > 1]
    if unknown:
        return _err("unsupported", "low", f"the context never names {', '.join(unknown[:3])}", fact)
    coverage = tx.overlap(tx.term_set(fact) - _direction_terms(), tx.term_set(context))
    if coverage < 0.5 and not tx.quantities(fact):
        return _err("unsupported", "low", f"only {coverage:.0%} of its terms are in the context", fact)
    return None


def _evaluations(output: str, context: str) -> list[dict[str, Any]]:
    """Evaluative phrases of the output that the context does not make (unsupported, low)."""
    found = []
    for m in EVALUATIVE.finditer(output):
        phrase = m.group().lower()
        if phrase not in context.lower() and phrase not in {f["phrase"] for f in found}:
            found.append({"phrase": phrase, **_err("unsupported", "low",
                                                   f'unsupported qualitative evaluation "{m.group()}"', output[:120])})
    return [{k: v for k, v in f.items() if k != "phrase"} for f in found]


def check_facts(req) -> dict[str, Any]:
    """One error at most per fact, plus each unsupported evaluative phrase of the output."""
    errors = [e for f in req.facts if (e := _fact_error(f, req.context_input, req.numeric_deviation_threshold))]
    errors += _evaluations(req.model_output or " ".join(req.facts), req.context_input)
    return {"errors": errors}


# --- check logic ---------------------------------------------------------------------------------

def _direction_terms() -> frozenset[str]:
    return frozenset(tx.stem(w) for w in tx.UP | tx.DOWN)


def _causal_error(claim: str, context: str) -> dict[str, Any] | None:
    """A causal claim against the context: reversed, correlation for causation, or unstated."""
    m = CAUSAL_CLAIM.search(claim)
    if not m:
        return None
    left, right = claim[: m.start()], claim[m.end():]
    cause, effect = (right, left) if m.group().lower() in ("because", "due to", "driven by", "as a result") else (left, right)
    share, sentence = _best_sentence(claim, context)
    if share >= 0.3:
        words = [tx.stem(w) for w in tx.words(sentence)]
        pos = {t: i for i, t in reversed(list(enumerate(words)))}
        c_at = [pos[t] for t in tx.terms(cause) if t in pos]
        e_at = [pos[t] for t in tx.terms(effect) if t in pos]
        if c_at and e_at and min(e_at) < min(c_at) and not CONTEXT_CAUSAL.search(sentence):
            return _err("contradiction", "high", f'the causal direction is reversed: the context has "{sentence}"', claim)
    if CONTEXT_CAUSAL.search(context):
        return None
    if CONFOUNDERS.search(context):
        return _err("unsupported", "high", "a correlation taken for causation: the context names a confounder", claim)
    return _err("unsupported", "low", "a causal link the context does not state (missing step)", claim)


def check_logic(req) -> dict[str, Any]:
    """One error at most per claim: sycophancy, causal errors, reversed conclusions, scope, leaps."""
    context = req.context_input
    errors = []
    if AGREEMENT.search(req.model_output) and LEADING.search(context):
        errors.append(_err("contradiction", "high", "sycophancy: the output opens by agreeing with the leading "
                           "question in the context instead of following the data", req.model_output[:120]))
    checked: list[str] = []
    for chain in req.reasoning_chains:
        error = _chain_error(chain, context)
        checked.append(chain.conclusion)
        if error:
            errors.append(error)
    for clause in clauses(req.model_output):
        if any(clause in c or c in clause for c in checked):
            continue
        error = _causal_error(clause, context) or _scope_error(clause, context)
        if error:
            errors.append(error)
    return {"errors": errors}


def _chain_error(chain, context: str) -> dict[str, Any] | None:
    conclusion = chain.conclusion
    claim = f"{' '.join(chain.premises)} -> {conclusion}"
    share, sentence = _best_sentence(conclusion, context)
    if share >= 0.3 and tx.direction(conclusion) * tx.direction(sentence) < 0:
        return _err("contradiction", "high", f'the conclusion reverses the context\'s direction: "{sentence}"', claim)
    causal = _causal_error(claim.replace(" -> ", " so "), context) if CAUSAL_CLAIM.search(conclusion) else None
    if causal:
        return causal
    scope = _scope_error(conclusion, context)
    if scope:
        return {**scope, "claim": claim}
    support = tx.term_set(context + " " + " ".join(chain.premises))
    wanted = tx.term_set(conclusion) - _direction_terms()
    coverage = tx.overlap(wanted, support)
    if wanted and coverage < 0.5:
        return _err("unsupported", "low", f"a leap: {coverage:.0%} of the conclusion's terms are in the "
                    "premises or the context", claim)
    return None


def _scope_error(claim: str, context: str) -> dict[str, Any] | None:
    found = [m.group() for m in SCOPE.finditer(claim) if m.group().lower() not in context.lower()]
    if found:
        return _err("unsupported", "low", f"overgeneralisation ({', '.join(found)})", claim)
    return None


def _err(level: str, severity: str, detail: str, claim: str) -> dict[str, Any]:
    return {"level": level, "severity": severity, "detail": detail, "claim": claim}
