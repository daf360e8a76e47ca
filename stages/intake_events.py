"""The events one input file becomes (pure: no I/O, no ledger writes).

Streams and idempotency keys (so ingesting the same thing twice appends nothing):

| event | stream | key |
|---|---|---|
| ``file.received`` | ``file:<sha256>`` | sha256 |
| ``benchmark.rejected`` | ``file:<sha256>`` | sha256 + ":" + digest of the errors |
| ``benchmark.registered`` | ``benchmark:<id>`` | benchmark id |
| ``benchmark.questions_added`` | ``benchmark:<id>`` | benchmark id + ``:questions:<part>`` |
| ``responses.registered`` (resolved) | ``benchmark:<id>`` | ``responses:<sha256>`` |
| ``responses.cases_added`` | ``benchmark:<id>`` | ``responses:<sha256>:cases:<part>`` |
| ``responses.registered`` (pending) | ``file:<sha256>`` | ``pending:<sha256>`` |
| ``responses.pending_added`` | ``file:<sha256>`` | ``pending:<sha256>:responses:<part>`` |
| ``case.opened`` | ``case:<case id>`` | case id |
"""

from __future__ import annotations

import json
from typing import Any, Container, Iterable, Iterator, TypeVar

from evalledger.ledger import NewEvent, event_id
from evalledger.ledger.paging import sized_batches
from evalledger.stages.formats.errors import Problem
from evalledger.stages.formats.ids import benchmark_id, case_id, digest16
from evalledger.stages.formats.model import ParsedBenchmark, ParsedResponse

STAGE = {"stage": "intake", "stage_version": "1"}
MAX_ERRORS = 1000
# An error's place or reason past this many characters is cut: a reason may quote a value of the
# file (an unknown key, a primitive type), and a 5 MB one made a 5 MB line in the note, the
# event and every ``status``.
ERROR_TEXT_CHARS = 1000
# A registration's events stay bounded (issue 15): at most this many questions, and about this many
# bytes of questions, per event. A benchmark that fits in one part keeps its single event.
PART_QUESTIONS = 1000
PART_BYTES = 1_000_000
# The same for a file's responses (issue 15): ``responses.registered`` lists at most this many case
# ids (16 hex digits each, about 190 KB of JSON), ``responses.cases_added`` parts the rest. A file
# of at most this many responses keeps its single event, byte for byte.
PART_CASES = 10_000
# Pending responses (held with their text until their benchmark arrives) past PART_CASES of them:
# the pending event and each ``responses.pending_added`` part hold at most PART_CASES responses and
# about PART_BYTES bytes of them. A file of at most PART_CASES responses keeps its single event.

T = TypeVar("T")


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


def rejected(name: str, sha: str, size: int, problems: Iterable[Problem] | FirstProblems) -> NewEvent:
    """The one event a rejected file gets: its errors (``error_list``)."""
    errors = error_list(problems)
    data = {"file": name, "sha256": sha, "size": size, "errors": errors}
    return NewEvent(f"file:{sha}", "benchmark.rejected", data, key=f"{sha}:{digest16(errors)}", meta=meta())


class FirstProblems:
    """The first MAX_ERRORS problems added, in the order added, and how many more there were: all
    a rejection shows of a file's problems (``error_list``), in memory that does not grow with
    their number (a file of a million bad lines held a million problems until it was cut)."""

    def __init__(self, problems: Iterable[Problem] = ()) -> None:
        self.kept: list[Problem] = []
        self.more = 0
        self.extend(problems)

    def extend(self, problems: Iterable[Problem]) -> None:
        """Keep ``problems`` while fewer than MAX_ERRORS are kept; count the rest."""
        for problem in problems:
            if len(self.kept) < MAX_ERRORS:
                self.kept.append(problem)
            else:
                self.more += 1

    def __len__(self) -> int:
        """How many problems were added, kept or counted."""
        return len(self.kept) + self.more


def error_list(problems: Iterable[Problem] | FirstProblems) -> list[dict[str, str]]:
    """``{where, reason}`` of the first MAX_ERRORS problems (then one saying how many more; a
    ``FirstProblems`` has them counted already), each text cut at ERROR_TEXT_CHARS characters."""
    first = problems if isinstance(problems, FirstProblems) else FirstProblems(problems)
    errors = [{"where": _clipped(p.where), "reason": _clipped(p.reason)} for p in first.kept]
    if first.more:
        errors.append({"where": "$", "reason": f"... and {first.more} more errors"})
    return errors


