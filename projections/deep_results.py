"""The deep-judgment result fields of a case, as the deep-judgment specs name them.

Template (``deep_judgment``): whether deep judgment was performed, the stages it completed, its
model calls (template-subject calls only: excerpts, risk, reasoning, parse; rubric calls are
counted apart), its excerpt retries and the attributes without excerpts. Rubric
(``deep_judgment_rubric``): per deep trait its ``trait_metadata``, the traits without valid
excerpts, and the totals. Both are computed from a case state (``projections.appliers``), so the
reports and ``evalledger history`` give the same figures.
"""

from __future__ import annotations

from typing import Any

from evalledger.projections.appliers import call_fields

TEMPLATE_DEEP_ROLES = ("extract_excerpts", "assess_risk", "reason", "parse")


def _calls(case: dict) -> list[dict[str, Any]]:
    return [call_fields(stored) for stored in case["calls"].values()]


def _retries(case: dict, subject: str) -> dict[str, int]:
    return {name: len(per) for name, per in (case["excerpt_retries"].get(subject) or {}).items()}


def template_deep_judgment(case: dict) -> dict[str, Any]:
    """The template's deep-judgment fields (``deep_judgment_performed`` false when it did not run)."""
    performed = bool((case["judged"] or {}).get("deep_judgment"))
    retries = _retries(case, "template")
    stages = []
    if performed:
        if case["excerpts"].get("template") or case["missing_excerpts"].get("template"):
            stages.append("excerpts")
        if case["risk"].get("template"):
            stages.append("hallucination_assessment")
        if case["reasoning"] is not None and not case["reasoning"].get("error"):
            stages.append("reasoning")
        if case["parsed"] is not None:
            stages.append("parameters")
    calls = [c for c in _calls(case)
             if c.get("subject") == "template" and c["role"] in TEMPLATE_DEEP_ROLES] if performed else []
    return {
        "deep_judgment_performed": performed,
        "deep_judgment_stages_completed": stages,
        "deep_judgment_model_calls": len(calls),
        "deep_judgment_excerpt_retry_count": sum(retries.values()),
        "attributes_without_excerpts": sorted(case["missing_excerpts"].get("template") or []),
    }


def _deep_traits(case: dict) -> list[str]:
    """The traits judged with deep judgment: scored in deep mode, or auto-failed for lack of excerpts."""
    scored = {name for name, t in case["traits"].items() if t.get("mode") == "deep"}
    return sorted(scored | set(case["traits_auto_failed"]))


def trait_metadata(case: dict, trait: str) -> dict[str, Any]:
    """One deep trait's metadata: stages completed, model calls (a risk call shared by several
    traits counts for each), excerpts, retries, validation."""
    excerpts = (case["excerpts"].get("rubric") or {}).get(trait)
    failed = trait in (case["missing_excerpts"].get("rubric") or []) or trait in case["traits_auto_failed"]
    scored = case["traits"].get(trait) or {}
    calls = [c for c in _calls(case) if c.get("subject") == "rubric" and trait in (c.get("targets") or [])]
    stages = []
    if excerpts or failed:
        stages.append("excerpt_extraction")
    if trait in (case["risk"].get("rubric") or {}):
        stages.append("hallucination_assessment")
    degraded = " ".join(scored.get("degraded") or [])
    if scored and "reasoning failed" not in degraded:
        stages.append("reasoning_generation")
    if scored:
        stages.append("score_extraction")
    return {"stages_completed": stages, "model_calls": len(calls), "had_excerpts": bool(excerpts),
            "excerpt_retry_count": _retries(case, "rubric").get(trait, 0), "excerpt_validation_failed": failed}


def rubric_deep_judgment(case: dict) -> dict[str, Any]:
    """The rubric's deep-judgment fields: per-trait metadata, traits without excerpts, totals."""
    traits = _deep_traits(case)
    metadata = {name: trait_metadata(case, name) for name in traits}
    return {
        "deep_judgment_rubric_performed": bool(traits),
        "trait_metadata": metadata,
        "traits_without_valid_excerpts": sorted(n for n, m in metadata.items() if m["excerpt_validation_failed"]),
        # distinct calls: one risk call may serve several traits
        "total_deep_judgment_model_calls": sum(1 for c in _calls(case) if c.get("subject") == "rubric"
                                               and set(c.get("targets") or []) & set(traits)),
        "total_traits_evaluated": len(traits),
        "total_excerpt_retries": sum(m["excerpt_retry_count"] for m in metadata.values()),
    }


def deep_judgment_results(case: dict) -> dict[str, Any]:
    """``{"deep_judgment": ..., "deep_judgment_rubric": ...}`` for a template case, else {}."""
    if case["kind"] != "template":
        return {}
    return {"deep_judgment": template_deep_judgment(case), "deep_judgment_rubric": rubric_deep_judgment(case)}
