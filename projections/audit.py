"""VerifyFast zone metrics (spec/verifyfast-audit.md): the 3 x 3 zone confusion matrix (rows =
expected zone, columns = actual zone), zone accuracy, cross-band confusion rate, exact match and
within +-1, per tag and per model or profile, with the spec's target (cross-band < 5%).

Zones: one rule decides them, the stage's: ``credit.scored`` records the zone of the credit score
and of the expected score under the run's ``audit.zone_bad_max`` / ``audit.zone_mid_max``, and
the matrix counts those recorded zones. Only an event without them (or a case never scored) falls
back to the default bounds: BAD = credit score 1-2, MID = 3, GOOD = 4-5. Every rate is over the cases that have both
an expected score and a credit score (``compared``); cases with an expected score that never got
a credit score are counted in ``not_scored`` and listed, never dropped silently.
"""

from __future__ import annotations

import math
from typing import Any

from evalledger.projections.results import model_label
from evalledger.projections.stats import ratio, rnd

ZONES = ("BAD", "MID", "GOOD")
CROSS_BAND_TARGET = 0.05
# The share of a test set each expected zone should have (the spec's zone coverage requirements).
RECOMMENDED_COVERAGE = {"BAD": (0.30, 0.40), "MID": (0.15, 0.25), "GOOD": (0.35, 0.50)}


def zone_of(score: Any) -> str | None:
    """Under the default bounds: BAD for 1-2, MID for 3, GOOD for 4-5; None for anything else."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return None
    if 1 <= score <= 2:
        return "BAD"
    if score == 3:
        return "MID"
    if 4 <= score <= 5:
        return "GOOD"
    return None


def expected_score(case: dict) -> Any:
    """The case's expected credit score: from its question, else as credit.scored echoed it."""
    expected = case["question"].get("expected_credit_score")
    if expected is None and case["credit"]:
        expected = case["credit"].get("expected_credit_score")
    return expected


def group_key(case: dict) -> str:
    """The audit group of a case: its model, with its profile (or the one its config names)."""
    profile = case.get("profile") or (case.get("config") or {}).get("profile")
    model = model_label(case["model"])
    return f"{model} [{profile}]" if profile else model


def recorded_zones(case: dict) -> tuple[str | None, str | None]:
    """(expected zone, actual zone) as the case's credit.scored recorded them, else by default bounds."""
    credit = case["credit"] or {}
    expected, actual = expected_score(case), credit.get("credit_score")
    expected_zone = credit.get("expected_zone") if credit.get("expected_zone") in ZONES else zone_of(expected)
    actual_zone = credit.get("zone") if credit.get("zone") in ZONES else zone_of(actual)
    return expected_zone, actual_zone


def _pairs(cases: list[dict]) -> tuple[list[tuple[int, int, str, str, dict]], list[str]]:
    """(expected, actual, expected zone, actual zone, case) for compared cases; ids not scored."""
    pairs, not_scored = [], []
    for case in cases:
        expected = expected_score(case)
        if zone_of(expected) is None:
            continue
        credit = case["credit"]
        if credit is None or zone_of(credit["credit_score"]) is None:
            not_scored.append(case["case_id"])
            continue
        expected_zone, actual_zone = recorded_zones(case)
        pairs.append((expected, credit["credit_score"], expected_zone, actual_zone, case))
    return pairs, sorted(not_scored)


def zone_metrics(cases: list[dict]) -> dict[str, Any]:
    """The zone confusion matrix and its metrics over ``cases``."""
    pairs, not_scored = _pairs(cases)
    matrix = {row: {col: 0 for col in ZONES} for row in ZONES}
    for _, _, exp_zone, act_zone, _ in pairs:
        matrix[exp_zone][act_zone] += 1
    n = len(pairs)
    diagonal = sum(matrix[z][z] for z in ZONES)
    cross = matrix["BAD"]["GOOD"] + matrix["GOOD"]["BAD"]
    exact = sum(1 for e, a, *_ in pairs if e == a)
    within = sum(1 for e, a, *_ in pairs if abs(e - a) <= 1)
    cross_rate = ratio(cross, n)
    return {
        "compared": n, "not_scored": len(not_scored), "not_scored_cases": not_scored,
        "matrix": matrix,
        "zone_accuracy": rnd(ratio(diagonal, n)), "zone_matches": diagonal,
        "cross_band_confusion_rate": rnd(cross_rate), "cross_band": cross,
        "boundary_deviations": n - diagonal - cross,
        "exact_match_rate": rnd(ratio(exact, n)), "exact_matches": exact,
        "within_one_rate": rnd(ratio(within, n)), "within_one": within,
        "cross_band_target": CROSS_BAND_TARGET,
        "target_met": None if cross_rate is None else cross_rate < CROSS_BAND_TARGET,
        "cross_band_cases": sorted(c["case_id"] for _, _, ez, az, c in pairs
                                   if {ez, az} == {"BAD", "GOOD"}),
    }


def per_tag(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Per tag: compared, exact matches, zone accuracy, cross-band count, mean expected and actual."""
    pairs, _ = _pairs(cases)
    tags: dict[str, list] = {}
    for pair in pairs:
        tags.setdefault(str(pair[4]["question"].get("tag")), []).append(pair)
    out = {}
    for tag in sorted(tags):
        rows = tags[tag]
        out[tag] = {
            "compared": len(rows),
            "exact_matches": sum(1 for e, a, *_ in rows if e == a),
            "zone_accuracy": rnd(ratio(sum(1 for _, _, ez, az, _ in rows if ez == az), len(rows))),
            "cross_band": sum(1 for _, _, ez, az, _ in rows if {ez, az} == {"BAD", "GOOD"}),
            "mean_expected": rnd(math.fsum(e for e, *_ in rows) / len(rows)),
            "mean_actual": rnd(math.fsum(a for _, a, *_ in rows) / len(rows)),
        }
    return out


def zone_coverage(cases: list[dict]) -> dict[str, Any]:
    """How the test set's expected zones cover BAD, MID and GOOD against the recommended shares,
    with a warning naming each zone outside its range (over the cases with an expectation)."""
    zones = [z for z in (recorded_zones(c)[0] for c in cases) if z is not None]
    n = len(zones)
    out: dict[str, Any] = {"with_expectation": n}
    outside = []
    for zone in ZONES:
        low, high = RECOMMENDED_COVERAGE[zone]
        share = ratio(zones.count(zone), n)
        within = None if share is None else low - 1e-9 <= share <= high + 1e-9
        out[zone] = {"count": zones.count(zone), "share": rnd(share), "recommended": [low, high], "within": within}
        if within is False:
            outside.append(f"{zone} {share:.0%} (recommended {low:.0%}-{high:.0%})")
    out["warning"] = ("zone coverage outside the recommended proportions: " + ", ".join(outside)) if outside else None
    return out


def credit_histogram(cases: list[dict]) -> list[int]:
    """How many cases got credit score 1, 2, 3, 4, 5."""
    counts = [0] * 5
    for case in cases:
        score = (case["credit"] or {}).get("credit_score")
        if isinstance(score, int) and 1 <= score <= 5:
            counts[score - 1] += 1
    return counts


def audit_groups(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Zone metrics, per-tag metrics and the credit histogram per model (or model [profile])."""
    groups: dict[str, list[dict]] = {}
    for case in cases:
        groups.setdefault(group_key(case), []).append(case)
    return {key: {"cases": len(groups[key]), **zone_metrics(groups[key]), "per_tag": per_tag(groups[key]),
                  "credit_histogram": credit_histogram(groups[key]), "zone_coverage": zone_coverage(groups[key])}
            for key in sorted(groups)}
