"""The audit stage (verifyfast-audit.md): decompose, check facts and logic, score credit by formula.

1. ``decompose``: at most ``audit.max_facts`` atomic facts and the reasoning chains -> ``facts.decomposed``.
2. ``check_facts`` and ``check_logic`` run concurrently -> ``facts.checked``, ``logic.checked``
   (``errors``: level contradiction or unsupported, severity high or low; ``inferences``: findings
   of level reasonable_inference, recorded and never counted). At most
   ``audit.max_errors_per_phase`` errors of a phase reach the score: high before low, then in the
   judge's order (``counted``: their indexes in ``errors``; ``dropped``: how many did not count).
3. ``credit.scored``: the deterministic formula of the spec with its parameters from the config,
   and the zone (BAD, MID, GOOD). The judge is never asked for a score.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from evalledger.stages.casework import CaseWork
from evalledger.stages.config import AuditStrategy
from evalledger.stages.judge.roles import CheckFactsRequest, CheckLogicRequest, DecomposeRequest

STAGE = "audit"


def credit_score(high: int, low: int, strategy: AuditStrategy) -> int:
    """High >= high_severe_min -> 1; high >= 1 -> 2; low >= low_boundary_min -> 3; low >= 1 -> 4; else 5."""
    if high >= strategy.high_severe_min:
        return 1
    if high >= 1:
        return 2
    if low >= strategy.low_boundary_min:
        return 3
    if low >= 1:
        return 4
    return 5


def zone(score: int, strategy: AuditStrategy) -> str:
    """BAD up to zone_bad_max (2), MID up to zone_mid_max (3), GOOD above."""
    if score <= strategy.zone_bad_max:
        return "BAD"
    return "MID" if score <= strategy.zone_mid_max else "GOOD"


def credit_fields(high: int, low: int, expected, strategy: AuditStrategy) -> dict:
    """The ``credit.scored`` payload from the counted high and low errors: the score by formula, its
    zone, the expected score's zone (the what-if recomputes recorded counts with this too)."""
    score = credit_score(high, low, strategy)
    return {
        "high": high, "low": low, "credit_score": score, "zone": zone(score, strategy),
        "formula": strategy.model_dump(mode="json", exclude={"max_facts", "numeric_deviation_threshold"}),
        "expected_credit_score": expected,
        "expected_zone": zone(expected, strategy) if isinstance(expected, int) else None,
    }


def phase_findings(reply, max_errors: int) -> dict:
    """A check's findings as the payload of its event: the errors, the reasonable inferences
    (never counted), and which errors count, at most ``max_errors``: high severity before low,
    then in the judge's order, so the same reply always keeps the same ones."""
    findings = [e.model_dump(mode="json", exclude_none=True) for e in reply.errors]
    errors = [f for f in findings if f["level"] != "reasonable_inference"]
    inferences = [f for f in findings if f["level"] == "reasonable_inference"]
    ranked = sorted(range(len(errors)), key=lambda i: (errors[i]["severity"] != "high", i))
    counted = sorted(ranked[:max_errors])
    return {"errors": errors, "inferences": inferences, "counted": counted,
            "dropped": len(errors) - len(counted), "max_errors_per_phase": max_errors}


def counted_errors(phase: dict) -> list[dict]:
    """The errors of a phase that reach the score."""
    return [phase["errors"][i] for i in phase["counted"]]


def _asking(role: str, request: Any) -> Callable[[CaseWork], Awaitable[Any]]:
    """The step asking the judge one ``role`` call on behalf of the case."""
    async def step(work: CaseWork) -> Any:
        return await work.ask(role, request)
    return step


async def judge_audit(work: CaseWork) -> None:
    """Run the three phases and the deterministic scoring for one audit case."""
    strategy = work.config.audit
    context, output = work.question.get("context_input", ""), str(work.response)
    decomposed = await work.ask("decompose", DecomposeRequest(context_input=context, model_output=output,
                                                               max_facts=strategy.max_facts))
    facts = list(decomposed.facts)[:strategy.max_facts]
    chains = list(decomposed.reasoning_chains)
    work.emit("facts.decomposed", {"facts": facts, "reasoning_chains": [c.model_dump(mode="json") for c in chains],
                                   "facts_offered": len(decomposed.facts)}, step="decompose")
    limit = strategy.max_errors_per_phase
    facts_request = CheckFactsRequest(context_input=context, model_output=output, facts=facts,
                                      numeric_deviation_threshold=strategy.numeric_deviation_threshold,
                                      max_errors=limit)
    logic_request = CheckLogicRequest(context_input=context, model_output=output, reasoning_chains=chains,
                                      max_errors=limit)
    # The two checks do not depend on each other: both calls go out at once (CaseWork.together).
    fact_reply, logic_reply = await work.together([_asking("check_facts", facts_request),
                                                   _asking("check_logic", logic_request)])
    fact_phase, logic_phase = phase_findings(fact_reply, limit), phase_findings(logic_reply, limit)
    work.emit("facts.checked", fact_phase, step="check_facts")
    work.emit("logic.checked", logic_phase, step="check_logic")
    every = counted_errors(fact_phase) + counted_errors(logic_phase)
    high = sum(1 for e in every if e["severity"] == "high")
    low = sum(1 for e in every if e["severity"] == "low")
    expected = work.question.get("expected_credit_score")
    work.emit("credit.scored", credit_fields(high, low, expected, strategy), step="credit")
