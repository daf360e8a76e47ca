"""Results per case and per benchmark x model: status, verdicts, rates, usage, per field and trait,
and the paired model comparison.

Every function takes case states (``projections.fold``) and returns JSON-ready values; callers
pass cases sorted by id and every sum runs in that order, so the numbers never depend on the
order in which cases finished.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from evalledger.projections.appliers import call_fields
from evalledger.projections.stats import (
    mcnemar_exact,
    paired_bootstrap_interval,
    ratio,
    rnd,
    seed_for,
    wilson_interval,
)

NUMERIC = (int, float)


# --- one case ----------------------------------------------------------------------------------------

def is_finished(case: dict) -> bool:
    """A case is finished when its kind's final event is in: case.judged (template), every original
    claim scored (reconstruction), credit.scored (audit)."""
    if case["judged"] is not None:
        return True
    if case["kind"] == "reconstruction":
        wanted = {c["id"] for c in case["question"].get("original_claims", [])}
        return bool(case["claims"]) and wanted <= set(case["claims"])
    if case["kind"] == "audit":
        return case["credit"] is not None
    return False


def case_status(case: dict) -> str:
    """judged (finished), failed (a stage gave up and it did not finish), or pending (not finished)."""
    if is_finished(case):
        return "judged"
    return "failed" if case["failures"] else "pending"


def original_verdict(case: dict) -> str | None:
    """The verdict the stages gave (case.judged), before any reviewer override."""
    return case["judged"]["verdict"] if case["judged"] else None


def override_of(case: dict) -> dict | None:
    """The reviewer override in force: the latest verdict.overridden in the case's stream, unless a
    reviewer confirmed the judge's verdict after it (verdict.confirmed), which puts that back."""
    if not case["overrides"]:
        return None
    latest = case["overrides"][-1]
    confirmed = case.get("confirmations") or []
    if confirmed and (confirmed[-1]["v"], confirmed[-1]["id"]) > (latest["v"], latest["id"]):
        return None
    return latest


def effective_verdict(case: dict) -> str | None:
    """The verdict reports count: the latest override when there is one, else the stages' verdict."""
    override = override_of(case)
    return override["verdict"] if override else original_verdict(case)


def is_auto_failed(case: dict) -> bool:
    """The case auto-failed for missing excerpts (an abstention never counts as one)."""
    return bool(case["auto_fail_reasons"]) or bool(case["judged"] and case["judged"]["auto_failed"])


def is_abstained(case: dict) -> bool:
    """The judge found the response refuses or evades (``abstention.detected``)."""
    return case.get("abstention") is not None


def call_list(case: dict) -> list[dict]:
    """The case's judge calls as dicts, sorted by (role, attempt, place, event id).

    The place (``order``) is recorded for calls a case made at once (a rubric's traits): they are
    recorded as they end, so without it their order would follow the server's timing.
    """
    calls = [{**call_fields(stored), "id": cid} for cid, stored in case["calls"].items()]
    return sorted(calls, key=lambda c: (str(c["role"]), c["attempt"] or 0, _place(c.get("order")), c["id"]))


def _place(order: Any) -> list[int]:
    """A recorded call's place among calls made at once ([] for a call made alone, or unreadable)."""
    return order if isinstance(order, list) and all(type(i) is int for i in order) else []


def usage_of(case: dict) -> dict[str, Any]:
    """Judge calls, retried attempts, errors, tokens and cost of one case (integer sums and an
    exactly rounded fsum: no order to fix)."""
    calls = [call_fields(stored) for stored in case["calls"].values()]
    return {
        "judge_calls": len(calls),
        "judge_retries": sum(1 for c in calls if (c["attempt"] or 1) > 1),
        "judge_errors": sum(1 for c in calls if c["error"]),
        "input_tokens": sum(c["input_tokens"] for c in calls),
        "output_tokens": sum(c["output_tokens"] for c in calls),
        "tokens": sum(c["tokens"] for c in calls),
        "cost": known_cost(c["cost"] for c in calls),
        "unpriced_calls": sum(1 for c in calls if c["cost"] is None),
    }


