"""The role registry: each role's models, prompt builder, and request-aware reply checks.

``role(name)`` gives a ``RoleSpec``; ``spec.validate_reply(request, data)`` validates a decoded
reply against the reply model and against the request (every attribute answered, a score in the
trait's range, every claim scored once, one risk per excerpt, at most ``max_facts`` facts, a parse
typed by the template) and raises ValueError with a reason the judge can be told;
``spec.reply_schema(request)`` is the strict per-request JSON schema sent as ``response_format``
(``reply_schemas.py``): every instance of it passes these checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from evalledger.stages.judge.roles import (
    AssessRiskReply,
    AssessRiskRequest,
    CheckFactsReply,
    CheckFactsRequest,
    CheckLogicReply,
    CheckLogicRequest,
    DecomposeReply,
    DecomposeRequest,
    DetectAbstentionReply,
    DetectAbstentionRequest,
    ExtractExcerptsReply,
    ExtractExcerptsRequest,
    Model,
    ParseReply,
    ParseRequest,
    ReasonReply,
    ReasonRequest,
    ScoreClaimsReply,
    ScoreClaimsRequest,
    ScoreTraitReply,
    ScoreTraitRequest,
)


def _check_excerpts(request: ExtractExcerptsRequest, reply: ExtractExcerptsReply) -> None:
    names = {a.name for a in request.attributes}
    missing = sorted(names - set(reply.excerpts))
    if missing:
        raise ValueError(f"no entry for attribute(s) {', '.join(missing)}; give every attribute a list "
                         "(one entry with empty text and confidence 'none' when there is no excerpt)")


def _check_reasoning(request: ReasonRequest, reply: ReasonReply) -> None:
    missing = sorted({a.name for a in request.attributes} - set(reply.reasoning))
    if missing:
        raise ValueError(f"no reasoning for attribute(s) {', '.join(missing)}")


def _check_trait(request: ScoreTraitRequest, reply: ScoreTraitReply) -> ScoreTraitReply:
    trait = request.trait
    if trait.kind == "boolean":
        if not isinstance(reply.score, bool):
            raise ValueError(f"trait {trait.name!r} is boolean: answer true or false, not {reply.score!r}")
        return reply
    if isinstance(reply.score, bool) or not trait.min_score <= reply.score <= trait.max_score:
        raise ValueError(f"trait {trait.name!r} takes an integer from {trait.min_score} to "
                         f"{trait.max_score}, not {reply.score!r}")
    return reply


def _pick_trait(request: ScoreTraitRequest, data: Any) -> Any:
    """A batch reply ``{"scores": {...}}`` naming several traits: take this request's trait."""
    if isinstance(data, dict) and "score" not in data and isinstance(data.get("scores"), dict):
        scores = data["scores"]
        if request.trait.name in scores:
            return {**data, "score": scores[request.trait.name]}
    return data


def _check_claims(request: ScoreClaimsRequest, reply: ScoreClaimsReply) -> None:
    wanted = [c.id for c in request.claims]
    got = [e.claim_id for e in reply.evaluations]
    missing = [c for c in wanted if c not in got]
    extra = sorted({g for g in got if g not in wanted})
    twice = sorted({g for g in got if got.count(g) > 1})
    if missing or extra or twice:
        parts = ([f"missing claim(s) {', '.join(missing)}"] if missing else []) + \
                ([f"unknown claim id(s) {', '.join(extra)}"] if extra else []) + \
                ([f"claim(s) scored twice: {', '.join(twice)}"] if twice else [])
        raise ValueError("score every claim exactly once: " + "; ".join(parts))


def _check_risks(request: AssessRiskRequest, reply: AssessRiskReply) -> None:
    wanted, got = len(request.evidence), len(reply.risks)
    if got != wanted:
        raise ValueError(f"give exactly one risk per excerpt, in the order given: {wanted} excerpt(s), "
                         f"{got} risk(s)")


