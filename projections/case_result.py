"""One case's full result (a line of ``evaluations.jsonl``): the template, reconstruction and audit
parts put together.

It sits above ``results``, ``audit`` and ``reconstruction`` (each of which may use ``results``),
so none of them imports another in a circle.
"""

from __future__ import annotations

from typing import Any

from evalledger.projections.audit import expected_score, zone_of
from evalledger.projections.reconstruction import calculated_metrics, scored_claims, unscored_claims
from evalledger.projections.results import (
    call_list,
    case_status,
    effective_verdict,
    excerpt_retry_count,
    is_auto_failed,
    original_verdict,
    override_of,
    usage_of,
)
from evalledger.projections.stats import rnd


def case_result(case: dict) -> dict[str, Any]:
    """The full per-case result (one line of evaluations.jsonl), with no internal bookkeeping."""
    override = override_of(case)
    usage = usage_of(case)
    excerpts = {attr: sorted(({k: e[k] for k in ("text", "similarity", "confidence", "attempt")}
                              for e in per.values()), key=lambda e: (e["attempt"] or 0, str(e["text"])))
                for attr, per in sorted(case["excerpts"].items())}
    result: dict[str, Any] = {
        "case_id": case["case_id"], "benchmark": case["benchmark"], "kind": case["kind"],
        "question_id": case["question_id"], "model": case["model"], "status": case_status(case),
        "verdict": effective_verdict(case), "original_verdict": original_verdict(case),
        "override": {k: override[k] for k in ("verdict", "reason", "author")} if override else None,
        "auto_failed": is_auto_failed(case),
        "auto_fail_reasons": sorted(set(case["auto_fail_reasons"])
                                    | set(case["judged"]["reasons"] if case["judged"] else [])),
        "fields": {name: _strip(f) for name, f in sorted(case["fields"].items())},
        "excerpts": excerpts,
        "excerpt_retries": excerpt_retry_count(case),
        "missing_excerpts": case["missing_excerpts"],
        "risk": {attr: _strip(r) for attr, r in sorted(case["risk"].items())},
        "reasoning": _strip(case["reasoning"]),
        "traits": {name: _strip(t) for name, t in sorted(case["traits"].items())},
        "traits_auto_failed": case["traits_auto_failed"],
        "failures": sorted((_strip(f) for f in case["failures"].values()),
                           key=lambda f: (str(f["stage"]), str(f["reason"]))),
        "judge": {**usage, "cost": rnd(usage["cost"], 6),
                  "calls": [{k: c[k] for k in ("role", "backend", "model", "attempt", "tokens", "cost", "error")}
                            for c in call_list(case)]},
        "config_hashes": case["config_hashes"],
    }
    if case["kind"] == "reconstruction":
        result["calculated_metrics"] = calculated_metrics(case)
        result["claims"] = scored_claims(case)
        result["unscored_claims"] = unscored_claims(case)
    if case["kind"] == "audit":
        credit = _strip(case["credit"])
        expected = expected_score(case)
        result["audit"] = {"tag": case["question"].get("tag"), "expected_credit_score": expected,
                           "expected_zone": zone_of(expected), "credit": credit,
                           "facts_errors": (case["facts_errors"] or {}).get("errors"),
                           "logic_errors": (case["logic_errors"] or {}).get("errors")}
    return result


def _strip(value: dict | None) -> dict | None:
    """A state slot without its bookkeeping keys (stream version, event id)."""
    if value is None:
        return None
    return {k: v for k, v in value.items() if k not in ("v", "id")}

