"""The events one input file becomes (pure: no I/O, no ledger writes).

Streams and idempotency keys (so ingesting the same thing twice appends nothing):

| event | stream | key |
|---|---|---|
| ``file.received`` | ``file:<sha256>`` | sha256 |
| ``benchmark.rejected`` | ``file:<sha256>`` | sha256 + ":" + digest of the errors |
| ``benchmark.registered`` | ``benchmark:<id>`` | benchmark id |
| ``responses.registered`` (resolved) | ``benchmark:<id>`` | ``responses:<sha256>`` |
| ``responses.registered`` (pending) | ``file:<sha256>`` | ``pending:<sha256>`` |
| ``case.opened`` | ``case:<case id>`` | case id |
"""

from __future__ import annotations

from typing import Any, Iterable

from evalledger.ledger import NewEvent, event_id
from evalledger.stages.formats.errors import Problem
from evalledger.stages.formats.ids import benchmark_id, case_id, digest16
from evalledger.stages.formats.model import ParsedBenchmark, ParsedResponse

STAGE = {"stage": "intake", "stage_version": "1"}
MAX_ERRORS = 1000


def meta(causation: str | None = None) -> dict[str, Any]:
    """The meta of every intake event: the stage, and the event that caused it."""
    return {**STAGE, "causation": causation} if causation else dict(STAGE)


def file_event_id(sha: str) -> str:
    """The id of a file's ``file.received`` event (known before it is appended)."""
    return event_id(f"file:{sha}", "file.received", sha)


def file_received(name: str, sha: str, size: int, fmt: str, status: str,
                  bench: str | None, bench_name: str | None) -> NewEvent:
    """The file.received event of one ingested file, whatever became of it."""
    data = {"file": name, "sha256": sha, "size": size, "format": fmt, "status": status,
            "benchmark": bench, "benchmark_name": bench_name}
    return NewEvent(f"file:{sha}", "file.received", data, key=sha, meta=meta())


def rejected(name: str, sha: str, size: int, problems: list[Problem]) -> NewEvent:
    """The one event a rejected file gets: every error, capped at MAX_ERRORS."""
    errors = [p.as_dict() for p in problems[:MAX_ERRORS]]
    if len(problems) > MAX_ERRORS:
        errors.append({"where": "$", "reason": f"... and {len(problems) - MAX_ERRORS} more errors"})
    data = {"file": name, "sha256": sha, "size": size, "errors": errors}
    return NewEvent(f"file:{sha}", "benchmark.rejected", data, key=f"{sha}:{digest16(errors)}", meta=meta())


def template_warnings(questions: list[dict]) -> list[dict[str, str]]:
    """Load-time warnings of the questions' templates (``{where, reason}``): specs that are valid
    but probably not meant, such as a NumericRange without bounds. Intake has already loaded
    every template, so none raises here."""
    from evalledger.stages.verification import TemplateSpec
    out: list[dict[str, str]] = []
    for index, question in enumerate(questions):
        template = question.get("template")
        if template:
            where = f"$.questions[{index}] (id {question.get('id')}).template"
            out += TemplateSpec.from_dict(template, where=where).warnings(where)
    return out


def registered(bench: ParsedBenchmark, source: dict, fmt: str, causation: str,
               lineage: dict | None = None) -> tuple[str, NewEvent]:
    """The benchmark's id and its ``benchmark.registered`` event (with its version lineage, if any,
    and the templates' load-time warnings, if any)."""
    bid = benchmark_id(bench.kind, bench.name if bench.name_in_id else "", bench.config, bench.questions)
    data = {"benchmark": bid, "name": bench.name, "kind": bench.kind, "format": fmt, "config": bench.config,
            "questions": bench.questions, "source": source,
            "rejected_questions": [p.as_dict() for p in bench.rejected_questions],
            "rejected_traits": [p.as_dict() for p in bench.rejected_traits], **bench.extra, **(lineage or {})}
    warnings = template_warnings(bench.questions)
    if warnings:
        data["warnings"] = warnings
    return bid, NewEvent(f"benchmark:{bid}", "benchmark.registered", data, key=bid, meta=meta(causation))


def response_problems(bench: dict, responses: Iterable[ParsedResponse]) -> list[Problem]:
    """Why text responses do not fit the registered benchmark ``bench`` (empty when they do):
    a reconstruction is answered by a reconstruction file, and every question id must exist."""
    if bench["kind"] == "reconstruction":
        return [Problem("$.benchmark", f"benchmark {bench['name']!r} ({bench['benchmark']}) is a reconstruction "
                                       "document; its responses come as reconstruction files, not text")]
    ids = {q["id"] for q in bench["questions"]}
    return [Problem(f"{r.where}.question_id" if r.where.startswith("$") else f"{r.where}: $.question_id",
                    f"unknown question id {r.question_id!r} in benchmark {bench['name']!r} ({bench['benchmark']})")
            for r in responses if r.question_id not in ids]


def cases(bench: dict, responses: list[ParsedResponse], source: dict, causation: str) -> list[NewEvent]:
    """One self-contained ``case.opened`` per response (internals.md: what a case carries)."""
    questions = {q["id"]: q for q in bench["questions"]}
    events = []
    for r in responses:
        cid = case_id(bench["benchmark"], r.question_id, r.model, r.response)
        data = {"case_id": cid, "benchmark": bench["benchmark"], "benchmark_name": bench["name"],
                "kind": bench["kind"], "question_id": r.question_id, "model": r.model,
                "question": questions[r.question_id], "response": r.response,
                "config": bench.get("config") or {}, "source": source}
        events.append(NewEvent(f"case:{cid}", "case.opened", data, key=cid, meta=meta(causation)))
    return events


def responses_registered(bench: dict, source: dict, case_events: list[NewEvent], causation: str,
                         resolved_from: str | None = None) -> NewEvent:
    """The record that a file's responses were matched to a benchmark and opened these cases."""
    data = {"benchmark": bench["benchmark"], "benchmark_name": bench["name"], "pending": False,
            "file": source["file"], "sha256": source["sha256"], "count": len(case_events),
            "cases": [e.data["case_id"] for e in case_events], "resolved_from": resolved_from}
    return NewEvent(f"benchmark:{bench['benchmark']}", "responses.registered", data,
                    key=f"responses:{source['sha256']}", meta=meta(causation))


def pending(ref: str, responses: list[ParsedResponse], source: dict, causation: str) -> NewEvent:
    """Responses that name a benchmark not registered yet: kept whole until it arrives."""
    data = {"benchmark": ref, "pending": True, "file": source["file"], "sha256": source["sha256"],
            "count": len(responses),
            "responses": [{"question_id": r.question_id, "model": r.model, "text": r.response, "where": r.where}
                          for r in responses]}
    return NewEvent(f"file:{source['sha256']}", "responses.registered", data,
                    key=f"pending:{source['sha256']}", meta=meta(causation))


def resolution_rejected(bench: dict, source: dict, problems: list[Problem], causation: str) -> NewEvent:
    """Pending responses that turned out not to fit their benchmark: no case is opened for any."""
    data = {"benchmark": bench["benchmark"], "benchmark_name": bench["name"], "pending": False,
            "file": source["file"], "sha256": source["sha256"], "count": 0, "cases": [],
            "resolved_from": causation, "rejected": True, "errors": [p.as_dict() for p in problems]}
    return NewEvent(f"benchmark:{bench['benchmark']}", "responses.registered", data,
                    key=f"responses:{source['sha256']}", meta=meta(causation))
