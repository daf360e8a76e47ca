"""One case's full result (a line of ``evaluations.jsonl``): the template, reconstruction and audit
parts put together.

It sits above ``results``, ``audit`` and ``reconstruction`` (each of which may use ``results``),
so none of them imports another in a circle.
"""

from __future__ import annotations

from typing import Any

from evalledger.projections.audit import expected_score, recorded_zones
from evalledger.projections.deep_results import deep_judgment_results
from evalledger.projections.reconstruction import calculated_metrics, scored_claims, unscored_claims
from evalledger.projections.repeats import case_repeats
from evalledger.projections.results import (
    call_list,
    case_status,
    effective_verdict,
    excerpt_retry_count,
    excerpts_by_subject,
    is_abstained,
    is_auto_failed,
    original_verdict,
    override_of,
    retries_by_subject,
    rounded_cost,
    usage_of,
)


def case_result(case: dict) -> dict[str, Any]:
    """The full per-case result (one line of evaluations.jsonl), with no internal bookkeeping."""
    override = override_of(case)
    usage = usage_of(case)
    result: dict[str, Any] = {
        "case_id": case["case_id"], "benchmark": case["benchmark"], "kind": case["kind"],
        "question_id": case["question_id"], "model": case["model"], "status": case_status(case),
        "verdict": effective_verdict(case), "original_verdict": original_verdict(case),
        "override": {k: override[k] for k in ("verdict", "reason", "author")} if override else None,
        "auto_failed": is_auto_failed(case),
        "abstained": is_abstained(case),
        "abstention": _strip(case.get("abstention")),
        "auto_fail_reasons": sorted(set(case["auto_fail_reasons"])
                                    | set(case["judged"]["reasons"] if case["judged"] else [])),
        "fields": {name: _strip(f) for name, f in sorted(case["fields"].items())},
        "excerpts": excerpts_by_subject(case),
        "excerpt_retries": excerpt_retry_count(case),
        "excerpt_retry_count": retries_by_subject(case),
        "missing_excerpts": dict(sorted(case["missing_excerpts"].items())),
        "risk": {subject: {attr: _strip(r) for attr, r in sorted(per.items())}
                 for subject, per in sorted(case["risk"].items())},
        "reasoning": _strip(case["reasoning"]),
        "traits": {name: _strip(t) for name, t in sorted(case["traits"].items())},
        "traits_auto_failed": case["traits_auto_failed"],
        "failures": sorted((_strip(f) for f in case["failures"].values()),
                           key=lambda f: (str(f["stage"]), str(f["reason"]))),
        "judge": {**usage, "cost": rounded_cost(usage["cost"]),
                  "calls": [{k: c[k] for k in ("role", "backend", "model", "attempt", "tokens", "cost", "error")}
                            for c in call_list(case)]},
        "config_hashes": case["config_hashes"],
    }
    if case.get("profile"):
        result["profile"] = case["profile"]
    result.update(deep_judgment_results(case))
    repeats = case_repeats(case)
    if repeats is not None:   # judged K > 1 times; a case judged once keeps its bytes
        result["repeats"] = repeats
    if case["kind"] == "reconstruction":
        result["calculated_metrics"] = calculated_metrics(case)
        result["claims"] = scored_claims(case)
        result["unscored_claims"] = unscored_claims(case)
    if case["kind"] == "audit":
        credit = _strip(case["credit"])
        expected = expected_score(case)
        result["audit"] = {"tag": case["question"].get("tag"), "expected_credit_score": expected,
                           "expected_zone": recorded_zones(case)[0], "credit": credit,
                           "facts_errors": (case["facts_errors"] or {}).get("errors"),
                           "logic_errors": (case["logic_errors"] or {}).get("errors"),
                           **_phase_details(case)}
    return result


def _phase_details(case: dict) -> dict[str, Any]:
    """Per audit phase: the reasonable inferences (recorded, not counted), which errors counted
    (indexes into the phase's errors; null when every one did) and how many did not."""
    out: dict[str, Any] = {}
    for phase, slot in (("facts", "facts_errors"), ("logic", "logic_errors")):
        state = case[slot] or {}
        out[f"{phase}_inferences"] = state.get("inferences") or []
        out[f"{phase}_counted"] = state.get("counted")
        out[f"{phase}_not_counted"] = state.get("dropped") or 0
    return out


def _strip(value: dict | None) -> dict | None:
    """A state slot without its bookkeeping keys (stream version, event id)."""
    if value is None:
        return None
    return {k: v for k, v in value.items() if k not in ("v", "id")}
