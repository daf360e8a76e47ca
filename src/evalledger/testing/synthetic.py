"""Synthetic event histories in the catalog's shapes, for the projection tests and benchmarks.

Each helper returns ``NewEvent``s (not yet appended) with deterministic idempotency keys, the
way the stages write them, so a test can append the same per-case histories in any interleaving.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from evalledger.ledger import NewEvent


def case_id_for(benchmark: str, question_id: str, model: str, response: str = "") -> str:
    """A content-derived case id (16 hex digits), like intake's."""
    text = "\x1f".join((benchmark, question_id, model, response))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _meta(stage: str, config_hash: str | None = "cfg-1") -> dict[str, Any]:
    meta: dict[str, Any] = {"stage": stage}
    if config_hash:
        meta["config_hash"] = config_hash
    return meta


def benchmark(bench: str, kind: str, name: str | None = None, config: dict | None = None,
              questions: int = 0) -> NewEvent:
    """A benchmark.registered event."""
    return NewEvent(f"benchmark:{bench}", "benchmark.registered",
                    {"benchmark": bench, "name": name or bench, "kind": kind, "config": config or {},
                     "questions": [{"id": f"q{i}"} for i in range(questions)]}, key="registered")


def run_started(run: str, backend: str = "offline", model: str = "heuristic",
                config_hash: str = "cfg-1") -> NewEvent:
    """A run.started event."""
    return NewEvent(f"run:{run}", "run.started", {"run": run, "backend": backend, "model": model,
                                                   "config_hash": config_hash}, key="started")


def opened(bench: str, kind: str, question_id: str, model: str, question: Any = None,
           config: dict | None = None, response: Any = "") -> tuple[str, NewEvent]:
    """A case.opened event and the case id it opens."""
    case_id = case_id_for(bench, question_id, model, str(response))
    return case_id, NewEvent(f"case:{case_id}", "case.opened", {
        "case_id": case_id, "benchmark": bench, "kind": kind, "question_id": question_id, "model": model,
        "question": question or {}, "response": response, "config": config or {}}, key="opened")


def judge_call(case_id: str, role: str, attempt: int = 1, tokens: tuple[int, int] = (100, 20),
               cost: float = 0.001, backend: str = "offline", model: str = "heuristic",
               error: str | None = None, step: str = "") -> NewEvent:
    """A judge.called event (an error makes it a failed attempt)."""
    request_hash = hashlib.sha256(f"{case_id}|{role}|{step}".encode()).hexdigest()
    return NewEvent(f"case:{case_id}", "judge.called", {
        "role": role, "backend": backend, "model": model, "request_hash": request_hash,
        "attempt": attempt, "error": error, "cost": cost, "latency_ms": 12.5,
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1],
                  "total_tokens": tokens[0] + tokens[1]}},
        key=f"judge:{request_hash}:{attempt}", meta=_meta("judge"))


def field(case_id: str, name: str, passed: bool | None, extracted: Any = None, expected: Any = None,
          primitive: dict | None = None) -> NewEvent:
    """A field.verified event."""
    return NewEvent(f"case:{case_id}", "field.verified", {
        "case_id": case_id, "field": name, "primitive": primitive or {"type": "NumericExact"},
        "extracted": extracted, "expected": expected, "passed": passed},
        key=f"template:{case_id}:verify:{name}", meta=_meta("template"))


def excerpt(case_id: str, attribute: str, text: str, similarity: float, attempt: int = 1) -> NewEvent:
    """An excerpt.extracted event."""
    return NewEvent(f"case:{case_id}", "excerpt.extracted", {
        "case_id": case_id, "attribute": attribute, "text": text, "confidence": "high",
        "similarity": similarity, "attempt": attempt},
        key=f"template:{case_id}:excerpt:{attribute}:{attempt}", meta=_meta("template"))