def _clipped(text: str) -> str:
    """``text``, or its first ERROR_TEXT_CHARS characters and how long it was."""
    if len(text) <= ERROR_TEXT_CHARS:
        return text
    return f"{text[:ERROR_TEXT_CHARS]}... (cut: {len(text)} characters)"


def template_warnings(questions: list[dict]) -> list[dict[str, str]]:
    """Load-time warnings of the questions' templates (``{where, reason}``): specs that are valid
    but probably not meant, such as a NumericRange without bounds. Intake has already loaded
    every template, so none raises here."""
    out: list[dict[str, str]] = []
    for index, question in enumerate(questions):
        out += question_warnings(index, question)
    return out


def question_warnings(index: int, question: dict) -> list[dict[str, str]]:
    """``template_warnings`` of the question at ``index`` alone."""
    from evalledger.stages.verification import TemplateSpec
    template = question.get("template")
    if not template:
        return []
    where = f"$.questions[{index}] (id {question.get('id')}).template"
    return TemplateSpec.from_dict(template, where=where).warnings(where)


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


def question_parts(questions: list[dict]) -> list[list[dict]]:
    """The questions cut, in order, into parts of at most PART_QUESTIONS questions and about
    PART_BYTES bytes of JSON each (a single question larger than that is a part of its own)."""
    return list(sized_batches(questions, lambda q: len(json.dumps(q, ensure_ascii=False, default=str)),
                              PART_BYTES, PART_QUESTIONS)) or [[]]


def registration_events(registered: NewEvent) -> list[NewEvent]:
    """The events that register a benchmark: its ``benchmark.registered`` alone when its questions
    fit in one part; else that event with the first part (and ``question_count``, ``question_parts``)
    followed by a ``benchmark.questions_added`` per further part. Append them in one batch: the
    registration is then atomic (all parts or none)."""
    questions = registered.data.get("questions") or []
    parts = question_parts(questions)
    if len(parts) == 1:
        return [registered]
    bid = registered.data["benchmark"]
    head = {**registered.data, "questions": parts[0], "question_count": len(questions), "question_parts": len(parts)}
    out = [NewEvent(registered.stream, registered.type, head, key=registered.key, meta=registered.meta)]
    for number, part in enumerate(parts[1:], start=1):
        out.append(NewEvent(registered.stream, "benchmark.questions_added",
                            {"benchmark": bid, "part": number, "questions": part},
                            key=f"{bid}:questions:{number}", meta=registered.meta))
    return out


def whole_registration(head: dict, parts: Iterable[dict]) -> dict:
    """A ``benchmark.registered`` payload with every question: ``head`` plus the questions of its
    ``benchmark.questions_added`` payloads ``parts`` (in part order). A single-event registration
    (every old home's) comes back as it is."""
    count = head.get("question_parts") or 1
    if count == 1:
        return head
    by_number = {p["part"]: p["questions"] for p in parts}
    questions = list(head.get("questions") or [])
    for number in range(1, count):
        questions += by_number[number]
    whole = {k: v for k, v in head.items() if k not in ("question_count", "question_parts")}
    return {**whole, "questions": questions}


def oversized(where: str, size: int, max_chars: int) -> Problem:
    """The problem of a response of ``size`` characters over the ``--max-response-chars`` limit."""
    return Problem(where, f"the response is {size} characters, over the limit of {max_chars} per response "
                          "(--max-response-chars)")


def response_problems(bench: dict, responses: Iterable[ParsedResponse],
                      ids: Container[str] | None = None) -> list[Problem]:
    """Why text responses do not fit the registered benchmark ``bench`` (empty when they do):
    a reconstruction is answered by a reconstruction file, and every question id must exist
    (``ids``: the benchmark's question ids, when ``bench`` does not hold its questions)."""
    return list(unfit_responses(bench, responses, ids))


