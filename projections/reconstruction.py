"""Reconstruction metrics exactly as spec/reconstruction-judge.md defines them: the per-document
``calculated_metrics`` and the cross-document ``AggregateStats``. The judge scored the claims;
this module does the arithmetic.

Bands: each claim counts in the band its ``claim.scored`` recorded, decided by the run's
``claim_bands`` (by default fully >= 8, partially 4-7, not < 4; an event without a recorded
band is banded by those defaults). The importance-weighted
average is sum(score * importance) / sum(importance); a claim without a numeric importance
weighs 1. Percentages are 100 * count / claims, rounded to 2 digits; averages to 4.
"""

from __future__ import annotations

import math
from typing import Any

from evalledger.projections.results import case_status
from evalledger.projections.stats import rnd

FULLY, PARTIALLY = 8, 4  # the default claim_bands, for events recorded before bands were


def band_of(claim: dict) -> str:
    """The claim's recorded band (fully, partially, not), else the default bands' verdict."""
    band = claim.get("band")
    if band in ("fully", "partially", "not"):
        return band
    score = claim["score"]
    return "fully" if score >= FULLY else "partially" if score >= PARTIALLY else "not"


DEFAULT_BANDS = {"fully_min": FULLY, "partially_min": PARTIALLY}


def bands_used(cases: list[dict]) -> list[dict[str, int]]:
    """The distinct claim_bands the scored claims of ``cases`` were banded by (sorted)."""
    seen = {(b["fully_min"], b["partially_min"])
            for case in cases for claim in case["claims"].values()
            for b in [claim.get("bands") if isinstance(claim.get("bands"), dict) else DEFAULT_BANDS]}
    return [{"fully_min": f, "partially_min": p} for f, p in sorted(seen)]


def band_labels(bands: list[dict[str, int]]) -> tuple[str, str, str]:
    """How the report names the fully, partially and not bands: their thresholds when one set of
    claim_bands decided every claim, else "by claim_bands" (each claim by the bands of its run)."""
    if len(bands) != 1:
        return ("by claim_bands",) * 3
    fully, partially = bands[0]["fully_min"], bands[0]["partially_min"]
    return f">= {fully}", f"{partially}-{fully - 1}", f"< {partially}"


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
                    "score": scored["score"], "band": band_of(scored),
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
        "fully_reconstructed": sum(1 for c in claims if c["band"] == "fully"),
        "partially_reconstructed": sum(1 for c in claims if c["band"] == "partially"),
        "not_reconstructed": sum(1 for c in claims if c["band"] == "not"),
        "by_type": _bucket_averages(claims, lambda c: str(c["claim_type"])),
        "by_importance": _bucket_averages(claims, lambda c: _importance_key(c["importance"])),
    }


def calculated_metrics(case: dict) -> dict[str, Any]:
    """The spec's per-document ``calculated_metrics`` for one reconstruction case."""
    return metrics_of(scored_claims(case))


def judge_models(case: dict) -> list[str]:
    """The judge models that scored the claims (``score_claims`` calls; sorted, usually one)."""
    from evalledger.projections.results import call_list
    return sorted({str(c["model"]) for c in call_list(case) if c["role"] == "score_claims" and c["model"]})


def document_report(case: dict, usage: dict[str, Any]) -> dict[str, Any]:
    """The spec's JudgeOutput for one document, plus its status and the claims left unscored.

    ``timestamp`` is when the claims were scored (the ``recorded_at`` of their events, so the same
    ledger gives the same bytes); ``metadata.model`` is the judge model, as the spec means it, and
    ``metadata.reconstruction_model`` the model whose reconstruction was judged.
    """
    claims = scored_claims(case)
    judges = judge_models(case)
    return {
        "doc_id": case["question"].get("doc_id") or case["question_id"],
        "timestamp": case.get("judged_at"),
        "case_id": case["case_id"], "benchmark": case["benchmark"], "status": case_status(case),
        "collection": collection_of(case),
        "claim_evaluations": claims, "calculated_metrics": metrics_of(claims),
        "unscored_claims": unscored_claims(case), "claim_bands": bands_used([case]),
        "metadata": {"model": ", ".join(judges) or None, "reconstruction_model": case["model"],
                     "total_tokens": usage["tokens"],
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
        "claim_bands": bands_used(cases),
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


DEFAULT_COLLECTION = "default"


def collection_of(case: dict) -> str:
    """The reconstruction collection a document belongs to: named in its file or by the folder
    it was ingested with, else the home's one default collection."""
    return case["question"].get("collection") or DEFAULT_COLLECTION


def collection_aggregates(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Per collection: its benchmarks and, per model, ``AggregateStats`` over every document in it
    (whatever file or benchmark each came from)."""
    from evalledger.projections.results import model_label
    groups: dict[str, list[dict]] = {}
    for case in cases:
        if case["kind"] == "reconstruction":
            groups.setdefault(collection_of(case), []).append(case)
    out = {}
    for name in sorted(groups):
        members = sorted(groups[name], key=lambda c: c["case_id"])
        by_model: dict[str, list[dict]] = {}
        for case in members:
            by_model.setdefault(model_label(case["model"]), []).append(case)
        out[name] = {"benchmarks": sorted({str(c["benchmark"]) for c in members}),
                     "models": {m: aggregate_stats(by_model[m]) for m in sorted(by_model)}}
    return out


def _pct_buckets(claims: list[dict], key) -> dict[str, dict[str, Any]]:
    buckets: dict[str, list[dict]] = {}
    for claim in claims:
        buckets.setdefault(key(claim), []).append(claim)
    return _sorted_keys({k: {"count": len(v), "average_score": rnd(math.fsum(c["score"] for c in v) / len(v)),
                             "pct_reconstructed": _pct(sum(1 for c in v if c["band"] == "fully"), len(v))}
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
