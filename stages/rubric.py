"""Rubric traits of a template case (deep-judgment-rubrics.md): standard, deep, regex and metric traits.

- LLM traits (``kind: llm``): a score within ``min_score..max_score``, or true/false for boolean
  traits (``score_kind: boolean``). Standard: one ``score_trait`` call. Deep (``rubric_modes.resolve_trait``): with excerpts,
  extraction with fuzzy validation and retries, optional search risk, reasoning, then the score
  from the reasoning and excerpts; without excerpts, reasoning then score. A deep trait without a
  valid excerpt after its retries gets ``trait.auto_failed`` and no score.
- Regex traits (``kind: regex``): ``re.search`` semantics on the response, ``invert`` flips it; no
  judge. The search has a time limit (``primitives.patterns``): out of time, the trait scores
  false whatever ``invert`` says, and its event says why (``error``).
- Metric traits (``kind: metric``): the judge answers, per instruction, whether the response
  satisfies it (boolean ``score_trait`` calls); precision, recall, specificity, accuracy and F1
  are computed here from the counts, never asked of the judge.

Events (meta.stage ``rubric``): ``trait.scored`` (``mode`` deep or standard) or ``trait.auto_failed``,
plus the excerpt and risk events of deep traits.
"""

from __future__ import annotations

from typing import Any

from evalledger.stages.casework import CaseWork
from evalledger.stages.excerpts import extract_excerpts
from evalledger.stages.judge import UnrecordedRequest
from evalledger.stages.judge.roles import AttributeSpec, ReasonRequest, ScoreTraitRequest, TraitSpec
from evalledger.stages.primitives.patterns import PatternTimeout, compile_benchmark_pattern, search
from evalledger.stages.risk import assess_risk
from evalledger.stages.rubric_modes import TraitPlan, resolve_trait

STAGE = "rubric"


def trait_spec(trait: dict[str, Any]) -> TraitSpec:
    """The judge's view of an LLM trait: boolean (``score_kind: boolean``), or an integer score in its range."""
    if trait.get("score_kind") == "boolean":
        return TraitSpec(name=trait["name"], description=trait.get("description", ""), kind="boolean")
    return TraitSpec(name=trait["name"], description=trait.get("description", ""), kind="score",
                     min_score=int(trait.get("min_score", 1)), max_score=int(trait.get("max_score", 5)))


async def judge_rubric(work: CaseWork, rubric: dict[str, Any] | None) -> list[str]:
    """Score every trait of ``rubric`` in order; returns the names of the auto-failed traits."""
    auto_failed = []
    for trait in (rubric or {}).get("traits", []):
        kind = trait.get("kind", "llm")
        if kind == "regex":
            _regex_trait(work, trait)
        elif kind == "metric":
            await _metric_trait(work, trait)
        else:
            plan = resolve_trait(work.config, work.question_id, trait)
            if plan is None:
                await _standard_trait(work, trait)
            elif not await _deep_trait(work, trait, plan):
                auto_failed.append(trait["name"])
    return auto_failed


async def _ask(work: CaseWork, role: str, request) -> object:
    """A judge call on behalf of the rubric (its judge.called says stage rubric)."""
    return await work.ask(role, request, stage=STAGE)


def _scored(work: CaseWork, trait: dict[str, Any], mode: str, score: Any, **extra: Any) -> None:
    """Emit ``trait.scored`` for one trait."""
    work.emit("trait.scored", {"trait": trait["name"], "kind": trait.get("kind", "llm"), "mode": mode,
                               "score": score, **extra}, step="trait", part=trait["name"], stage=STAGE)


def _regex_trait(work: CaseWork, trait: dict[str, Any]) -> None:
    """A regex trait: found (or, with ``invert``, not found) in the response; a pattern that runs
    out of time is a failed trait with the reason recorded, never a hang."""
    flags = () if trait.get("case_sensitive", True) else ("IGNORECASE",)
    invert = bool(trait.get("invert"))
    try:
        found = search(compile_benchmark_pattern(trait["pattern"], flags), str(work.response))
    except PatternTimeout as timeout:
        _scored(work, trait, "standard", False, pattern=trait["pattern"], invert=invert, matched=None,
                error=str(timeout))
        return
    _scored(work, trait, "standard", (not found) if invert else found, pattern=trait["pattern"], invert=invert,
            matched=found)