def unfit_responses(bench: dict, responses: Iterable[ParsedResponse],
                    ids: Container[str] | None = None) -> Iterator[Problem]:
    """``response_problems`` one at a time, for a file's responses read from disk (``FirstProblems``
    keeps the first of them: a large file of unknown question ids is not held whole)."""
    if bench["kind"] == "reconstruction":
        yield Problem("$.benchmark", f"benchmark {bench['name']!r} ({bench['benchmark']}) is a reconstruction "
                                     "document; its responses come as reconstruction files, not text")
        return
    if ids is None:
        ids = {q["id"] for q in bench["questions"]}
    for r in responses:
        if r.question_id not in ids:
            yield Problem(f"{r.where}.question_id" if r.where.startswith("$") else f"{r.where}: $.question_id",
                          f"unknown question id {r.question_id!r} in benchmark {bench['name']!r} "
                          f"({bench['benchmark']})")


def cases(bench: dict, responses: list[ParsedResponse], source: dict, causation: str) -> list[NewEvent]:
    """One self-contained ``case.opened`` per response (internals.md: what a case carries)."""
    return list(case_events(bench, responses, source, causation))


def case_ids(bench: dict, responses: Iterable[ParsedResponse]) -> list[str]:
    """The case id each response opens, in order (what ``responses.registered`` lists)."""
    return [case_id(bench["benchmark"], r.question_id, r.model, r.response) for r in responses]


def case_events(bench: dict, responses: list[ParsedResponse], source: dict, causation: str,
                ids: list[str] | None = None) -> Iterator[NewEvent]:
    """``cases`` one at a time (``ids``: their ``case_ids``, when already computed), so a file's
    intake never holds all its ``case.opened`` events at once (``Ledger.append_many``)."""
    questions = {q["id"]: q for q in bench["questions"]}
    for r, cid in zip(responses, ids if ids is not None else case_ids(bench, responses)):
        yield case_opened(bench, r, questions[r.question_id], source, causation, cid)


def case_opened(bench: dict, r: ParsedResponse, question: dict, source: dict, causation: str,
                cid: str) -> NewEvent:
    """The ``case.opened`` of response ``r`` to ``question`` (``cid``: its case id)."""
    data = {"case_id": cid, "benchmark": bench["benchmark"], "benchmark_name": bench["name"],
            "kind": bench["kind"], "question_id": r.question_id, "model": r.model,
            "question": question, "response": r.response,
            "config": bench.get("config") or {}, "source": source}
    return NewEvent(f"case:{cid}", "case.opened", data, key=cid, meta=meta(causation))


def responses_opened(bench: dict, source: dict, ids: list[str], causation: str,
                     resolved_from: str | None = None) -> NewEvent:
    """The record that a file's responses were matched to a benchmark and opened the cases ``ids``
    (``case_ids``), in one event whatever their number, as every home before parts holds it
    (``responses_parts`` cuts it into bounded parts)."""
    data = {"benchmark": bench["benchmark"], "benchmark_name": bench["name"], "pending": False,
            "file": source["file"], "sha256": source["sha256"], "count": len(ids),
            "cases": ids, "resolved_from": resolved_from}
    return NewEvent(f"benchmark:{bench['benchmark']}", "responses.registered", data,
                    key=f"responses:{source['sha256']}", meta=meta(causation))


def responses_parts(bench: dict, source: dict, ids: Iterable[str], count: int, causation: str,
                    resolved_from: str | None = None) -> Iterator[NewEvent]:
    """The bounded-size record of ``count`` responses opening the cases ``ids`` (taken one part at
    a time, so a stream of ids is never held whole): ``responses_opened`` alone when they fit in
    one part of PART_CASES; else that event with the first part (``count`` all of them, and
    ``case_parts``) followed by a ``responses.cases_added`` per further part. Append them in the
    batch that opens the cases: the record is then atomic (all parts or none)."""
    chunks = _chunks(ids, PART_CASES)
    head = responses_opened(bench, source, next(chunks, []), causation, resolved_from)
    if count <= PART_CASES:
        yield head
        return
    parts = -(-count // PART_CASES)
    yield NewEvent(head.stream, head.type, {**head.data, "count": count, "case_parts": parts},
                   key=head.key, meta=head.meta)
    for number, chunk in enumerate(chunks, start=1):
        data = {"benchmark": bench["benchmark"], "sha256": source["sha256"], "part": number, "cases": chunk}
        yield NewEvent(head.stream, "responses.cases_added", data, key=f"{head.key}:cases:{number}",
                       meta=head.meta)


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter), made as they are taken."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def whole_responses(head: dict, parts: Iterable[dict]) -> dict:
    """A ``responses.registered`` payload with every case id: ``head`` plus the ids of its
    ``responses.cases_added`` payloads ``parts``. A single-event record (every old home's) comes
    back as it is."""
    count = head.get("case_parts") or 1
    if count == 1:
        return head
    by_number = {p["part"]: p["cases"] for p in parts if p.get("sha256") == head.get("sha256")}
    cases = list(head.get("cases") or [])
    for number in range(1, count):
        cases += by_number[number]
    return {**{k: v for k, v in head.items() if k != "case_parts"}, "cases": cases}


