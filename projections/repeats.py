"""Repeated judging in the reports: per case the repeats' pass rate, flips and score spread; per
benchmark and model the share of unstable cases, Fleiss' kappa across repeats and the spread of
rubric trait scores and claim scores (formulas: docs/reports.md, "Repeated judging").

Everything is read from the folded ``repeat.judged`` and ``case.repeated`` events (the case
state's ``repeats``); a case judged once has none, and nothing here shows for it.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any

from evalledger.projections.agreement_stats import category_counts, fleiss_kappa
from evalledger.projections.stats import ratio, rnd

VERDICTS = ("pass", "fail")


def _number(value: Any) -> Fraction | None:
    """A score as an exact number (a boolean trait counts 1 or 0); None when there is none."""
    if isinstance(value, bool):
        return Fraction(int(value))
    if isinstance(value, (int, float)) and math.isfinite(value):
        return Fraction(value)
    return None


def spread(values: list[Any]) -> dict[str, Any] | None:
    """The spread of one score across repeats: population standard deviation and range (max - min).

    sd = sqrt(Σ (x - mean)² / n) over the n repeats that gave a score; None when none did.
    """
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    if not numbers:
        return None
    mean = sum(numbers, Fraction(0)) / len(numbers)
    variance = sum(((x - mean) ** 2 for x in numbers), Fraction(0)) / len(numbers)
    return {"n": len(numbers), "mean": rnd(mean), "sd": rnd(math.sqrt(variance)),
            "range": rnd(max(numbers) - min(numbers))}


def _runs(case: dict) -> list[dict]:
    """The case's repeats in repeat order."""
    runs = (case.get("repeats") or {}).get("runs") or {}
    return [runs[k] for k in sorted(runs, key=int)]


def _scores(runs: list[dict], slot: str) -> dict[str, list[Any]]:
    """Per trait (or claim), its score in each repeat (None where a repeat gave none)."""
    names = sorted({name for run in runs for name in (run.get(slot) or {})})
    return {name: [(run.get(slot) or {}).get(name) for run in runs] for name in names}


def case_repeats(case: dict) -> dict[str, Any] | None:
    """A case's repeats for ``evaluations.jsonl``: verdicts, pass rate, flips, unstable, score spreads.

    None for a case judged once. ``unstable``: the repeats' verdicts did not all agree.
    """
    runs = _runs(case)
    if not runs:
        return None
    decision = (case["repeats"].get("decision") or {})
    verdicts = [run.get("verdict") for run in runs]
    out: dict[str, Any] = {"repeats": len(runs), "rule": decision.get("rule"), "tie": decision.get("tie"),
                           "seeds": [(run.get("sampling") or {}).get("seed") for run in runs],
                           "verdicts": verdicts, "verdict": decision.get("verdict")}
    if all(v in VERDICTS for v in verdicts):
        passed = verdicts.count("pass")
        out.update(passed=passed, pass_rate=rnd(ratio(passed, len(verdicts))),
                   flips=sum(1 for a, b in zip(verdicts, verdicts[1:]) if a != b),
                   unstable=len(set(verdicts)) > 1)
    traits, claims = _scores(runs, "traits"), _scores(runs, "claims")
    if traits:
        out["trait_scores"] = {name: {"scores": s, **(spread(s) or {})} for name, s in traits.items()}
    if claims:
        out["claim_scores"] = {name: {"scores": s, **(spread(s) or {})} for name, s in claims.items()}
    credits = [run.get("credit_score") for run in runs]
    if any(c is not None for c in credits):
        out["credit_scores"] = {"scores": credits, **(spread(credits) or {})}
    return out


def _kappa_set(per_case: list[tuple[str, dict]]) -> tuple[int | None, list[list[str]]]:
    """The repeat count Fleiss' kappa is computed at (the most common; the larger on a tie) and the
    verdict lists of the cases judged that many times (Fleiss needs the same raters per subject)."""
    counts = Counter(r["repeats"] for _, r in per_case)
    if not counts:
        return None, []
    k = max(counts, key=lambda n: (counts[n], n))
    return k, [r["verdicts"] for _, r in per_case if r["repeats"] == k]


def _spread_summary(per_case: list[tuple[str, dict]], slot: str) -> dict[str, Any]:
    """Per trait (``trait_scores``) or over all claims (``claim_scores``): mean sd and largest range."""
    groups: dict[str, list[dict]] = {}
    for _, r in per_case:
        for name, s in (r.get(slot) or {}).items():
            if "sd" in s:
                groups.setdefault(name if slot == "trait_scores" else "claims", []).append(s)
    out = {}
    for name, items in sorted(groups.items()):
        sds = [Fraction(s["sd"]) for s in items]
        out[name] = {"scored": len(items), "mean_sd": rnd(sum(sds, Fraction(0)) / len(sds)),
                     "max_range": max(s["range"] for s in items),
                     "varying": sum(1 for s in items if s["range"] > 0)}
    return out


def group_repeats(cases: list[dict]) -> dict[str, Any] | None:
    """One benchmark x model's repeats: unstable share, Fleiss' kappa, trait and claim score spread.

    None when no case of the group was judged more than once.
    """
    per_case = [(c["case_id"], r) for c in sorted(cases, key=lambda c: c["case_id"])
                if (r := case_repeats(c)) is not None]
    if not per_case:
        return None
    questions = {c["case_id"]: c["question_id"] for c in cases}
    voted = [(cid, r) for cid, r in per_case if "unstable" in r]
    unstable = [cid for cid, r in voted if r["unstable"]]
    k, verdict_lists = _kappa_set(voted)
    kappa = fleiss_kappa(category_counts(verdict_lists, VERDICTS)) if verdict_lists else None
    out: dict[str, Any] = {
        "cases": len(per_case), "repeat_counts": sorted({r["repeats"] for _, r in per_case}),
        "rules": sorted({str(r["rule"]) for _, r in voted}),   # no rule decides scores alone
        "with_verdicts": len(voted), "unstable": len(unstable),
        "unstable_share": rnd(ratio(len(unstable), len(voted))),
        "unstable_cases": [{"case_id": cid, "question_id": questions[cid], "verdicts": r["verdicts"],
                            "pass_rate": r["pass_rate"], "flips": r["flips"], "verdict": r["verdict"]}
                           for cid, r in voted if r["unstable"]],
        "fleiss_kappa": rnd(kappa), "kappa_repeats": k if verdict_lists else None,
        "kappa_cases": len(verdict_lists),
    }
    traits = _spread_summary(per_case, "trait_scores")
    if traits:
        out["trait_spread"] = traits
    claims = _spread_summary(per_case, "claim_scores")
    if claims:
        out["claim_spread"] = claims["claims"]
    return out