def _check_abstention(request: DetectAbstentionRequest, reply: DetectAbstentionReply) -> None:
    if reply.abstained and not reply.evidence.strip():
        raise ValueError("an abstention needs its evidence: quote the words of the response that refuse or evade")


def _check_fact_count(request: DecomposeRequest, reply: DecomposeReply) -> None:
    if len(reply.facts) > request.max_facts:
        raise ValueError(f"give at most {request.max_facts} atomic facts, not {len(reply.facts)}")


# --- the registry --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoleSpec:
    """A role: its models, how its chat messages are built, and request-aware reply checks."""

    name: str
    request: type[Model]
    reply: type[Model]
    build_messages: Callable[[Any], list[dict[str, str]]]
    check: Callable[[Any, Any], Any] | None = None
    prepare: Callable[[Any, Any], Any] | None = None

    def validate_reply(self, request: Any, data: Any) -> Model:
        """Validate a decoded reply for this request; raises ValueError (or ValidationError) with the reason."""
        if self.prepare is not None:
            data = self.prepare(request, data)
        reply = self.reply.model_validate(data)
        if self.check is not None:
            reply = self.check(request, reply) or reply
        return reply

    def reply_schema(self, request: Any) -> dict[str, Any]:
        """The strict JSON schema the judge must answer ``request`` in (cached by request shape)."""
        from evalledger.stages.judge.reply_schemas import reply_schema
        return reply_schema(self.name, request)


def _registry() -> dict[str, RoleSpec]:
    from evalledger.stages.judge import prompts_answer as answer
    from evalledger.stages.judge import prompts_audit as audit
    from evalledger.stages.judge import prompts_deep as deep
    from evalledger.stages.judge import prompts_reconstruction as recon
    from evalledger.stages.judge.template_schema import check_parsed

    specs = [
        RoleSpec("extract_excerpts", ExtractExcerptsRequest, ExtractExcerptsReply, deep.excerpt_messages,
                 _check_excerpts),
        RoleSpec("assess_risk", AssessRiskRequest, AssessRiskReply, deep.risk_messages, _check_risks),
        RoleSpec("reason", ReasonRequest, ReasonReply, deep.reason_messages, _check_reasoning),
        RoleSpec("parse", ParseRequest, ParseReply, deep.parse_messages, check_parsed),
        RoleSpec("score_trait", ScoreTraitRequest, ScoreTraitReply, deep.trait_messages, _check_trait,
                 _pick_trait),
        RoleSpec("score_claims", ScoreClaimsRequest, ScoreClaimsReply, recon.claims_messages, _check_claims),
        RoleSpec("detect_abstention", DetectAbstentionRequest, DetectAbstentionReply, deep.abstention_messages,
                 _check_abstention),
        RoleSpec("decompose", DecomposeRequest, DecomposeReply, audit.decompose_messages, _check_fact_count),
        RoleSpec("check_facts", CheckFactsRequest, CheckFactsReply, audit.facts_messages),
        RoleSpec("check_logic", CheckLogicRequest, CheckLogicReply, audit.logic_messages),
        # Not a judge role: answering models answer questions through the same port (stages/answering.py).
        RoleSpec("answer", answer.AnswerRequest, answer.AnswerReply, answer.answer_messages),
    ]
    return {spec.name: spec for spec in specs}


ROLE_NAMES = ("extract_excerpts", "assess_risk", "reason", "parse", "score_trait", "score_claims",
              "decompose", "check_facts", "check_logic", "detect_abstention")
_ROLES: dict[str, RoleSpec] = {}


def role(name: str) -> RoleSpec:
    """The spec of role ``name``; a ValueError naming the known roles for anything else."""
    if not _ROLES:
        _ROLES.update(_registry())
    try:
        return _ROLES[name]
    except KeyError:
        raise ValueError(f"unknown judge role {name!r}; roles: {', '.join(ROLE_NAMES)}") from None
