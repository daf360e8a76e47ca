"""Reconstruction metrics exactly as spec/reconstruction-judge.md defines them: the per-document
``calculated_metrics`` and the cross-document ``AggregateStats``. The judge scored the claims;
this module does the arithmetic.

Thresholds: fully reconstructed score >= 8, partially 4-7, not < 4. The importance-weighted
average is sum(score * importance) / sum(importance); a claim without a numeric importance
weighs 1. Percentages are 100 * count / claims, rounded to 2 digits; averages to 4.
"""

from __future__ import annotations

import math
from typing import Any

from evalledger.projections.results import case_status
from evalledger.projections.stats import rnd

FULLY, PARTIALLY = 8, 4


def scored_claims(case: dict) -> list[dict[str, Any]]:
    """The case's scored claims joined with their original text, type and importance, by claim id."""
    originals = {c["id"]: c for c in case["question"].get("original_claims", [])}
    out = []
    for claim_id in sorted(case["claims"]):
        scored = case["claims"][claim_id]
        original = originals.get(claim_id, {})
        out.append({"claim_id": claim_id, "claim_text": original.get("text") or scored.get("claim_text"),
                    "claim_type": original.get("type") or scored.get("claim_type") or "unknown",
                    "importance": original.get("importance", scored.get("importance")),
                    "score": scored["score"],
                    "justification": scored["justification"], "evidence_refs": scored["evidence_refs"]})
    return out


def unscored_claims(case: dict) -> list[str]:
    """Original claims the judge never scored (the case failed or is still pending)."""
    return sorted(c["id"] for c in case["question"].get("original_claims", []) if c["id"] not in case["claims"])


def _weight(importance: Any) -> float:
    return float(importance) if isinstance(importance, (int, float)) and not isinstance(importance, bool) else 1.0


def _importance_key(importance: Any) -> str:
    """by_importance keys as JSON object keys: "3" for 3 and 3.0, "unknown" when missing."""
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        return "unknown"
    return str(int(importance)) if float(importance).is_integer() else str(importance)


def _sorted_keys(table: dict[str, Any]) -> dict[str, Any]:
    """Numeric keys in numeric order, then the rest alphabetically."""
    def order(key: str):
        try:
            return (0, float(key), key)
        except ValueError:
            return (1, 0.0, key)
    return {k: table[k] for k in sorted(table, key=order)}


def _bucket_averages(claims: list[dict], key) -> dict[str, dict[str, Any]]:
    buckets: dict[str, list[float]] = {}
    for claim in claims:
        buckets.setdefault(key(claim), []).append(claim["score"])
    return _sorted_keys({k: {"count": len(v), "average_score": rnd(math.fsum(v) / len(v))}
                         for k, v in buckets.items()})


def metrics_of(claims: list[dict]) -> dict[str, Any]:
    """``calculated_metrics`` of a list of scored claims (spec keys, nothing else)."""
    scores = [c["score"] for c in claims]
    weights = [_weight(c["importance"]) for c in claims]
    weight_total = math.fsum(weights)
    return {
        "total_claims": len(claims),
        "average_score": rnd(math.fsum(scores) / len(scores)) if scores else None,
        "weighted_average_score": rnd(math.fsum(s * w for s, w in zip(scores, weights)) / weight_total)
        if weight_total else None,
        "fully_reconstructed": sum(1 for s in scores if s >= FULLY),
        "partially_reconstructed": sum(1 for s in scores if PARTIALLY <= s < FULLY),
        "not_reconstructed": sum(1 for s in scores if s < PARTIALLY),
        "by_type": _bucket_averages(claims, lambda c: str(c["claim_type"])),
        "by_importance": _bucket_averages(claims, lambda c: _importance_key(c["importance"])),
    }


def calculated_metrics(case: dict) -> dict[str, Any]:
    """The spec's per-document ``calculated_metrics`` for one reconstruction case."""
    return metrics_of(scored_claims(case))


def document_report(case: dict, usage: dict[str, Any]) -> dict[str, Any]:
    """The spec's JudgeOutput for one document, plus its status and the claims left unscored."""
    claims = scored_claims(case)
    return {
        "doc_id": case["question"].get("doc_id") or case["question_id"],
        "case_id": case["case_id"], "benchmark": case["benchmark"], "status": case_status(case),
        "claim_evaluations": claims, "calculated_metrics": metrics_of(claims),
        "unscored_claims": unscored_claims(case),
        "metadata": {"model": case["model"], "total_tokens": usage["tokens"],
                     "cost_usd": None if usage["cost"] is None else rnd(usage["cost"], 6)},
    }


def _pct(count: int, total: int) -> float | None:
    return rnd(100.0 * count / total, 2) if total else None


def aggregate_stats(cases: list[dict]) -> dict[str, Any]:
    """The spec's ``AggregateStats`` across the documents (cases) given, pooled over all claims.

    Documents that did not finish are listed in ``by_document`` with the claims they have; none
    is dropped.
    """
    all_claims: list[dict] = []
    by_document = []
    for case in sorted(cases, key=lambda c: (str(c["question_id"]), c["case_id"])):
        claims = scored_claims(case)
        all_claims.extend(claims)
        scores = [c["score"] for c in claims]
        by_document.append({"doc_id": case["question"].get("doc_id") or case["question_id"],
                            "claim_count": len(claims),
                            "average_score": rnd(math.fsum(scores) / len(scores)) if scores else None})
    metrics = metrics_of(all_claims)
    total = len(all_claims)
    return {
        "total_documents": len(by_document),
        "total_claims": total,
        "overall": {
            "average_score": metrics["average_score"],
            "weighted_average_score": metrics["weighted_average_score"],
            "pct_fully_reconstructed": _pct(metrics["fully_reconstructed"], total),
            "pct_partially_reconstructed": _pct(metrics["partially_reconstructed"], total),
            "pct_not_reconstructed": _pct(metrics["not_reconstructed"], total),
        },
        "by_claim_type": _pct_buckets(all_claims, lambda c: str(c["claim_type"])),
        "by_importance": _pct_buckets(all_claims, lambda c: _importance_key(c["importance"])),
        "by_document": by_document,
    }


def _pct_buckets(claims: list[dict], key) -> dict[str, dict[str, Any]]:
    buckets: dict[str, list[float]] = {}
    for claim in claims:
        buckets.setdefault(key(claim), []).append(claim["score"])
    return _sorted_keys({k: {"count": len(v), "average_score": rnd(math.fsum(v) / len(v)),
                             "pct_reconstructed": _pct(sum(1 for s in v if s >= FULLY), len(v))}
                         for k, v in buckets.items()})


def score_histogram(cases: list[dict]) -> list[int]:
    """How many claims scored 0, 1, ... 10 (for the report's histogram)."""
    counts = [0] * 11
    for case in cases:
        for scored in case["claims"].values():
            score = scored["score"]
            if isinstance(score, int) and 0 <= score <= 10:
                counts[score] += 1
    return counts
