"""The offline backend: deterministic heuristics for every role, no network.

It is the embedded default that makes the quickstart run anywhere, and an honest baseline
(docs/judge.md says what it gets right). Its events say ``backend: offline`` and its model is
``offline-heuristics-1``; latency is not recorded (None), so an offline ledger's payloads are
the same on every machine.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator, Callable

from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge.calls import Attempt, JudgeCallFailed, PendingCall
from evalledger.stages.judge.offline import audit, deep, reconstruction
from evalledger.stages.judge.settings import OFFLINE_MODEL

HEURISTICS: dict[str, Callable[[Any], Any]] = {
    "extract_excerpts": deep.extract_excerpts,
    "assess_risk": deep.assess_risk,
    "reason": deep.reason,
    "parse": deep.parse,
    "score_trait": deep.score_trait,
    "score_claims": reconstruction.score_claims,
    "decompose": audit.decompose,
    "check_facts": audit.check_facts,
    "check_logic": audit.check_logic,
    "detect_abstention": deep.detect_abstention,
}


class OfflineBackend:
    """Answers every role with the heuristics above; records one attempt per call."""

    name = "offline"
    model = OFFLINE_MODEL
    network = False

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        return [(self.name, self.model)]

    async def attempts(self, call: PendingCall) -> AsyncGenerator[Attempt, str | None]:
        """One attempt: the heuristic's validated reply, or its failure (then JudgeCallFailed)."""
        try:
            reply = call.spec.validate_reply(call.request, HEURISTICS[call.role](call.request))
        except Exception as exc:  # a heuristic bug must be recorded and named, not swallowed
            reraise_interrupt(exc)
            reason = f"offline heuristic failed: {type(exc).__name__}: {exc}"
            yield Attempt(call.first_attempt, error=reason)
            raise JudgeCallFailed(call.role, call.case_id, call.request_hash, reason, 1) from exc
        yield Attempt(call.first_attempt, reply=reply)

    async def aclose(self) -> None:
        return None
