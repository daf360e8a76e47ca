"""Search-backed hallucination risk for the excerpts of one attribute or trait (optional step).

Each valid excerpt is searched (the search port records the call and degrades to no results on
failure); the judge rates each excerpt against its results ("none", "low", "medium", "high");
the attribute's risk is the maximum. The risk is informative: it never fails a case by itself.
"""

from __future__ import annotations

from evalledger.stages.casework import CaseWork
from evalledger.stages.judge.roles import AssessRiskRequest, ExcerptEvidence, SearchHit


async def assess_risk(work: CaseWork, attribute: str, description: str, excerpts: list[str], *,
                      stage: str, subject: str, tool: str) -> str:
    """Search each excerpt with ``tool``, ask the judge for per-excerpt risk, emit ``risk.assessed``; returns the max."""
    evidence, searched = [], []
    port = work.search_port(tool) if work.search_port is not None else None
    for text in excerpts:
        hits = await port.search(text, case_id=work.case_id) if port is not None else []
        hits = [SearchHit.model_validate(h) for h in hits or []]
        searched.append({"excerpt": text, "results": len(hits)})
        evidence.append(ExcerptEvidence(excerpt=text, results=hits))
    reply = await work.ask("assess_risk", AssessRiskRequest(attribute=attribute, description=description,
                                                             evidence=evidence), stage=stage)
    risk = reply.overall()
    work.emit("risk.assessed", {
        "attribute": attribute, "subject": subject, "risk": risk,
        "excerpts": [{"text": r.excerpt, "risk": r.risk, "justification": r.justification} for r in reply.risks],
        "searches": searched, "search_tool": tool,
    }, step="risk", part=attribute, stage=stage)
    return risk
