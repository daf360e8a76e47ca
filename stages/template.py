"""The template stage (deep-judgment-templates.md): from a response to a verdict, step by step.

Deep judgment on: excerpts per attribute (``stages.excerpts``: fuzzy validation, retries with
feedback, the missing list recomputed from the final attempt) -> optional search risk per
attribute (the maximum over its excerpts) -> reasoning -> parse from reasoning and excerpts ->
``field.verified`` per field through the primitives (trace fields on the raw response, never sent
to the judge) -> the case's rubric traits (``stages.rubric``) -> ``case.auto_failed`` when
attributes or deep traits lack excerpts -> ``case.judged``.
Deep judgment off: parse -> verify -> rubric -> judged.

Abstention (``abstention_enabled``): one ``detect_abstention`` call on the raw response first. A
response that refuses or evades fails the case as abstained (``abstention.detected`` with the
evidence, ``case.judged`` with ``abstained: true``); abstention takes priority over the
auto-fail, which is then skipped (its reasons are kept in ``skipped_auto_fail``).

Spec degradations kept: a failed reasoning call continues with empty reasoning (and says so in
``reasoning.generated``); a failed parse is a hard failure (the dispatcher records ``stage.failed``).
"""

from __future__ import annotations

from typing import Any

from evalledger.stages.casework import CaseWork
from evalledger.stages.embedder_minilm import embedder_named
from evalledger.stages.excerpts import ExcerptSettings, extract_excerpts
from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge import JudgeUnavailable, UnrecordedRequest
from evalledger.stages.judge.roles import AttributeSpec, DetectAbstentionRequest, ParseRequest, ReasonRequest
from evalledger.stages.risk import RiskItem, assess_risks
from evalledger.stages.rubric import judge_rubric
from evalledger.stages.verification import TemplateSpec, decide

STAGE = "template"


def judge_attributes(template: dict[str, Any], spec: TemplateSpec) -> list[AttributeSpec]:
    """The fields the judge sees: every non-trace field (trace fields are decided on the raw text)."""
    trace = {f.name for f in spec.fields if f.trace}
    return [AttributeSpec(name=f["name"], description=f.get("description", ""), type=f.get("type"),
                          values=f.get("values"))
            for f in template.get("fields", []) if f["name"] not in trace]


async def judge_template(work: CaseWork) -> None:
    """Run the template path and the rubric for one case, ending with ``case.judged``."""
    abstention = await _abstention(work) if work.config.abstention_enabled else None
    template = work.question.get("template")
    if not template:   # a rubric-only question: nothing to parse or verify
        failed_traits = await judge_rubric(work, work.question.get("rubric"))
        _judge(work, None, False, [], failed_traits, abstention)
        return
    spec = TemplateSpec.from_dict(template)
    attributes = judge_attributes(template, spec)
    response = str(work.response)
    cfg = work.config
    deep = cfg.deep_judgment_enabled and bool(attributes)
    excerpts: dict[str, list[str]] = {}
    reasoning: dict[str, str] = {}
    missing: list[str] = []
    if deep:
        outcome = await extract_excerpts(work, attributes, ExcerptSettings(
            cfg.deep_judgment_max_excerpts_per_attribute, cfg.deep_judgment_fuzzy_match_threshold,
            cfg.deep_judgment_excerpt_retry_attempts), subject="template", stage=STAGE, response_text=response)
        excerpts, missing = outcome.texts(), outcome.missing
        risks = await _risks(work, attributes, excerpts) if cfg.deep_judgment_search_enabled else {}
        reasoning = await _reason(work, attributes, excerpts, risks)
    values = await _parse(work, attributes, reasoning, excerpts, deep) if attributes else {}
    # Only a SemanticMatch field needs an embedder: the model is loaded (and the extra required)
    # for templates that use one, not for every case of a run that names it.
    semantic = any(type(f.primitive).__name__ == "SemanticMatch" for f in spec.fields)
    embedder = embedder_named(cfg.semantic_embedder) if semantic else None
    results, verdict = spec.verify(values, response, embedder=embedder)
    if deep and missing and abstention is None:  # a template auto-fail: the fields count as not verified
        why = ", ".join(repr(name) for name in missing) + " without a valid excerpt"
        results = tuple(result.marked_auto_failed(why) for result in results)
        verdict = decide(results, spec.rule)
    for result in results:
        payload = result.as_dict()
        if result.primitive.get("type") == "SemanticMatch":
            payload["embedder"] = cfg.semantic_embedder  # the audit trail names what decided
        work.emit("field.verified", payload, step="verify", part=result.field)
    failed_traits = await judge_rubric(work, work.question.get("rubric"))
    _judge(work, verdict, deep, missing, failed_traits, abstention)


async def _abstention(work: CaseWork) -> dict[str, str] | None:
    """``{evidence, reasoning}`` when the judge finds the response refuses or evades, else None."""
    reply = await work.ask("detect_abstention", DetectAbstentionRequest(question=work.question_text,
                                                                       response=str(work.response)))
    return {"evidence": reply.evidence, "reasoning": reply.reasoning} if reply.abstained else None


