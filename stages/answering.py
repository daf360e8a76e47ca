"""Answering models: a question without responses is answered by a profile's ``run`` model.

The answer is asked through the judge port (role ``answer``), so it is recorded as a
``judge.called`` event on the new case's stream, reused by request hash and replayable; then the
answer opens a ``case.opened`` exactly like a dropped-in response (``model`` = the answering
model's name, ``answered_by`` = its identity and the recorded call), and the stages judge it.
So a user can bring just questions with their ground truth.

The case id is known before the call (from the benchmark, the question and the profile), so the
call is recorded on the case it opens, and a rerun finds the recorded answer and pays nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from evalledger.ledger import NewEvent
from evalledger.stages.config import merge_layers
from evalledger.stages.formats.ids import digest16
from evalledger.stages.intake import registered_benchmarks
from evalledger.stages.judge import JudgeUnavailable
from evalledger.stages.judge.budget import BudgetExhausted
from evalledger.stages.models_file import NamedModel, Profile

MAX_ANSWERS_IN_FLIGHT = 16


@dataclass(frozen=True)
class PlainAnswerer:
    """An answering model outside any profile (the models file's ``answering``): its cases have none.

    It stands where a profile goes below: ``run`` is the model, ``name`` None.
    """

    run: NamedModel
    name: None = None


def answered_case_id(benchmark: str, question_id: str, profile) -> str:
    """The id of the case a profile's (or a plain answerer's) answer to a question opens."""
    if profile.name is None:
        return digest16([benchmark, question_id, "answer", profile.run.identity()])
    return digest16([benchmark, question_id, "answer", profile.run.identity(), profile.name,
                     profile.verify.identity()])


@dataclass
class OpenedCases:
    """What opening answered and profile cases needs of the cases already opened: their ids, and
    the (benchmark, question id) pairs a response was dropped in for."""

    known: set[str]
    dropped: set[tuple[Any, str]]


def opened_cases(led) -> OpenedCases:
    """The ``OpenedCases`` of the ledger, read an event at a time: an event holds its question and
    response, so keeping them all took about 10 KB a case."""
    known: set[str] = set()
    dropped: set[tuple[Any, str]] = set()
    for event in led.read(types=["case.opened"]):
        d = event.data
        known.add(d.get("case_id"))
        if not d.get("answered_by"):
            dropped.add((d.get("benchmark"), str(d.get("question_id"))))
    return OpenedCases(known, dropped)


def unanswered_questions(led, opened: OpenedCases, profile) -> list[dict[str, Any]]:
    """The template questions no response was dropped in for, that ``profile`` has not answered yet.

    Each is ``{benchmark, question, case_id}`` with the benchmark's ``benchmark.registered`` data.
    """
    out = []
    for event in registered_benchmarks(led):
        bench = event.data
        if bench.get("kind") != "template":
            continue
        for question in bench.get("questions") or []:
            qid = str(question.get("id"))
            if (bench["benchmark"], qid) in opened.dropped or not question.get("question"):
                continue
            cid = answered_case_id(bench["benchmark"], qid, profile)
            if cid not in opened.known:
                out.append({"benchmark": bench, "question": question, "case_id": cid})
    return out


# Profile case fields live here (not in profiles.py, which imports this module) to keep imports acyclic.
def profile_fields(profile: Profile) -> dict[str, Any]:
    """The keys every case of ``profile`` carries in ``case.opened``."""
    return {"profile": profile.name, "judged_by": profile.verify.identity()}


def profile_config(config: dict[str, Any] | None, profile: Profile) -> dict[str, Any]:
    """A case's config with the profile's audit overrides merged in (the run's --set still wins)."""
    return merge_layers(config or {}, {"audit": profile.audit}) if profile.audit else dict(config or {})


def answered_case(bench: dict[str, Any], question: dict[str, Any], case_id: str, answer: str, call_event,
                  profile, meta: dict[str, Any]) -> NewEvent:
    """The ``case.opened`` an answer opens: the dropped-in shape, plus who answered and judges."""
    answered_by = {**profile.run.identity(), "event": call_event.id if call_event else None,
                   "request_hash": call_event.data.get("request_hash") if call_event else None}
    in_profile = profile.name is not None
    data = {"case_id": case_id, "benchmark": bench["benchmark"], "benchmark_name": bench.get("name"),
            "kind": bench["kind"], "question_id": str(question["id"]), "model": profile.run.name,
            "question": question, "response": answer, "source": bench.get("source"),
            "config": profile_config(bench.get("config"), profile) if in_profile else dict(bench.get("config") or {}),
            "answered_by": answered_by, **(profile_fields(profile) if in_profile else {})}
    return NewEvent(f"case:{case_id}", "case.opened", data, key=case_id, meta=meta)


def _answer_call(led, case_id: str):
    """The recorded success of the answer call on the case's stream (None when not found)."""
    found = None
    for event in led.read(stream=f"case:{case_id}"):
        if event.type == "judge.called" and event.data.get("role") == "answer" and event.data.get("error") is None:
            found = event
    return found


async def answer_questions(led, port, questions: list[dict[str, Any]], profile,
                           meta: dict[str, Any]) -> list[dict[str, str]]:
    """Answer each question with ``port`` and open its case; the failures as ``{question_id, profile, case_id, reason}``.

    Raises BudgetExhausted (after the answers in flight are in) when the budget refused a call,
    and JudgeUnavailable when the answering model's server cannot answer: neither is a failure
    of the question, which is asked again by the next run.
    """
    gate = asyncio.Semaphore(MAX_ANSWERS_IN_FLIGHT)

    async def one(item: dict[str, Any]) -> None:
        async with gate:
            reply = await port.call("answer", {"question": item["question"]["question"]},
                                    case_id=item["case_id"], attempt=1, meta=meta)
        event = answered_case(item["benchmark"], item["question"], item["case_id"], reply.answer,
                              _answer_call(led, item["case_id"]), profile, meta)
        led.append(event)

    results = await asyncio.gather(*(one(q) for q in questions), return_exceptions=True)
    failures, exhausted, unavailable = [], None, None
    for item, result in zip(questions, results, strict=True):
        if isinstance(result, JudgeUnavailable):
            unavailable = result
        elif isinstance(result, BudgetExhausted):
            exhausted = result
        elif isinstance(result, Exception):
            failures.append({"question_id": str(item["question"]["id"]),
                             "profile": profile.name or f"model {profile.run.name}",
                             "case_id": item["case_id"],
                             "reason": f"answering failed: {type(result).__name__}: {result}"})
    if unavailable is not None:   # outranks a spent budget, as in the dispatcher
        raise unavailable
    if exhausted is not None:
        raise exhausted
    return failures
