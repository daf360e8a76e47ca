"""The judge roles: one typed request and one typed reply model per role.

The reply models parse what real judges send: each accepts the shapes Karenina's recorded replies
use (a flat ``{attribute: [excerpts]}`` object, ``{"score": 5}``, ``{"scores": {...}}``, a bare
array of claim evaluations) besides its own, and the shape of the strict per-request schema
sent as ``response_format`` (``reply_schemas.py``; claim evaluations keyed by claim id). ``ROLES`` maps each role name of docs/internals.md
to its models, its prompt builder and its request-aware reply validation (``registry.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Confidence = Literal["high", "medium", "low", "none"]
Risk = Literal["none", "low", "medium", "high"]
RISK_ORDER: tuple[str, ...] = ("none", "low", "medium", "high")


class Model(BaseModel):
    """Base of the role models: frozen, unknown keys ignored (models add keys freely)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# --- shared parts --------------------------------------------------------------------------------

class AttributeSpec(Model):
    """A template field or a rubric trait that excerpts are wanted for."""

    name: str
    description: str = ""
    type: str | None = None            # bool, int, float, str, list[str], literal, date (templates)
    values: list[Any] | None = None    # the allowed values of a literal field


class Excerpt(Model):
    """A verbatim quote from the response and how directly it states the attribute."""

    text: str
    confidence: Confidence = "medium"
    explanation: str | None = None

    @field_validator("confidence", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class FailedQuote(Model):
    """A quote that failed fuzzy validation: what the retry feedback tells the judge."""

    attribute: str
    text: str
    similarity: float
    threshold: float


class SearchHit(Model):
    """One search result as the search port returns it."""

    title: str = ""
    content: str = ""
    url: str = ""


class TraitSpec(Model):
    """A rubric trait scored by the judge: boolean, or an integer score in [min_score, max_score]."""

    name: str
    description: str = ""
    kind: Literal["boolean", "score"] = "score"
    min_score: int = 1
    max_score: int = 5


class AuditFinding(Model):
    """An error found by the fact or logic check (verifyfast-audit.md)."""

    level: Literal["contradiction", "unsupported"]
    severity: Literal["high", "low"]
    detail: str
    claim: str | None = None

    @field_validator("level", "severity", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ReasoningChain(Model):
    """A deduction in the model output: premises and the conclusion drawn from them."""

    premises: list[str] = Field(default_factory=list)
    conclusion: str

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):  # "A, so B" given as one string
            return {"premises": [], "conclusion": value}
        return value


# --- extract_excerpts (templates and rubric traits) ----------------------------------------------

class ExtractExcerptsRequest(Model):
    question: str
    response: str
    attributes: list[AttributeSpec]
    subject: Literal["template", "rubric"] = "template"
    max_excerpts: int = 3
    feedback: list[FailedQuote] = Field(default_factory=list)


class ExtractExcerptsReply(Model):
    excerpts: dict[str, list[Excerpt]]

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, value: Any) -> Any:
        if isinstance(value, dict) and "excerpts" not in value:
            return {"excerpts": value}  # Karenina's {"attribute": [{"text", "confidence"}]}
        return value


# --- assess_risk ---------------------------------------------------------------------------------

class ExcerptEvidence(Model):
    excerpt: str
    results: list[SearchHit] = Field(default_factory=list)


class AssessRiskRequest(Model):
    attribute: str
    description: str = ""
    evidence: list[ExcerptEvidence]


class ExcerptRisk(Model):
    excerpt: str
    risk: Risk
    justification: str = ""

    @field_validator("risk", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class AssessRiskReply(Model):
    risks: list[ExcerptRisk]

    def overall(self) -> str:
        """The attribute-level risk: the maximum over its excerpts ("none" when there are none)."""
        return max((r.risk for r in self.risks), key=RISK_ORDER.index, default="none")


# --- reason --------------------------------------------------------------------------------------

class ReasonRequest(Model):
    question: str
    response: str
    attributes: list[AttributeSpec]
    subject: Literal["template", "rubric"] = "template"
    excerpts: dict[str, list[str]] = Field(default_factory=dict)
    risks: dict[str, Risk] = Field(default_factory=dict)


class ReasonReply(Model):
    reasoning: dict[str, str]

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, value: Any) -> Any:
        if isinstance(value, dict) and "reasoning" not in value:
            value = {"reasoning": value}
        if isinstance(value, dict) and isinstance(value.get("reasoning"), dict):
            # with search the reasoning comes nested: {"attr": {"reasoning": ..., "hallucination_risk": ...}}
            value = {**value, "reasoning": {k: v.get("reasoning", "") if isinstance(v, dict) else v
                                            for k, v in value["reasoning"].items()}}
        return value


