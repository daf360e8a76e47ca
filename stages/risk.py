"""Search-backed hallucination risk for the excerpts of one subject of a case (optional step).

For every valid excerpt a search query is generated from the excerpt (``search_query``: its
content words, without filler) and searched (every excerpt's search at once, their results
kept in excerpt order); the search port records the call and degrades to
no results on failure. Excerpts whose search failed or found nothing get no risk, with the
reason recorded: there is nothing to judge them against. The others go to the judge in **one**
``assess_risk`` call for the subject (the template's fields together; the rubric's searching
traits together), which rates each excerpt none/low/medium/high; an attribute's risk is the maximum over its
assessed excerpts, and null when none was assessed. The risk is informative: it never fails a
case by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Awaitable, Callable

from evalledger.stages.casework import CaseWork
from evalledger.stages.judge.roles import RISK_ORDER, AssessRiskRequest, ExcerptEvidence, SearchHit

# Words that carry no search value; a query keeps the excerpt's other words, in order.
FILLER = frozenset("""a an the and or but of in on at to for from by with as is are was were be been being
this that these those it its it's i we you they he she them his her their our your my me us
has have had do does did so such than then there here which who whom whose what when where why how
can could should would may might must will shall not no also very just about into over under""".split())
MAX_QUERY_WORDS = 12


@dataclass(frozen=True)
class RiskItem:
    """The valid excerpts of one attribute (template field or rubric trait) to assess."""

    attribute: str
    description: str
    excerpts: list[str]


def search_query(excerpt: str) -> str:
    """The search query generated from an excerpt: its content words in order (at most 12),
    numbers and names kept, filler words and punctuation dropped; the excerpt itself when
    nothing else is left."""
    words = re.findall(r"[\w][\w.,%$'-]*[\w%]|[\w]", excerpt)
    kept = [w for w in words if w.lower() not in FILLER]
    return " ".join(kept[:MAX_QUERY_WORDS]) or excerpt.strip()


async def _search(port, query: str, case_id: str, place: dict[str, list[int]] | None = None
                  ) -> tuple[list[SearchHit], str | None]:
    """The hits for ``query`` and why the search failed (None when it did not); ``place``: the
    search's place among those made at once (``CaseWork.place``), recorded with it."""
    if port is None:
        return [], "no search port"
    lookup = getattr(port, "lookup", None)
    if lookup is not None:
        hits, error = await (lookup(query, case_id=case_id, meta=place) if place else lookup(query, case_id=case_id))
    else:  # a custom port with search() only
        hits, error = await port.search(query, case_id=case_id), None
    return [SearchHit.model_validate(h) for h in hits or []], error


def _search_step(port, query: str) -> Callable[[CaseWork], Awaitable[tuple[list[SearchHit], str | None]]]:
    """The step searching one excerpt's query on behalf of a case."""
    async def step(work: CaseWork) -> tuple[list[SearchHit], str | None]:
        return await _search(port, query, work.case_id, work.place())
    return step


async def assess_risks(work: CaseWork, items: list[RiskItem], *, stage: str, subject: str,
                       tool: str) -> dict[str, str | None]:
    """Search every excerpt of ``items``, ask the judge once for the searched ones, emit one
    ``risk.assessed`` per attribute; returns each attribute's risk (None when not assessed)."""
    port = work.search_port(tool) if work.search_port is not None else None
    searched: dict[str, list[dict]] = {}
    evidence: list[ExcerptEvidence] = []
    queries = [(item, text, search_query(text)) for item in items for text in item.excerpts]
    # The searches do not depend on each other: they go out at once, their results kept in order.
    found = await work.together([_search_step(port, query) for _, _, query in queries])
    for (item, text, query), (hits, error) in zip(queries, found):
        reason = (f"search failed: {error}" if error else "search found nothing") if not hits else None
        searched.setdefault(item.attribute, []).append(
            {"excerpt": text, "query": query, "results": len(hits), "error": error, "reason": reason})
        if hits:
            evidence.append(ExcerptEvidence(excerpt=text, results=hits, attribute=item.attribute, query=query))
    rated: dict[str, list[dict]] = {}
    if evidence:
        single = items[0] if len(items) == 1 else None
        reply = await work.ask("assess_risk", AssessRiskRequest(
            attribute=single.attribute if single else "", description=single.description if single else "",
            evidence=evidence, subject=subject), stage=stage)
        for sent, answer in zip(evidence, reply.risks, strict=True):  # the registry checks one risk each
            rated.setdefault(sent.attribute, []).append(
                {"text": sent.excerpt, "risk": answer.risk, "justification": answer.justification})
    risks: dict[str, str | None] = {}
    for item in items:
        assessed = rated.get(item.attribute, [])
        risk = max((r["risk"] for r in assessed), key=RISK_ORDER.index) if assessed else None
        risks[item.attribute] = risk
        work.emit("risk.assessed", {
            "attribute": item.attribute, "subject": subject, "risk": risk, "excerpts": assessed,
            "searches": searched.get(item.attribute, []), "search_tool": tool,
            "reason": None if assessed else "no risk assessed: every search of its excerpts failed or found nothing",
        }, step="risk", part=item.attribute, stage=stage)
    return risks