def known_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of costs in USD (an exactly rounded fsum), or None (unknown) when one is unknown."""
    costs = list(costs)
    return None if any(c is None for c in costs) else math.fsum(costs)


def rounded_cost(cost: float | None) -> float | None:
    """A cost as reports store it: 6 decimals, None kept (unknown is never written as 0)."""
    return None if cost is None else rnd(cost, 6)


def excerpt_retry_count(case: dict) -> int:
    """Every excerpt retry of the case, template fields and rubric traits together."""
    return sum(len(per) for attrs in case["excerpt_retries"].values() for per in attrs.values())


def retries_by_subject(case: dict) -> dict[str, dict[str, int]]:
    """Excerpt retries per subject (``template``, ``rubric``) and attribute or trait."""
    return {subject: {attr: len(per) for attr, per in sorted(attrs.items())}
            for subject, attrs in sorted(case["excerpt_retries"].items())}


def excerpts_by_subject(case: dict) -> dict[str, dict[str, list[dict]]]:
    """Valid excerpts per subject and attribute or trait, in attempt then text order."""
    return {subject: {attr: sorted(({k: e[k] for k in ("text", "similarity", "confidence", "attempt")}
                                    for e in per.values()), key=lambda e: (e["attempt"] or 0, str(e["text"])))
                      for attr, per in sorted(attrs.items())}
            for subject, attrs in sorted(case["excerpts"].items())}


# --- per benchmark x model -------------------------------------------------------------------------

NO_MODEL = "(no model)"


def model_label(model: Any) -> str:
    """How a case's model is named in reports (audit lines carry none)."""
    return NO_MODEL if model is None else str(model)


def group_label(case: dict) -> str:
    """A case's (or result's) group in reports: its model, with its profile as ``model [profile]``."""
    label = model_label(case["model"])
    profile = case.get("profile")
    return f"{label} [{profile}]" if profile else label