# --- parse ---------------------------------------------------------------------------------------

class ParseRequest(Model):
    question: str
    response: str
    fields: list[AttributeSpec]
    reasoning: dict[str, str] = Field(default_factory=dict)
    excerpts: dict[str, list[str]] = Field(default_factory=dict)


class ParseReply(Model):
    values: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, value: Any) -> Any:
        if isinstance(value, dict) and not (set(value) == {"values"} and isinstance(value["values"], dict)):
            return {"values": value}  # the template's own object, as Karenina's parsers answer
        return value


# --- score_trait ---------------------------------------------------------------------------------

class ScoreTraitRequest(Model):
    question: str
    response: str
    trait: TraitSpec
    reasoning: str | None = None
    excerpts: list[str] = Field(default_factory=list)


class ScoreTraitReply(Model):
    score: bool | int
    reasoning: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        if isinstance(value, dict) and "score" not in value:
            if "result" in value:
                return {**value, "score": value["result"]}
            scores = value.get("scores")
            if isinstance(scores, dict) and len(scores) == 1:
                return {**value, "score": next(iter(scores.values()))}
        return value


# --- score_claims (reconstruction) ---------------------------------------------------------------

class Claim(Model):
    id: str
    text: str
    type: str = ""
    importance: int | float = 1


class ReconstructionAnswer(Model):
    id: str
    question: str = ""
    answer: str


class ScoreClaimsRequest(Model):
    doc_id: str
    claims: list[Claim]
    answers: list[ReconstructionAnswer]
    synthesis: str = ""
    target_document: str | None = None


class ClaimEvaluation(Model):
    claim_id: str
    score: int = Field(ge=0, le=10)
    justification: str
    evidence_refs: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = dict(value)
            if "claim_id" not in value and "id" in value:
                value["claim_id"] = value["id"]
            refs = value.pop("evidence", None) if "evidence_refs" not in value else None
            if refs is not None:
                value["evidence_refs"] = [] if refs in ("none", "") else [refs] if isinstance(refs, str) else refs
            if isinstance(value.get("claim_id"), str):
                value["claim_id"] = value["claim_id"].strip("[] ")
        return value


class ScoreClaimsReply(Model):
    evaluations: list[ClaimEvaluation]

    @model_validator(mode="before")
    @classmethod
    def _array(cls, value: Any) -> Any:
        if isinstance(value, list):  # the spec's prompt asks for a JSON array
            return {"evaluations": value}
        if isinstance(value, dict) and "evaluations" not in value and "claim_evaluations" in value:
            value = {**value, "evaluations": value["claim_evaluations"]}
        if isinstance(value, dict) and isinstance(value.get("evaluations"), dict):
            # the strict schema's shape, {claim_id: {score, ...}}: back to the event's list form
            value = {**value, "evaluations": [{**item, "claim_id": claim_id} if isinstance(item, dict) else item
                                              for claim_id, item in value["evaluations"].items()]}
        return value


# --- audit: decompose, check_facts, check_logic --------------------------------------------------

class DecomposeRequest(Model):
    context_input: str
    model_output: str
    max_facts: int = 5


class DecomposeReply(Model):
    facts: list[str]   # at most the request's max_facts: checked against the request (registry)
    reasoning_chains: list[ReasoningChain] = Field(default_factory=list)


class CheckFactsRequest(Model):
    context_input: str
    model_output: str
    facts: list[str]
    numeric_deviation_threshold: float = 0.10


class CheckLogicRequest(Model):
    context_input: str
    model_output: str
    reasoning_chains: list[ReasoningChain]


class AuditReply(Model):
    errors: list[AuditFinding] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        if isinstance(value, list):
            return {"errors": value}
        if isinstance(value, dict) and "errors" not in value:
            for key in ("factual_errors", "logic_errors"):
                if key in value:
                    return {**value, "errors": value[key]}
        return value


class CheckFactsReply(AuditReply):
    pass


class CheckLogicReply(AuditReply):
    pass
