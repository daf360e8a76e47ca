"""Rubric traits of a template case (deep-judgment-rubrics.md): standard, deep, regex and metric traits.

- LLM traits (``kind: llm``): a score within ``min_score..max_score``, or true/false for boolean
  traits (``score_kind: boolean``). Standard: one ``score_trait`` call. Deep (``rubric_modes.resolve_trait``): with excerpts,
  extraction with fuzzy validation and retries, optional search risk (one judge call for all the
  rubric's searching traits, after every deep trait's excerpts), reasoning, then the score
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

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from evalledger.stages.casework import CaseWork
from evalledger.stages.excerpts import extract_excerpts
from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge import JudgeUnavailable, UnrecordedRequest
from evalledger.stages.judge.roles import AttributeSpec, ReasonRequest, ScoreTraitRequest, TraitSpec
from evalledger.stages.primitives.patterns import PatternTimeout, compile_benchmark_pattern, search
from evalledger.stages.risk import RiskItem, assess_risks
from evalledger.stages.rubric_modes import TraitPlan, resolve_trait

STAGE = "rubric"


def trait_spec(trait: dict[str, Any]) -> TraitSpec:
    """The judge's view of an LLM trait: boolean (``score_kind: boolean``), or an integer score in its range."""
    if trait.get("score_kind") == "boolean":
        return TraitSpec(name=trait["name"], description=trait.get("description", ""), kind="boolean")
    return TraitSpec(name=trait["name"], description=trait.get("description", ""), kind="score",
                     min_score=int(trait.get("min_score", 1)), max_score=int(trait.get("max_score", 5)))


@dataclass
class TraitEvidence:
    """What a deep trait's excerpt step found: its valid excerpts, or none after its retries."""

    excerpts: list[str] = field(default_factory=list)
    missing: bool = False
    retries: int = 0
    risk: str | None = None


async def judge_rubric(work: CaseWork, rubric: dict[str, Any] | None) -> list[str]:
    """Score every trait of ``rubric``; returns the names of the auto-failed traits, in rubric order.

    The deep traits' excerpts are extracted first (every trait's at once), so that their search
    risk takes one judge call for the whole rubric; then the traits are scored at once, their
    events appended in rubric order (``CaseWork.together``).
    """
    traits = (rubric or {}).get("traits", [])
    plans = {t["name"]: resolve_trait(work.config, work.question_id, t)
             for t in traits if t.get("kind", "llm") not in ("regex", "metric")}
    evidence = await _deep_evidence(work, traits, plans)
    scored = await work.together([_trait_step(trait, plans, evidence) for trait in traits])
    return [trait["name"] for trait, ok in zip(traits, scored) if not ok]


def _trait_step(trait: dict[str, Any], plans: dict[str, TraitPlan | None],
                evidence: dict[str, TraitEvidence]) -> Callable[[CaseWork], Awaitable[bool]]:
    """The step scoring one trait on a branch of the case: True unless the trait auto-failed."""
    async def step(work: CaseWork) -> bool:
        kind = trait.get("kind", "llm")
        if kind == "regex":
            _regex_trait(work, trait)
        elif kind == "metric":
            await _metric_trait(work, trait)
        elif plans[trait["name"]] is None:
            await _standard_trait(work, trait)
        else:
            plan = plans[trait["name"]]
            assert plan is not None
            return await _deep_trait(work, trait, plan, evidence.get(trait["name"], TraitEvidence()))
        return True
    return step


async def _deep_evidence(work: CaseWork, traits: list[dict[str, Any]],
                         plans: dict[str, TraitPlan | None]) -> dict[str, TraitEvidence]:
    """Excerpts of every deep trait that wants them (extracted at once), then one risk call for
    those that search."""
    wanting = [t for t in traits if (plan := plans.get(t["name"])) is not None and plan.excerpt_enabled]
    found = await work.together([_excerpt_step(trait, plans[trait["name"]]) for trait in wanting])
    out = {trait["name"]: evidence for trait, evidence in zip(wanting, found)}
    searched = [RiskItem(t["name"], t.get("description", ""), out[t["name"]].excerpts) for t in traits
                if t["name"] in out and out[t["name"]].excerpts and plans[t["name"]].search_enabled]
    if searched:
        risks = await assess_risks(work, searched, stage=STAGE, subject="rubric",
                                   tool=work.config.deep_judgment_rubric_search_tool)
        for name, risk in risks.items():
            out[name].risk = risk
    return out