async def _risks(work: CaseWork, attributes: list[AttributeSpec], excerpts: dict[str, list[str]]) -> dict[str, str]:
    """Risk per attribute that has excerpts, in one judge call for the template (attributes
    without excerpts have nothing to check; one whose searches found nothing gets no risk)."""
    items = [RiskItem(a.name, a.description, excerpts[a.name]) for a in attributes if excerpts.get(a.name)]
    if not items:
        return {}
    risks = await assess_risks(work, items, stage=STAGE, subject="template",
                               tool=work.config.deep_judgment_search_tool)
    return {name: risk for name, risk in risks.items() if risk is not None}


async def _reason(work: CaseWork, attributes: list[AttributeSpec], excerpts: dict[str, list[str]],
                  risks: dict[str, str]) -> dict[str, str]:
    """Reasoning per attribute; on failure, empty reasoning and the error recorded (spec: graceful)."""
    request = ReasonRequest(question=work.question_text, response=str(work.response),
                            attributes=attributes, subject="template", excerpts=excerpts, risks=risks)
    try:
        reasoning, error = dict((await work.ask("reason", request)).reasoning), None
    except (UnrecordedRequest, JudgeUnavailable):
        raise                 # a replay does not degrade: it names what the record lacks
    except Exception as exc:  # the port gave up; the spec continues with empty reasoning
        reraise_interrupt(exc)
        reasoning, error = {}, f"{type(exc).__name__}: {exc}"
    work.emit("reasoning.generated", {"reasoning": reasoning, "risks": risks, "error": error}, step="reason")
    return reasoning


async def _parse(work: CaseWork, attributes: list[AttributeSpec], reasoning: dict[str, str],
                 excerpts: dict[str, list[str]], deep: bool) -> dict[str, Any]:
    """The template's values as the judge parses them (from reasoning and excerpts when deep)."""
    reply = await work.ask("parse", ParseRequest(question=work.question_text,
                                                 response=str(work.response), fields=attributes,
                                                 reasoning=reasoning, excerpts=excerpts))
    values = dict(reply.values)
    work.emit("answer.parsed", {"values": values, "deep_judgment": deep}, step="parse")
    return values


def _judge(work: CaseWork, verdict: Any, deep: bool, missing: list[str], failed_traits: list[str],
           abstention: dict[str, str] | None = None) -> None:
    """``case.auto_failed`` when evidence is missing, then ``case.judged`` (the verdict).

    ``verdict`` is None for a rubric-only question: it passes unless a deep trait auto-failed,
    and says ``rubric_only`` so that reports can keep it out of template accuracy. An abstention
    comes first: ``abstention.detected``, and the case fails as abstained without an auto-fail.
    """
    auto = [f"attribute {name!r} has no valid excerpt" for name in missing] + \
           [f"rubric trait {name!r} has no valid excerpt" for name in failed_traits]
    if abstention is not None:
        _abstained(work, verdict, deep, abstention, auto)
        return
    if auto:
        work.emit("case.auto_failed", {"reasons": auto, "attributes": missing, "traits": failed_traits},
                  step="auto_fail")
    if verdict is None:
        work.emit("case.judged", {"verdict": "fail" if auto else "pass", "auto_failed": bool(auto),
                                  "reasons": auto, "rubric_only": True, "deep_judgment": False},
                  step="judge")
        return
    passed = verdict.passed and not auto
    work.emit("case.judged", {
        "verdict": "pass" if passed else "fail", "auto_failed": bool(auto),
        "reasons": auto + list(verdict.reasons), "score": round(verdict.score, 6),
        "strategy": verdict.rule.to_spec(), "deep_judgment": deep,
        "fields": {"passed": list(verdict.passed_fields), "failed": list(verdict.failed_fields),
                   "unverifiable": list(verdict.unverifiable_fields)},
    }, step="judge")


def _abstained(work: CaseWork, verdict: Any, deep: bool, abstention: dict[str, str], auto: list[str]) -> None:
    """The case abstained: ``abstention.detected`` with its evidence, then a failing ``case.judged``."""
    work.emit("abstention.detected", {**abstention, "skipped_auto_fail": auto}, step="abstention")
    reasons = [f"abstention: the response refuses or evades: {abstention['evidence']!r}"]
    judged: dict[str, Any] = {"verdict": "fail", "auto_failed": False, "abstained": True, "deep_judgment": deep}
    if verdict is None:
        judged.update(reasons=reasons, rubric_only=True, deep_judgment=False)
    else:
        judged.update(reasons=reasons + list(verdict.reasons), score=round(verdict.score, 6),
                      strategy=verdict.rule.to_spec(),
                      fields={"passed": list(verdict.passed_fields), "failed": list(verdict.failed_fields),
                              "unverifiable": list(verdict.unverifiable_fields)})
    work.emit("case.judged", judged, step="judge")
