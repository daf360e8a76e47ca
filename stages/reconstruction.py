"""The reconstruction stage (reconstruction-judge.md): the judge scores every original claim 0-10.

One ``score_claims`` call sees the original claims beside the reconstruction's answers and
synthesis. The port validates the reply against the request: a reply that misses a claim, scores
one twice, names an unknown claim, or gives a score that is not an integer in 0..10 is asked again
with the problem named. Each claim then gets ``claim.scored`` (claim id, score, justification,
evidence refs, and the claim's type and importance for the projections) and the band the
score falls in under the configured ``claim_bands`` (``band``: fully, partially or not; ``bands``:
the thresholds used), so the projections count what the run decided. Averages and weighted
averages are never asked of the judge: the projections compute them.
"""

from __future__ import annotations

from evalledger.stages.casework import CaseWork
from evalledger.stages.config import ClaimScoreBands
from evalledger.stages.judge.roles import Claim, ReconstructionAnswer, ScoreClaimsRequest

STAGE = "reconstruction"


def claims_request(work: CaseWork) -> ScoreClaimsRequest:
    """The judge's input: claims, answers, synthesis (the target document for reference only)."""
    question, response = work.question, work.response or {}
    answers = [ReconstructionAnswer(id=str(a.get("id", f"q{i + 1}")), question=a.get("question", ""),
                                    answer=a.get("answer", ""))
               for i, a in enumerate(response.get("answers", []))]
    return ScoreClaimsRequest(doc_id=question.get("doc_id", work.question_id),
                              claims=[Claim.model_validate(c) for c in question.get("original_claims", [])],
                              answers=answers, synthesis=response.get("synthesis", ""),
                              target_document=question.get("target_document"))


def claim_band(score: int, bands: ClaimScoreBands) -> str:
    """``fully`` (score >= fully_min), ``partially`` (>= partially_min) or ``not`` reconstructed."""
    if score >= bands.fully_min:
        return "fully"
    return "partially" if score >= bands.partially_min else "not"


def band_fields(score: int, bands: ClaimScoreBands) -> dict:
    """The band part of ``claim.scored``: the score's band and the thresholds that decided it."""
    return {"band": claim_band(score, bands), "bands": bands.model_dump(mode="json")}


async def judge_reconstruction(work: CaseWork) -> None:
    """Score the claims and emit one ``claim.scored`` per original claim, in the claims' order."""
    bands = work.config.claim_bands
    request = claims_request(work)
    reply = await work.ask("score_claims", request)
    by_id = {e.claim_id: e for e in reply.evaluations}
    for claim in request.claims:
        evaluation = by_id[claim.id]
        work.emit("claim.scored", {
            "claim_id": claim.id, "score": evaluation.score, "justification": evaluation.justification,
            "evidence_refs": list(evaluation.evidence_refs), "claim_text": claim.text,
            "claim_type": claim.type, "importance": claim.importance, "doc_id": request.doc_id,
            **band_fields(evaluation.score, bands),
        }, step="claim", part=claim.id)
