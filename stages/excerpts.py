"""Excerpt extraction with fuzzy validation and retries: the one procedure for templates and rubrics.

Attempt 1 asks for up to ``max_excerpts`` verbatim quotes per attribute. Every quote is scored
with the fuzzy rule of DESIGN.md (``stages.fuzzy``); a quote passes iff score >= threshold. An
attribute whose quotes all failed is asked again, up to ``retry_attempts`` more times, with
feedback listing each failed quote, its score and the threshold (every failed quote of the
earlier attempts, so each retry is a new request: the port would answer a repeated one from its
record). An attribute is *missing* when
it has no valid quote after its final attempt: the list is recomputed from the final state, so
an attribute rescued by a retry is never reported missing (Karenina keeps the stale entry and
fails cases falsely).

Events: ``excerpt.extracted`` per valid quote, ``excerpt.retried`` per attribute asked again,
``excerpt.missing`` per attribute without a valid quote at the end.

An unusable reply (the judge port gave up after its own re-asks) does not fail the case: the
extraction continues with the partial results it has, the attributes still without a valid
quote are missing, and their ``excerpt.missing`` says why in ``error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalledger.stages.casework import CaseWork
from evalledger.stages.fuzzy import validate
from evalledger.stages.judge import JudgeCallFailed
from evalledger.stages.judge.roles import AttributeSpec, ExtractExcerptsRequest, FailedQuote


@dataclass
class ExcerptOutcome:
    """Valid quotes per attribute (``{text, confidence, similarity, attempt}``), the missing ones, retries."""

    valid: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    retries: int = 0
    error: str | None = None       # why the extraction stopped early (an unusable reply)

    def texts(self) -> dict[str, list[str]]:
        """The valid quotes' texts per attribute, as the reason and parse requests take them."""
        return {name: [q["text"] for q in quotes] for name, quotes in self.valid.items()}


@dataclass(frozen=True)
class ExcerptSettings:
    """How many quotes, how close they must be, how many retries (per spec and per trait)."""

    max_excerpts: int
    threshold: float
    retry_attempts: int


def offered_quotes(quotes: list[Any], limit: int) -> list[Any]:
    """The quotes the judge really offered and the stage checks (empty text or confidence 'none' means
    'no excerpt'; at most ``limit``); the what-if scores the same ones."""
    return [q for q in quotes if q.text.strip() and q.confidence != "none"][:limit]


async def extract_excerpts(work: CaseWork, attributes: list[AttributeSpec], settings: ExcerptSettings, *,
                           subject: str, stage: str, response_text: str) -> ExcerptOutcome:
    """Run the extraction with retries for ``attributes`` and emit its events (see module docstring)."""
    outcome = ExcerptOutcome()
    last_failed: dict[str, list[dict[str, Any]]] = {}
    pending, feedback = list(attributes), []
    for attempt in range(1, settings.retry_attempts + 2):
        request = ExtractExcerptsRequest(question=work.question_text, response=response_text, attributes=pending,
                                         subject=subject, max_excerpts=settings.max_excerpts, feedback=feedback)
        try:
            reply = await work.ask("extract_excerpts", request, attempt=attempt, stage=stage)
        except JudgeCallFailed as exc:  # the port gave up on this reply: go on with what is valid so far
            outcome.error = f"unusable reply to excerpt extraction (attempt {attempt}): {type(exc).__name__}: {exc}"
            break
        retry = []
        for attribute in pending:
            # The threshold decides on the exact score; only the recorded figure is rounded.
            checks = [(q, validate(q.text, response_text, settings.threshold))
                      for q in offered_quotes(reply.excerpts.get(attribute.name, []), settings.max_excerpts)]
            passed = [(q, round(c.score, 6)) for q, c in checks if c.passed]
            failed = [{"text": q.text, "similarity": round(c.score, 6)} for q, c in checks if not c.passed]
            for index, (quote, score) in enumerate(passed):
                entry = {"text": quote.text, "confidence": quote.confidence, "similarity": score, "attempt": attempt}
                outcome.valid.setdefault(attribute.name, []).append(entry)
                work.emit("excerpt.extracted", {"attribute": attribute.name, "subject": subject,
                                                "threshold": settings.threshold, **entry},
                          step="excerpt", part=f"{attribute.name}:{index}", attempt=attempt, stage=stage)
            last_failed[attribute.name] = failed
            if not passed and failed:
                retry.append(attribute)
                feedback += [FailedQuote(attribute=attribute.name, text=f["text"], similarity=f["similarity"],
                                         threshold=settings.threshold) for f in failed]
        if not retry or attempt > settings.retry_attempts:
            break
        for attribute in retry:
            outcome.retries += 1
            work.emit("excerpt.retried", {"attribute": attribute.name, "subject": subject, "attempt": attempt + 1,
                                          "failed": last_failed[attribute.name], "threshold": settings.threshold},
                      step="excerpt_retry", part=attribute.name, attempt=attempt + 1, stage=stage)
        pending = retry
        feedback = [f for f in feedback if f.attribute in {a.name for a in retry}]
    # Recomputed from the final state of every attribute, never accumulated across attempts.
    outcome.missing = [a.name for a in attributes if a.name not in outcome.valid]
    for name in outcome.missing:
        work.emit("excerpt.missing", {"attribute": name, "subject": subject, "threshold": settings.threshold,
                                      "failed": last_failed.get(name, []),
                                      **({"error": outcome.error} if outcome.error else {})},
                  step="excerpt_missing", part=name, stage=stage)
    return outcome
