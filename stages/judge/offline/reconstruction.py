"""Offline heuristic of the reconstruction judge: a claim's score is its overlap with the reconstruction.

For each claim, the key terms, numbers and names it holds are looked for in each answer and in
the synthesis. Terms are weighted by how specific they are to the claim (1 / the square root of the number of claims
holding them), so the document's common words ("vaccine") count less than a claim's own
("patent"). Sources holding at least a third of the claim's weight become its evidence refs,
and the score is the weighted share of the claim found across those sources (0-10), capped at 5
when a number of the claim is missing (the spec's "wrong numbers": partial credit at most), at 3
when none of the words only this claim has is found ("vaguely related, missed the specific
claim"), and lowered by one when a name of the claim is missing.
"""

from __future__ import annotations

import math
from typing import Any

from evalledger.stages.judge.offline import text as tx

EVIDENCE_SHARE = 1 / 3


def score_claims(req) -> dict[str, Any]:
    """Score every claim 0-10 by its overlap with the answers and the synthesis."""
    sources = [(a.id, a.answer) for a in req.answers]
    if req.synthesis:
        sources.append(("synthesis", req.synthesis))
    weights = _weights([c.text for c in req.claims])
    return {"evaluations": [_score(claim, sources, weights) for claim in req.claims]}


def _weights(claims: list[str]) -> dict[str, float]:
    """1 / sqrt(number of claims holding the term): a term every claim shares ('vaccine') says little
    about which claim was reconstructed; a term only one claim has ('patent') says a lot."""
    counts: dict[str, int] = {}
    for text in claims:
        for term in tx.term_set(text):
            counts[term] = counts.get(term, 0) + 1
    return {term: 1.0 / math.sqrt(n) for term, n in counts.items()}


def _weighted(wanted: frozenset[str], have: frozenset[str], weights: dict[str, float]) -> float:
    total = sum(weights.get(t, 1.0) for t in wanted)
    return sum(weights.get(t, 1.0) for t in wanted & have) / total if total else 0.0


def _score(claim, sources: list[tuple[str, str]], weights: dict[str, float]) -> dict[str, Any]:
    wanted = tx.term_set(claim.text)
    shares = sorted(((_weighted(wanted, tx.term_set(body), weights), ref) for ref, body in sources),
                    key=lambda item: -item[0])
    refs = [ref for share, ref in shares if share >= EVIDENCE_SHARE]
    if not wanted or not refs:
        best = shares[0][0] if shares else 0.0
        return {"claim_id": claim.id, "score": 1 if best > 0 else 0, "evidence_refs": [],
                "justification": (f"At most {best:.0%} of the claim's key terms appear in any answer; "
                                  "not reconstructed." if best else "No answer mentions the claim's terms.")}
    text = " ".join(body for ref, body in sources if ref in refs)
    have = tx.term_set(text)
    found_terms = wanted & have
    share = _weighted(wanted, have, weights)
    claim_numbers = tx.numbers(claim.text)
    have_numbers = tx.numbers(text)
    missing_numbers = [n for n in claim_numbers if not any(tx.same_number(n, h) for h in have_numbers)]
    names = [e for e in tx.entities(claim.text) if e.lower() not in text.lower()]
    score = round(10 * share)
    if missing_numbers:
        score = min(score, 5)
    own = {t for t in wanted if weights.get(t, 1.0) == 1.0}
    if own and not own & have:
        score = min(score, 3)  # none of the words only this claim has: "vaguely related" (2-3)
    if names:
        score = max(0, score - 1)
    # Terms are matched as stems; the reader is shown the words the claim used ('modules', not 'modul').
    as_written = tx.term_words(claim.text)
    missing_terms = [as_written.get(t, t) for t in sorted(wanted - have)[:4]]
    why = (f"{len(found_terms)} of {len(wanted)} key {'term' if len(wanted) == 1 else 'terms'} "
           f"found in {', '.join(refs)}")
    if missing_numbers:
        why += ("; number " if len(missing_numbers) == 1 else "; numbers ") \
            + ", ".join(f"{n:g}" for n in missing_numbers) + " missing"
    if missing_terms:
        why += "; missing: " + ", ".join(missing_terms)
    return {"claim_id": claim.id, "score": int(score), "justification": why + ".", "evidence_refs": refs}