def pending(ref: str, responses: list[ParsedResponse], source: dict, causation: str) -> NewEvent:
    """Responses that name a benchmark not registered yet: kept whole until it arrives (the one
    event of a file of at most PART_CASES responses; ``pending_parts`` cuts a larger one)."""
    return _pending_head(ref, [held_response(r) for r in responses], len(responses), source, causation)


def held_response(r: ParsedResponse) -> dict:
    """One pending response as its event holds it."""
    return {"question_id": r.question_id, "model": r.model, "text": r.response, "where": r.where}


def _pending_head(ref: str, held: list[dict], count: int, source: dict, causation: str) -> NewEvent:
    """The pending ``responses.registered`` of ``count`` responses, holding ``held``."""
    data = {"benchmark": ref, "pending": True, "file": source["file"], "sha256": source["sha256"],
            "count": count, "responses": held}
    return NewEvent(f"file:{source['sha256']}", "responses.registered", data,
                    key=f"pending:{source['sha256']}", meta=meta(causation))


def pending_parts(ref: str, responses: Iterable[ParsedResponse], count: int, source: dict,
                  causation: str) -> Iterator[NewEvent]:
    """The bounded-size events that hold ``count`` pending responses (taken one part at a time, so
    a stream of them is never held whole): ``pending`` alone when they are at most PART_CASES;
    else the pending event with the first part (``count`` all of them) followed by a
    ``responses.pending_added`` per further part, each part at most PART_CASES responses and
    about PART_BYTES bytes. Append them in one batch: all parts or none. A reader knows there
    are parts when ``count`` is more than the pending event holds (``held_responses``)."""
    held = (held_response(r) for r in responses)
    if count <= PART_CASES:
        yield _pending_head(ref, list(held), count, source, causation)
        return
    parts = _sized_parts(held)
    head = _pending_head(ref, next(parts, []), count, source, causation)
    yield head
    for number, part in enumerate(parts, start=1):
        data = {"benchmark": ref, "sha256": source["sha256"], "part": number, "responses": part}
        yield NewEvent(head.stream, "responses.pending_added", data, key=f"{head.key}:responses:{number}",
                       meta=head.meta)


def _sized_parts(held: Iterable[dict]) -> Iterator[list[dict]]:
    """``held`` in lists of at most PART_CASES responses and about PART_BYTES bytes of JSON (a
    single response larger than that is a part of its own), made as they are taken."""
    return sized_batches(held, lambda r: len(json.dumps(r, ensure_ascii=False)), PART_BYTES, PART_CASES)


def held_responses(head: dict, parts: Iterable[dict]) -> Iterator[ParsedResponse]:
    """Every response a pending event ``head`` holds, in file order: its own, then those of its
    ``responses.pending_added`` payloads ``parts`` (taken in part order, one at a time; a pending
    event with no parts, as every old home's, needs none)."""
    for r in head.get("responses") or []:
        yield ParsedResponse(r["question_id"], r["model"], r["text"], r["where"])
    if head.get("count", 0) <= len(head.get("responses") or []):
        return
    expected = 1
    for part in parts:
        if part.get("sha256") != head.get("sha256"):
            continue
        assert part["part"] == expected, "a pending file's parts are appended in order, in its batch"
        expected += 1
        for r in part["responses"]:
            yield ParsedResponse(r["question_id"], r["model"], r["text"], r["where"])


def resolution_rejected(bench: dict, source: dict, problems: list[Problem], causation: str) -> NewEvent:
    """Pending responses that turned out not to fit their benchmark: no case is opened for any."""
    data = {"benchmark": bench["benchmark"], "benchmark_name": bench["name"], "pending": False,
            "file": source["file"], "sha256": source["sha256"], "count": 0, "cases": [],
            "resolved_from": causation, "rejected": True, "errors": error_list(problems)}
    return NewEvent(f"benchmark:{bench['benchmark']}", "responses.registered", data,
                    key=f"responses:{source['sha256']}", meta=meta(causation))