def _excerpt_step(trait: dict[str, Any], plan: TraitPlan | None) -> Callable[[CaseWork], Awaitable[TraitEvidence]]:
    """The step extracting one deep trait's excerpts, with its retries, on a branch of the case."""
    assert plan is not None
    spec = trait_spec(trait)

    async def step(work: CaseWork) -> TraitEvidence:
        outcome = await extract_excerpts(work, [AttributeSpec(name=spec.name, description=spec.description)],
                                         plan.excerpts, subject="rubric", stage=STAGE, response_text=str(work.response))
        return TraitEvidence(outcome.texts().get(spec.name, []), bool(outcome.missing), outcome.retries)
    return step


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


async def _deep_trait(work: CaseWork, trait: dict[str, Any], plan: TraitPlan, evidence: TraitEvidence) -> bool:
    """Deep judgment of one trait from its evidence; False when it auto-failed for lack of valid excerpts."""
    spec = trait_spec(trait)
    attribute = AttributeSpec(name=spec.name, description=spec.description)
    response = str(work.response)
    if evidence.missing:
        work.emit("trait.auto_failed", {"trait": spec.name, "reason": "no valid excerpt after "
                                        f"{plan.excerpts.retry_attempts} retries",
                                        "retries": evidence.retries, "plan": plan.to_json()},
                  step="trait_auto_fail", part=spec.name, stage=STAGE)
        return False
    excerpts = evidence.excerpts
    risks = {spec.name: evidence.risk} if evidence.risk is not None else {}
    question = work.question_text
    degraded: list[str] = []
    try:
        reasoning = await _ask(work, "reason", ReasonRequest(
            question=question, response=response, attributes=[attribute], subject="rubric",
            excerpts={spec.name: excerpts} if excerpts else {}, risks=risks))
        text = reasoning.reasoning.get(spec.name, "")
    except (UnrecordedRequest, JudgeUnavailable):
        raise                 # a replay does not degrade: it names what the record lacks
    except Exception as exc:  # spec: a failed reasoning call goes on with empty reasoning
        reraise_interrupt(exc)
        text = ""
        degraded.append(f"reasoning failed ({type(exc).__name__}: {exc}); scored without it")
    try:
        reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=response, trait=spec,
                                                                reasoning=text, excerpts=excerpts))
    except (UnrecordedRequest, JudgeUnavailable):
        raise
    except Exception as exc:  # spec: score extraction failure falls back to the response directly
        reraise_interrupt(exc)
        degraded.append(f"score from the reasoning failed ({type(exc).__name__}: {exc}); scored from the response")
        reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=response, trait=spec))
    _scored(work, trait, "deep", reply.score, reasoning=text, excerpts=excerpts,
            risk=risks.get(spec.name), plan=plan.to_json(), degraded=degraded)
    return True


async def _metric_trait(work: CaseWork, trait: dict[str, Any]) -> None:
    """Per-instruction booleans from the judge (asked at once), the metrics from the counts (code
    does the math)."""
    question = work.question_text
    groups = [(group, index, instruction) for group in ("tp_instructions", "tn_instructions")
              for index, instruction in enumerate(trait.get(group) or [])]
    answers = await work.together([_instruction_step(question, TraitSpec(
        name=f"{trait['name']}[{group}:{index}]", kind="boolean", description=f"The response satisfies: {instruction}"))
        for group, index, instruction in groups])
    verdicts: dict[str, list[bool]] = {"tp_instructions": [], "tn_instructions": []}
    for (group, _, _), answer in zip(groups, answers):
        verdicts[group].append(answer)
    tp = sum(verdicts["tp_instructions"])
    fn = len(verdicts["tp_instructions"]) - tp
    fp = sum(verdicts["tn_instructions"])
    tn = len(verdicts["tn_instructions"]) - fp
    metrics = confusion_metrics(tp, fn, fp, tn)
    wanted = trait.get("metrics") or list(metrics)
    chosen = {name: metrics.get(name) for name in wanted}
    _scored(work, trait, "standard", chosen.get(wanted[0]) if wanted else None,
            counts={"tp": tp, "fn": fn, "fp": fp, "tn": tn}, metrics=chosen, instructions=verdicts)


def _instruction_step(question: str, spec: TraitSpec) -> Callable[[CaseWork], Awaitable[bool]]:
    """The step asking whether the response satisfies one metric instruction."""
    async def step(work: CaseWork) -> bool:
        reply = await _ask(work, "score_trait", ScoreTraitRequest(question=question, response=str(work.response),
                                                                trait=spec))
        return bool(reply.score)
    return step


def confusion_metrics(tp: int, fn: int, fp: int, tn: int) -> dict[str, float | None]:
    """precision, recall, specificity, accuracy, f1 (None where undefined), rounded to 6 places."""
    ratio = lambda a, b: round(a / b, 6) if b else None  # noqa: E731
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = None
    if precision is not None and recall is not None:
        f1 = ratio(2 * precision * recall, precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "specificity": ratio(tn, tn + fp),
            "accuracy": ratio(tp + tn, tp + tn + fp + fn), "f1": f1}
