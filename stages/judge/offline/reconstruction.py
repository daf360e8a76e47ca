"""Offline heuristic of the reconstruction judge: a claim's score is its overlap with the reconstruction.

For each claim, the key terms, numbers and names it holds are looked for in each answer and in
the synthesis; sources holding at least a third of the claim's terms become its evidence refs,
and the score is the share of the claim found across those sources (0-10), capped at 5 when a
number of the claim is missing (the spec's "wrong numbers": partial credit at most).
"""

from __future__ import annotations

from typing import Any

from stages.judge.offline import text as tx

EVIDENCE_SHARE = 1 / 3


def score_claims(req) -> dict[str, Any]:
    """Score every claim 0-10 by its overlap with the answers and the synthesis."""
    sources = [(a.id, a.answer) for a in req.answers]
    if req.synthesis:
        sources.append(("synthesis", req.synthesis))
    return {"evaluations": [_score(claim, sources) for claim in req.claims]}


def _score(claim, sources: list[tuple[str, str]]) -> dict[str, Any]:
    wanted = tx.term_set(claim.text)
    shares = sorted(((tx.overlap(wanted, tx.term_set(body)), ref) for ref, body in sources),
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
    share = len(found_terms) / len(wanted)
    claim_numbers = tx.numbers(claim.text)
    have_numbers = tx.numbers(text)
    missing_numbers = [n for n in claim_numbers if not any(tx.close(n, h, 0.001) for h in have_numbers)]
    names = [e for e in tx.entities(claim.text) if e.lower() not in text.lower()]
    score = round(10 * share)
    if missing_numbers:
        score = min(score, 5)
    if names:
        score = max(0, score - 1)
    missing_terms = sorted(wanted - have)[:4]
    why = f"{len(found_terms)} of {len(wanted)} key terms found in {', '.join(refs)}"
    if missing_numbers:
        why += "; number(s) " + ", ".join(f"{n:g}" for n in missing_numbers) + " missing"
    if missing_terms:
        why += "; missing: " + ", ".join(missing_terms)
    return {"claim_id": claim.id, "score": int(score), "justification": why + ".", "evidence_refs": refs}