def excerpt_retried(case_id: str, attribute: str, attempt: int, failed: list[dict]) -> NewEvent:
    """An excerpt.retried event (the viewer's test homes show the failed excerpts of a retry)."""
    return NewEvent(f"case:{case_id}", "excerpt.retried", {
        "case_id": case_id, "attribute": attribute, "attempt": attempt, "failed": failed},
        key=f"template:{case_id}:retry:{attribute}:{attempt}", meta=_meta("template"))


def judged(case_id: str, verdict: str, auto_failed: bool = False, reasons: Iterable[str] = ()) -> NewEvent:
    """A case.judged event."""
    return NewEvent(f"case:{case_id}", "case.judged", {
        "case_id": case_id, "verdict": verdict, "auto_failed": auto_failed, "reasons": list(reasons)},
        key=f"template:{case_id}:judged", meta=_meta("template"))


def auto_failed(case_id: str, reasons: list[str]) -> NewEvent:
    """A case.auto_failed event."""
    return NewEvent(f"case:{case_id}", "case.auto_failed", {"case_id": case_id, "reasons": reasons},
                    key=f"template:{case_id}:auto_fail", meta=_meta("template"))


def trait(case_id: str, name: str, score: Any, mode: str = "standard") -> NewEvent:
    """A trait.scored event."""
    return NewEvent(f"case:{case_id}", "trait.scored", {"case_id": case_id, "trait": name, "mode": mode,
                                                         "score": score},
                    key=f"rubric:{case_id}:{name}", meta=_meta("rubric"))


def claim(case_id: str, claim_id: str, score: int, refs: list[str] | None = None) -> NewEvent:
    """A claim.scored event."""
    return NewEvent(f"case:{case_id}", "claim.scored", {
        "case_id": case_id, "claim_id": claim_id, "score": score, "justification": f"scored {score}",
        "evidence_refs": refs or []}, key=f"reconstruction:{case_id}:{claim_id}", meta=_meta("reconstruction"))


def credit(case_id: str, score: int, high: int = 0, low: int = 0) -> NewEvent:
    """A credit.scored event (the zone follows the score)."""
    zone = "BAD" if score <= 2 else "MID" if score == 3 else "GOOD"
    return NewEvent(f"case:{case_id}", "credit.scored", {
        "case_id": case_id, "high": high, "low": low, "credit_score": score, "zone": zone},
        key=f"audit:{case_id}:credit", meta=_meta("audit"))


def stage_failed(case_id: str, stage: str, reason: str) -> NewEvent:
    """A stage.failed event."""
    return NewEvent(f"case:{case_id}", "stage.failed", {"case_id": case_id, "stage": stage, "reason": reason},
                    key=f"{stage}:{case_id}:failed", meta=_meta(stage))


def overridden(case_id: str, verdict: str, reason: str, author: str, key: str | None = None) -> NewEvent:
    """A verdict.overridden event."""
    return NewEvent(f"case:{case_id}", "verdict.overridden", {
        "case_id": case_id, "verdict": verdict, "reason": reason, "author": author}, key=key)


def template_case(bench: str, question_id: str, model: str, verdict: str | None,
                  fields: dict[str, bool] | None = None, calls: int = 2,
                  response: str = "") -> tuple[str, list[NewEvent]]:
    """A whole template case history: opened (with ``response``), judge calls, field checks,
    verdict (None: unfinished)."""
    case_id, first = opened(bench, "template", question_id, model,
                            {"id": question_id, "question": f"question {question_id}",
                             "template": {"fields": [{"name": n} for n in (fields or {})]}}, response=response)
    events = [first] + [judge_call(case_id, "parse", step=str(i)) for i in range(calls)]
    events += [field(case_id, name, ok, extracted=1 if ok else 2, expected=1) for name, ok in (fields or {}).items()]
    if verdict is not None:
        events.append(judged(case_id, verdict, reasons=[] if verdict == "pass" else ["field failed"]))
    return case_id, events
