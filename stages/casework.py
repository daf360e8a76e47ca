"""One case in the hands of one stage: its inputs, its effective config, and the events it will emit.

A stage handler reads ``work.question``/``work.response``, asks the judge through ``work.ask``
(recorded and cached by the port) and collects its output events with ``work.emit``. Nothing is
written while the handler runs: the dispatcher commits ``work.outputs`` in one transaction with
the stage's tracking position, so a case's outputs are in the ledger entirely or not at all.

Every output event gets a deterministic id from ``key = "<stage>:<case>:<step>[:<part>]:<attempt>"``:
doing the case again after a crash appends nothing new (at-least-once processing, exactly-once
ledger). One repeat of a repeatedly judged case (``stages.repeats``) has its index in the key,
``...[:<part>]:repeat<r>:<attempt>``, and its sampling (``seed``...) in every judge request.

Steps that do not depend on each other (a rubric's traits, an audit's two checks, the searches
of a risk assessment) run at once through ``together``: each emits into a branch of its own, and
the branches' outputs are appended in the order the steps were given, so the case's outputs are
the same events in the same order whatever finished first. The calls themselves are recorded as
they end (a paid call is never held back); each carries its place (``order``: the block and step
it came from, its count in that step), by which the reports order a case's calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from evalledger.ledger import Event, LedgerError, NewEvent
from evalledger.stages.config import VerificationConfig
from evalledger.stages.judge.budget import BudgetExhausted
from evalledger.stages.judge.calls import UNSENT, JudgeUnavailable

T = TypeVar("T")

STAGE_VERSIONS = {"template": "1", "rubric": "1", "reconstruction": "1", "audit": "1"}


@dataclass
class Counters:
    """What a run has done so far, for the progress display and the run summary."""

    judge_calls: int = 0
    retries: int = 0
    failures: int = 0
    cases_done: int = 0


@dataclass
class CaseWork:
    """A case being processed by one stage (see module docstring)."""

    opened: Event
    stage: str
    config: VerificationConfig
    config_hash: str
    run_id: str
    judge: Any
    search_port: Callable[[str], Any] | None = None   # tool name -> search port (the dispatcher's)
    counters: Counters = field(default_factory=Counters)
    outputs: list[NewEvent] = field(default_factory=list)
    repeat: int | None = None                     # the repeat index when a case is judged K > 1 times
    sampling: dict[str, Any] | None = None        # that repeat's seed (and temperature), sent with every call
    # Inside ``together``: this branch's place, (the parent's count, the step's index) per level.
    branch: tuple[int, ...] = ()
    asked: list[int] = field(default_factory=lambda: [0])   # calls and together blocks so far (a shared cell)

    # --- the case's inputs (case.opened, docs/internals.md) -------------------------------------
    @property
    def case_id(self) -> str:
        return self.opened.data["case_id"]

    @property
    def stream(self) -> str:
        return f"case:{self.case_id}"

    @property
    def question(self) -> dict[str, Any]:
        return self.opened.data.get("question") or {}

    @property
    def question_text(self) -> str:
        """The question as asked (templates and rubrics; '' for other kinds)."""
        return self.question.get("question", "")

    @property
    def question_id(self) -> str:
        return self.opened.data["question_id"]

    @property
    def response(self) -> Any:
        return self.opened.data.get("response")

    # --- judge ----------------------------------------------------------------------------------
    async def ask(self, role: str, request: Any, *, attempt: int = 1, stage: str | None = None) -> Any:
        """One judge call for this case (the port records it, with this meta, and reuses a recorded success)."""
        self.counters.judge_calls += 1
        if attempt > 1:
            self.counters.retries += 1
        # Only a repeat passes sampling: a judge without repeats is called exactly as before.
        extra = {"sampling": self.sampling} if self.sampling is not None else {}
        meta = {**self.meta(stage or self.stage), **self.place()}
        try:
            return await self.judge.call(role, request, case_id=self.case_id, attempt=attempt,
                                         meta=meta, **extra)
        except BaseException as exc:
            if isinstance(exc, BudgetExhausted) or getattr(exc, UNSENT, False):
                self._uncount(attempt)   # refused or cancelled before anything was asked
            raise

    def _uncount(self, attempt: int) -> None:
        """Take back a call counted by ``ask`` that asked nothing (budget spent, breaker open, cancelled)."""
        self.counters.judge_calls -= 1
        if attempt > 1:
            self.counters.retries -= 1

    def place(self) -> dict[str, list[int]]:
        """The next call's place, as the meta that records it: ``{"order": [...]}`` inside a
        ``together`` step (a call made at once with others: its place orders it among them in
        the reports), else ``{}`` (a call made alone is ordered by when it was recorded)."""
        place = self._next_place()
        return {"order": [*self.branch, place]} if self.branch else {}

    def _next_place(self) -> int:
        """This branch's next place: a call or a together block takes one, in the order asked."""
        place = self.asked[0]
        self.asked[0] += 1
        return place

    # --- outputs --------------------------------------------------------------------------------
    def meta(self, stage: str) -> dict[str, Any]:
        """The meta of an output event: run, causation, stage, stage_version, config_hash (and profile)."""
        meta = {"run": self.run_id, "causation": self.opened.id, "stage": stage,
                "stage_version": STAGE_VERSIONS[stage], "config_hash": self.config_hash}
        if self.opened.data.get("profile"):
            meta["profile"] = self.opened.data["profile"]   # every event of a profile case says whose it is
        return meta

    def emit(self, type: str, data: dict[str, Any], *, step: str, attempt: int = 1,
             part: str | None = None, stage: str | None = None) -> None:
        """Collect an output event with its deterministic idempotency key."""
        stage = stage or self.stage
        key = ":".join([stage, self.case_id, step] + ([part] if part is not None else [])
                       + ([f"repeat{self.repeat}"] if self.repeat is not None else []) + [str(attempt)])
        self.outputs.append(NewEvent(self.stream, type, {"case_id": self.case_id, **data}, key=key,
                                     meta=self.meta(stage)))

    # --- independent steps ----------------------------------------------------------------------
    async def together(self, steps: Sequence[Callable[["CaseWork"], Awaitable[T]]]) -> list[T]:
        """Run independent ``steps`` at once (their judge calls go out together); their results in order.

        Each step gets a branch of this case (the same inputs, judge and counters, outputs of its
        own); once every step has ended, the branches' outputs are appended in the order of
        ``steps``, so the events do not depend on which call came back first. A step that raises
        does not cut the others short (their calls may be paid for and are recorded); then the
        error raised is ``together_error``'s pick, the same one whatever the timing.
        """
        if len(steps) <= 1:   # nothing to overlap: no branch, no task
            return [await step(self) for step in steps]
        block = self._next_place()
        branches = [dataclasses.replace(self, outputs=[], branch=(*self.branch, block, index), asked=[0])
                    for index in range(len(steps))]
        results = await asyncio.gather(*(step(branch) for step, branch in zip(steps, branches)),
                                       return_exceptions=True)
        error = together_error(results)
        if error is not None:
            raise error
        for branch in branches:
            self.outputs.extend(branch.outputs)
        return list(results)   # type: ignore[arg-type]


def together_error(results: Sequence[object]) -> BaseException | None:
    """The error a set of steps run together raises: one that stops the run or leaves the case
    pending (not an exception of the case: cancelled, judge unavailable, budget spent, ledger
    refused) before a failure of the case itself, then the first in the steps' order."""
    errors = [r for r in results if isinstance(r, BaseException)]
    if not errors:
        return None
    stopping = (JudgeUnavailable, BudgetExhausted, LedgerError)
    for error in errors:
        if not isinstance(error, Exception) or isinstance(error, stopping):
            return error
    return errors[0]
