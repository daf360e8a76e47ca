"""The audit stage (verifyfast-audit.md): decompose, check facts and logic, score credit by formula.

1. ``decompose``: at most ``audit.max_facts`` atomic facts and the reasoning chains -> ``facts.decomposed``.
2. ``check_facts`` and ``check_logic`` run concurrently -> ``facts.checked``, ``logic.checked``
   (errors with level contradiction or unsupported, severity high or low; reasonable inferences
   are not errors, so the judge does not report them).
3. ``credit.scored``: the deterministic formula of the spec with its parameters from the config,
   and the zone (BAD, MID, GOOD). The judge is never asked for a score.
"""

from __future__ import annotations

import asyncio

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


def _errors(reply) -> list[dict]:
    """A check's findings as payload dicts."""
    return [e.model_dump(mode="json", exclude_none=True) for e in reply.errors]


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
    fact_reply, logic_reply = await asyncio.gather(
        work.ask("check_facts", CheckFactsRequest(context_input=context, model_output=output, facts=facts,
                                                  numeric_deviation_threshold=strategy.numeric_deviation_threshold)),
        work.ask("check_logic", CheckLogicRequest(context_input=context, model_output=output,
                                                  reasoning_chains=chains)))
    fact_errors, logic_errors = _errors(fact_reply), _errors(logic_reply)
    work.emit("facts.checked", {"errors": fact_errors}, step="check_facts")
    work.emit("logic.checked", {"errors": logic_errors}, step="check_logic")
    every = fact_errors + logic_errors
    high = sum(1 for e in every if e["severity"] == "high")
    low = sum(1 for e in every if e["severity"] == "low")
    score = credit_score(high, low, strategy)
    expected = work.question.get("expected_credit_score")
    work.emit("credit.scored", {
        "high": high, "low": low, "credit_score": score, "zone": zone(score, strategy),
        "formula": strategy.model_dump(mode="json", exclude={"max_facts", "numeric_deviation_threshold",
                                                             "max_errors_per_phase"}),
        "expected_credit_score": expected,
        "expected_zone": zone(expected, strategy) if isinstance(expected, int) else None,
    }, step="credit")
