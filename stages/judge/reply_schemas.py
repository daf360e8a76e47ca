"""Strict per-request reply schemas: what a judge may answer for one request, and nothing else.

Each role's schema is built from its request, so a grammar-constrained model (OpenAI strict
mode, vLLM's xgrammar, llama.cpp's grammars) can only produce a reply that passes the role's
reply checks: one required property per attribute, a score inside the trait's range, every claim
keyed by its id, one risk per excerpt (in the order given, whatever attributes or traits the
excerpts support), at most ``max_facts`` facts (``audit.max_facts``), a severity on every error
but not on a reasonable inference, evidence quoted for an abstention, the template's own fields.

Every schema keeps to OpenAI's strict subset: every object lists all its properties as required
and has ``additionalProperties: false``; an optional value is nullable instead; no ``default``
and no ``title``. Schemas are cached by request shape (the names, ranges and counts that
decide them), so building one for a repeated shape is a dictionary lookup. A returned schema is
shared: treat it as read-only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

CONFIDENCES = ["high", "medium", "low", "none"]
RISKS = ["none", "low", "medium", "high"]
CLAIM_SCORE_RANGE = (0, 10)


def strict_object(properties: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """An object schema with every property required and nothing else allowed."""
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": list(properties), "additionalProperties": False}
    if description:
        schema["description"] = description
    return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null: how strict mode spells an optional value."""
    return {"anyOf": [schema, {"type": "null"}]}


def _array(items: dict[str, Any], min_items: int | None = None, max_items: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if min_items is not None:
        schema["minItems"] = min_items
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


STRING = {"type": "string"}
EXCERPT = strict_object({"text": STRING, "confidence": {"type": "string", "enum": CONFIDENCES},
                         "explanation": nullable(STRING)})
SEVERITY = {"type": "string", "enum": ["high", "low"]}
# An error (contradiction or unsupported) needs its severity; a reasonable inference is recorded
# but never counted, so its severity is optional: required-but-nullable, as strict mode spells it.
FINDING = {"anyOf": [
    strict_object({"level": {"type": "string", "enum": ["contradiction", "unsupported"]},
                   "severity": SEVERITY, "detail": STRING, "claim": nullable(STRING)}),
    strict_object({"level": {"type": "string", "enum": ["reasonable_inference"]},
                   "severity": nullable(SEVERITY), "detail": STRING, "claim": nullable(STRING)}),
]}
# Some character that is not whitespace: an abstention's evidence may not be blank.
NOT_BLANK = {"type": "string", "pattern": r"\S"}
CHAIN = strict_object({"premises": _array(STRING), "conclusion": STRING})


def _unique(names) -> tuple[str, ...]:
    """Names in first-seen order, once each (a property can be listed only once)."""
    return tuple(dict.fromkeys(names))


# --- one builder per role, cached on the request's shape -----------------------------------------

@lru_cache(maxsize=1024)
def excerpts_schema(attributes: tuple[str, ...], max_excerpts: int) -> dict[str, Any]:
    """extract_excerpts: one required list of 1..max_excerpts excerpts per attribute."""
    per_attribute = _array(EXCERPT, 1, max(1, max_excerpts))
    return strict_object({"excerpts": strict_object({name: per_attribute for name in attributes})})


@lru_cache(maxsize=1024)
def reasoning_schema(attributes: tuple[str, ...]) -> dict[str, Any]:
    """reason: one required string per attribute."""
    return strict_object({"reasoning": strict_object({name: STRING for name in attributes})})


@lru_cache(maxsize=256)
def trait_schema(kind: str, min_score: int, max_score: int) -> dict[str, Any]:
    """score_trait: a boolean, or an integer within the trait's range; reasoning may be null."""
    score = ({"type": "boolean"} if kind == "boolean"
             else {"type": "integer", "minimum": min_score, "maximum": max_score})
    return strict_object({"score": score, "reasoning": nullable(STRING)})


@lru_cache(maxsize=1024)
def claims_schema(claim_ids: tuple[str, ...], answer_ids: tuple[str, ...]) -> dict[str, Any]:
    """score_claims: an object keyed by claim id, so each claim is scored exactly once."""
    refs = {"type": "string", "enum": list(_unique((*answer_ids, "synthesis")))}
    evaluation = strict_object({"score": {"type": "integer", "minimum": CLAIM_SCORE_RANGE[0],
                                          "maximum": CLAIM_SCORE_RANGE[1]},
                                "justification": STRING, "evidence_refs": _array(refs)})
    return strict_object({"evaluations": strict_object({cid: evaluation for cid in claim_ids})})


@lru_cache(maxsize=256)
def risks_schema(excerpt_count: int) -> dict[str, Any]:
    """assess_risk: exactly one risk per excerpt."""
    risk = strict_object({"excerpt": STRING, "risk": {"type": "string", "enum": RISKS},
                          "justification": STRING})
    return strict_object({"risks": _array(risk, excerpt_count, excerpt_count)})


@lru_cache(maxsize=1)
def abstention_schema() -> dict[str, Any]:
    """detect_abstention: ``{"abstention": ...}``, either abstained with evidence that is not
    blank, or not abstained (evidence may be empty). The root of a strict schema cannot be an
    ``anyOf``, so the two alternatives sit under one property (the reply model unwraps it)."""
    abstains = strict_object({"abstained": {"type": "boolean", "enum": [True]}, "evidence": NOT_BLANK,
                              "reasoning": STRING})
    answers = strict_object({"abstained": {"type": "boolean", "enum": [False]}, "evidence": STRING,
                             "reasoning": STRING})
    return strict_object({"abstention": {"anyOf": [abstains, answers]}})


@lru_cache(maxsize=256)
def decompose_schema(max_facts: int) -> dict[str, Any]:
    """decompose: at most max_facts facts, and the reasoning chains."""
    return strict_object({"facts": _array(STRING, 0, max_facts), "reasoning_chains": _array(CHAIN)})


@lru_cache(maxsize=1)
def findings_schema() -> dict[str, Any]:
    """check_facts and check_logic: a list of findings (empty when there is none)."""
    return strict_object({"errors": _array(FINDING)})


def reply_schema(role: str, request: Any) -> dict[str, Any]:
    """The strict JSON schema a judge answers ``request`` of ``role`` in."""
    if role == "extract_excerpts":
        return excerpts_schema(_unique(a.name for a in request.attributes), request.max_excerpts)
    if role == "reason":
        return reasoning_schema(_unique(a.name for a in request.attributes))
    if role == "score_trait":
        t = request.trait
        return trait_schema(t.kind, t.min_score, t.max_score)
    if role == "score_claims":
        return claims_schema(_unique(c.id for c in request.claims), _unique(a.id for a in request.answers))
    if role == "assess_risk":
        return risks_schema(len(request.evidence))
    if role == "detect_abstention":
        return abstention_schema()
    if role == "decompose":
        return decompose_schema(request.max_facts)
    if role in ("check_facts", "check_logic"):
        return findings_schema()
    if role == "parse":
        from evalledger.stages.judge.template_schema import strict_template_schema
        return strict_template_schema(request.fields)
    if role == "answer":   # an answering model's answer (stages/answering.py): text with something in it
        return strict_object({"answer": {"type": "string", "pattern": "\\S"}})
    raise ValueError(f"no reply schema for judge role {role!r}")