async def _standard_trait(work: CaseWork, trait: dict[str, Any]) -> None:
    """One judge call scores the trait on the whole response."""
    reply = await _ask(work, "score_trait", ScoreTraitRequest(
        question=work.question_text, response=str(work.response), trait=trait_spec(trait)))
    _scored(work, trait, "standard", reply.score, reasoning=reply.reasoning, excerpts=[])


async def _deep_trait(work: CaseWork, trait: dict[str, Any], plan: TraitPlan) -> bool:
    """Deep judgment of one trait; False when it auto-failed for lack of valid excerpts."""
    spec = trait_spec(trait)
    attribute = AttributeSpec(name=spec.name, description=spec.description)
    response = str(work.response)
    excerpts: list[str] = []
    risks: dict[str, str] = {}
    if plan.excerpt_enabled:
        outcome = await extract_excerpts(work, [attribute], plan.excerpts, subject="rubric", stage=STAGE,
                                         response_text=response)
        if outcome.missing:
            work.emit("trait.auto_failed", {"trait": spec.name, "reason": "no valid excerpt after "
                                            f"{plan.excerpts.retry_attempts} retries",
                                            "retries": outcome.retries, "plan": plan.to_json()},
                      step="trait_auto_fail", part=spec.name, stage=STAGE)
            return False
        excerpts = outcome.texts()[spec.name]
        if plan.search_enabled:
            risks[spec.name] = await assess_risk(work, spec.name, spec.description, excerpts, stage=STAGE,
                                                 subject="rubric", tool=work.config.deep_judgment_rubric_search_tool)
    question = work.question_text
    degraded: list[str] = []
    try:
        reasoning = await _ask(work, "reason", ReasonRequest(
            question=question, response=response, attributes=[attribute], subject="rubric",
            excerpts={spec.name: excerpts} if excerpts else {}, risks=risks))
        text = reasoning.reasoning.get(spec.name, "")
    except UnrecordedRequest:
        raise                 # a replay does not degrade: it names what the record lacks
    except Exception as exc:  # spec: a failed reasoning call goes on with empty reasoning
        text = ""
        degraded.append(f"reasoning failed ({type(exc).__name__}: {exc}); scored without it")
    try:
        reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=response, trait=spec,
                                                                reasoning=text, excerpts=excerpts))
    except UnrecordedRequest:
        raise
    except Exception as exc:  # spec: score extraction failure falls back to the response directly
        degraded.append(f"score from the reasoning failed ({type(exc).__name__}: {exc}); scored from the response")
        reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=response, trait=spec))
    _scored(work, trait, "deep", reply.score, reasoning=text, excerpts=excerpts,
            risk=risks.get(spec.name), plan=plan.to_json(), degraded=degraded)
    return True


async def _metric_trait(work: CaseWork, trait: dict[str, Any]) -> None:
    """Per-instruction booleans from the judge, the metrics from the counts (code does the math)."""
    question = work.question_text
    verdicts: dict[str, list[bool]] = {}
    for group in ("tp_instructions", "tn_instructions"):
        verdicts[group] = []
        for index, instruction in enumerate(trait.get(group) or []):
            spec = TraitSpec(name=f"{trait['name']}[{group}:{index}]", kind="boolean",
                             description=f"The response satisfies: {instruction}")
            reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=str(work.response),
                                                                    trait=spec))
            verdicts[group].append(bool(reply.score))
    tp = sum(verdicts["tp_instructions"])
    fn = len(verdicts["tp_instructions"]) - tp
    fp = sum(verdicts["tn_instructions"])
    tn = len(verdicts["tn_instructions"]) - fp
    metrics = confusion_metrics(tp, fn, fp, tn)
    wanted = trait.get("metrics") or list(metrics)
    chosen = {name: metrics.get(name) for name in wanted}
    _scored(work, trait, "standard", chosen.get(wanted[0]) if wanted else None,
            counts={"tp": tp, "fn": fn, "fp": fp, "tn": tn}, metrics=chosen, instructions=verdicts)


def confusion_metrics(tp: int, fn: int, fp: int, tn: int) -> dict[str, float | None]:
    """precision, recall, specificity, accuracy, f1 (None where undefined), rounded to 6 places."""
    ratio = lambda a, b: round(a / b, 6) if b else None  # noqa: E731
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = None
    if precision is not None and recall is not None:
        f1 = ratio(2 * precision * recall, precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "specificity": ratio(tn, tn + fp),
            "accuracy": ratio(tp + tn, tp + tn + fp + fn), "f1": f1}