def group_cases(cases: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    """Cases by (benchmark, model [profile]), each list in case-id order, keys sorted."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for case in cases:
        groups.setdefault((str(case["benchmark"]), group_label(case)), []).append(case)
    return {key: sorted(groups[key], key=lambda c: c["case_id"]) for key in sorted(groups)}


def pass_rate(passed: int, cases: int, with_verdict: int) -> float | None:
    """The pass rate reports state: passed / all cases, rounded; None while no case has a verdict."""
    return rnd(ratio(passed, cases)) if with_verdict else None


def group_pass_rate(cases: list[dict]) -> float | None:
    """``group_summary``'s pass rate alone, without the usage sums (the what-if computes it per point)."""
    verdicts = [effective_verdict(c) for c in cases]
    return pass_rate(verdicts.count("pass"), len(cases), sum(1 for v in verdicts if v is not None))


def group_summary(cases: list[dict]) -> dict[str, Any]:
    """Counts, pass rate with its 95% Wilson interval, auto-fail rate, usage; failed cases stay in
    the denominator (pass rate = passed / all cases)."""
    n = len(cases)
    statuses = [case_status(c) for c in cases]
    verdicts = [effective_verdict(c) for c in cases]
    passed = verdicts.count("pass")
    with_verdict = sum(1 for v in verdicts if v is not None)
    auto_failed = sum(1 for c in cases if is_auto_failed(c))
    abstained = sum(1 for c in cases if is_abstained(c))
    usages = [usage_of(c) for c in cases]
    interval = wilson_interval(passed, n) if with_verdict else None
    return {
        "cases": n, "judged": statuses.count("judged"), "failed": statuses.count("failed"),
        "pending": statuses.count("pending"), "passed": passed, "failed_verdict": verdicts.count("fail"),
        "pass_rate": pass_rate(passed, n, with_verdict),
        "pass_rate_ci95": [rnd(interval[0]), rnd(interval[1])] if interval else None,
        "auto_failed": auto_failed, "auto_fail_rate": rnd(ratio(auto_failed, n)),
        "abstained": abstained, "abstention_rate": rnd(ratio(abstained, n)),
        "overridden": sum(1 for c in cases if override_of(c) is not None),   # a confirmed one is undone
        "excerpt_retries": sum(excerpt_retry_count(c) for c in cases),
        "judge_calls": sum(u["judge_calls"] for u in usages),
        "judge_retries": sum(u["judge_retries"] for u in usages),
        "judge_errors": sum(u["judge_errors"] for u in usages),
        "input_tokens": sum(u["input_tokens"] for u in usages),
        "output_tokens": sum(u["output_tokens"] for u in usages),
        "tokens": sum(u["tokens"] for u in usages),
        "cost": rounded_cost(known_cost(u["cost"] for u in usages)),
        "unpriced_calls": sum(u["unpriced_calls"] for u in usages),
    }


def per_field(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Per template field: verified, passed, failed, undecided (passed null) and the pass rate."""
    out: dict[str, dict[str, Any]] = {}
    for case in cases:
        for name, field in case["fields"].items():
            row = out.setdefault(name, {"verified": 0, "passed": 0, "failed": 0, "undecided": 0})
            row["verified"] += 1
            row[{True: "passed", False: "failed"}.get(field["passed"], "undecided")] += 1
    for row in out.values():
        row["pass_rate"] = rnd(ratio(row["passed"], row["passed"] + row["failed"]))
    return {k: out[k] for k in sorted(out)}


def per_trait(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Per rubric trait: scored, mean of numeric scores, share true of boolean scores, auto-failed."""
    scores: dict[str, list] = {}
    auto: dict[str, int] = {}
    for case in cases:
        for name, trait in case["traits"].items():
            scores.setdefault(name, []).append(trait["score"])
        for name in case["traits_auto_failed"]:
            auto[name] = auto.get(name, 0) + 1
            scores.setdefault(name, [])
    out = {}
    for name in sorted(scores):
        values = scores[name]
        booleans = [v for v in values if isinstance(v, bool)]
        numbers = [v for v in values if isinstance(v, NUMERIC) and not isinstance(v, bool)]
        out[name] = {"scored": len(values), "auto_failed": auto.get(name, 0),
                     "mean_score": rnd(math.fsum(numbers) / len(numbers)) if numbers else None,
                     "true_rate": rnd(ratio(sum(booleans), len(booleans))) if booleans else None}
    return out


# --- model comparison ------------------------------------------------------------------------------

def _outcomes(cases: list[dict]) -> dict[str, tuple[int, bool]]:
    """question_id -> (passed 0/1, finished) for one model; several cases of a question pass only
    if all pass."""
    out: dict[str, tuple[int, bool]] = {}
    for case in cases:
        passed = int(effective_verdict(case) == "pass")
        finished = case_status(case) == "judged"
        prev = out.get(case["question_id"])
        out[case["question_id"]] = (passed, finished) if prev is None else (prev[0] & passed, prev[1] and finished)
    return out


def compare_models(benchmark: str, by_model: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """For every pair of models (sorted) on the same questions: paired counts, the difference in
    pass rate (B - A), McNemar's exact p-value and a seeded 95% bootstrap interval.

    A case that did not finish counts as not passed, as in the pass rate; their pairs are counted
    in ``unfinished_pairs``.
    """
    models = sorted(m for m, cases in by_model.items() if any(effective_verdict(c) for c in cases)
                    or any(c["kind"] == "template" for c in cases))
    outcomes = {m: _outcomes(by_model[m]) for m in models}
    return compare_pairs(benchmark, models, lambda a, b: paired_counts(outcomes[a], outcomes[b]))


PairCounts = tuple[int, int, int, int, int]   # pairs, both pass, a only, b only, unfinished pairs


def paired_counts(a: dict[str, tuple[int, bool]], b: dict[str, tuple[int, bool]]) -> PairCounts | None:
    """Two models' outcomes (question_id -> (passed, finished)) counted over their shared
    questions; None when they share none."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    pa = [a[q] for q in shared]
    pb = [b[q] for q in shared]
    return (len(shared), sum(1 for x, y in zip(pa, pb) if x[0] and y[0]),
            sum(1 for x, y in zip(pa, pb) if x[0] and not y[0]), sum(1 for x, y in zip(pa, pb) if y[0] and not x[0]),
            sum(1 for x, y in zip(pa, pb) if not (x[1] and y[1])))


def compare_pairs(benchmark: str, models: list[str],
                  counts: Callable[[str, str], PairCounts | None]) -> list[dict[str, Any]]:
    """``compare_models``'s rows for ``models`` (sorted), from each pair's counts over their shared
    questions (``counts(a, b)``: a streamed report counts them in SQL, not from every case)."""
    rows = []
    for i, a in enumerate(models):
        for b_model in models[i + 1:]:
            paired = counts(a, b_model)
            if paired is None:
                continue
            n, both, a_only, b_only, unfinished = paired
            interval = paired_bootstrap_interval(a_only, b_only, n, seed_for(benchmark, a, b_model))
            rows.append({
                "model_a": a, "model_b": b_model, "pairs": n, "both_pass": both, "a_only": a_only,
                "b_only": b_only, "neither": n - both - a_only - b_only,
                "a_pass_rate": rnd((both + a_only) / n), "b_pass_rate": rnd((both + b_only) / n),
                "difference": rnd((b_only - a_only) / n),
                "difference_ci95": [rnd(interval[0]), rnd(interval[1])],
                "mcnemar_p": rnd(mcnemar_exact(a_only, b_only), 6),
                "unfinished_pairs": unfinished,
                "verdict": _comparison_sentence(a, b_model, a_only, b_only, mcnemar_exact(a_only, b_only)),
            })
    return rows


def _comparison_sentence(a: str, b: str, a_only: int, b_only: int, p: float) -> str:
    """A one-line reading of the test: which model is better, and whether the evidence holds at 5%."""
    if a_only == b_only:
        return f"no difference between {a} and {b} on these questions"
    better, worse = (b, a) if b_only > a_only else (a, b)
    strength = "significant at 5%" if p < 0.05 else "not significant at 5%"
    return f"{better} passes more than {worse} ({strength}, McNemar exact p = {rnd(p, 6)})"
