"""A native benchmark file taken in from disk in bounded memory (issue 15: flat ingest memory).

``read_native`` reads the file once, item by item (``formats.stream``), and checks each question
and response as ``formats.native.read_benchmark`` does; what it keeps goes to two spill files
beside the spooled input: the questions as canonical JSON (with their offsets) and the
responses as canonical JSON lines. ``SpilledBenchmark.events`` then makes, from the spills, the
very events (byte for byte) that intake makes from a file read whole, one at a time as
``Ledger.append_many`` takes them. Only the question ids (to find a response's question) and the
case ids of one part of ``responses.registered`` (``intake_events.PART_CASES``) are held at once.

This path only says yes: a file it does not take as plainly valid (any problem at all) gives
None, and intake reads the file whole as before, so every error stays as it was. A later version
of a registered name is compared with the latest one a part at a time (``intake_lineage``).
"""

from __future__ import annotations

import hashlib
import json
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Iterator, Protocol, TypeVar

import orjson
from pydantic import ValidationError

from evalledger.ledger import Ledger, NewEvent, canonical_json
from evalledger.stages import intake_events as ev
from evalledger.stages import intake_lineage
from evalledger.stages.formats import native
from evalledger.stages.formats.checks import check_config
from evalledger.stages.formats.ids import case_id
from evalledger.stages.formats.model import ParsedResponse
from evalledger.stages.formats.stream import NotStreamable, read_document
from evalledger.stages.intake_seen import SeenPairs
from evalledger.stages.limits import DEFAULT_MAX_RESPONSE_CHARS

_ARRAYS = frozenset({"questions", "responses"})
_QUESTION_CACHE = 1024   # questions kept parsed: a file's responses mostly follow their question


@dataclass
class SpilledBenchmark:
    """A native benchmark file checked item by item, its questions and responses on disk."""

    folder: Path
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS
    top: dict[str, Any] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)     # question id -> its number
    starts: array = field(default_factory=lambda: array("q", [0]))   # question n's spill offset
    parts: list[int] = field(default_factory=lambda: [0])   # the first question of each part
    part_size: int = 0
    warnings: list[dict[str, str]] = field(default_factory=list)
    responses: int = 0
    benchmark: str = ""
    config: dict = field(default_factory=dict)
    name: str = ""
    description: str = ""
    lineage: dict = field(default_factory=dict)   # a later version's (``version_lineage``), set before ``events``
    # Responses over the size limit (the first kept): a file otherwise plainly valid is rejected
    # with them, as the whole read rejects it, without being read whole.
    oversized: ev.FirstProblems = field(default_factory=ev.FirstProblems)

    @property
    def question_count(self) -> int:
        """How many questions the file holds (each spilled at an offset in ``starts``)."""
        return len(self.starts) - 1

    @property
    def questions_path(self) -> Path:
        """The questions' spill: each question's canonical JSON, back to back."""
        return self.folder / "questions.json"

    @property
    def responses_path(self) -> Path:
        """The responses' spill: ``[question id, model, text]`` a line, as read; once the whole
        file is checked, ``[question number, question id, model, text]`` (``_number_responses``)."""
        return self.folder / "responses.jsonl"

    def take(self, fh: IO[bytes]) -> None:
        """Read and check the whole file ``fh``; NotStreamable when it is not plainly valid."""
        with open(self.questions_path, "wb") as questions, open(self.responses_path, "wb") as responses, \
                SeenPairs(self.folder) as seen:
            items = read_document(fh, _ARRAYS)
            if next(items, None) != ("format", None, native.BENCHMARK_FORMAT):
                raise NotStreamable("not a native benchmark with its format first")
            self.top["format"] = native.BENCHMARK_FORMAT
            for key, number, item in items:
                if number is None:
                    self.top[key] = item
                elif number < 0:
                    self.top[key] = []
                elif key == "questions":
                    self._question(number, item, questions)
                else:
                    self._response(number, item, responses, seen)
        self._check_whole()

    def _question(self, number: int, item: Any, out: IO[bytes]) -> None:
        """Check one question as ``read_benchmark`` does, and spill it."""
        try:
            question = native.Question.model_validate(item).model_dump(mode="json")
        except ValidationError:
            raise NotStreamable(f"question {number} does not validate") from None
        where = f"$.questions[{number}]"
        if question["id"] in self.index or native.check_question(question, where):
            raise NotStreamable(f"question {number} has a problem")
        self.index[question["id"]] = number
        self.warnings += ev.question_warnings(number, question)
        self._cut(number, len(json.dumps(question, ensure_ascii=False, default=str)))
        out.write(canonical_json(question))
        self.starts.append(out.tell())

    def _cut(self, number: int, weight: int) -> None:
        """Start a new part at question ``number`` where ``intake_events.question_parts`` does."""
        count = number - self.parts[-1]
        if count and (count >= ev.PART_QUESTIONS or self.part_size + weight > ev.PART_BYTES):
            self.parts.append(number)
            self.part_size = 0
        self.part_size += weight

    def _response(self, number: int, item: Any, out: IO[bytes], seen: SeenPairs) -> None:
        """Check one response as ``read_benchmark`` and intake's size limit do, and spill it."""
        try:
            valid = native.Response.model_validate(item)
        except ValidationError:
            raise NotStreamable(f"response {number} does not validate") from None
        if len(valid.text) > self.max_response_chars:
            self.oversized.extend([ev.oversized(f"$.responses[{number}]", len(valid.text), self.max_response_chars)])
        seen.add(valid.question_id, valid.model)     # on disk: a set of pairs grows ~70 bytes a response
        out.write(canonical_json([valid.question_id, valid.model, valid.text]) + b"\n")
        self.responses += 1

    def _check_whole(self) -> None:
        """What only the whole file shows: the document's shape, the config, every response's
        question; then the benchmark id (over the config and every question, in order)."""
        if not self.index or len(self.index) > 100_000 or "questions" not in self.top:
            raise NotStreamable("no questions, or too many")
        shell = {**self.top, "questions": [None]}
        if "responses" in self.top:
            shell["responses"] = []
        try:
            bench = native._BenchmarkShell.model_validate(shell)
        except ValidationError:
            raise NotStreamable("the document's shape") from None
        if check_config(bench.config):
            raise NotStreamable("the config")
        self._number_responses()
        self.name, self.description, self.config = bench.name, bench.description, dict(bench.config)
        self.benchmark = self._benchmark_id()

    def _number_responses(self) -> None:
        """Rewrite the responses' spill with each response's question number for its id (a
        response may come before its question in the file), then drop what only the check needed:
        the question ids are most of what this class holds."""
        numbered = self.folder / "responses.numbered.jsonl"
        with open(numbered, "wb") as out:
            for qid, model, text in self._responses():
                if qid not in self.index:
                    raise NotStreamable("a response names an unknown question")
                out.write(canonical_json([self.index[qid], qid, model, text]) + b"\n")
        numbered.replace(self.responses_path)
        self.index = {}

    def _benchmark_id(self) -> str:
        """``formats.ids.benchmark_id`` computed over the spilled questions (canonical JSON of
        ``{"config", "kind", "name", "questions"}``, keys sorted)."""
        digest = hashlib.sha256(b'{"config":' + canonical_json(self.config) + b',"kind":"template","name":'
                                + canonical_json(self.name) + b',"questions":[')
        with open(self.questions_path, "rb") as fh:
            for n in range(len(self.starts) - 1):
                digest.update(b"," if n else b"")
                digest.update(fh.read(self.starts[n + 1] - self.starts[n]))
        digest.update(b"]}")
        return digest.hexdigest()[:16]

    def _responses(self) -> Iterator[list]:
        """``[question id, model, text]`` of each response, in file order."""
        with open(self.responses_path, "rb") as fh:
            for line in fh:
                yield orjson.loads(line)

    def _questions(self, first: int, stop: int, fh: IO[bytes]) -> list[dict]:
        """Questions ``first`` to ``stop`` (excluded), from the spill."""
        fh.seek(self.starts[first])
        return [orjson.loads(fh.read(self.starts[n + 1] - self.starts[n])) for n in range(first, stop)]

    def question_parts(self) -> Iterator[list[dict]]:
        """The questions, a part (of its registration) at a time, from the spill."""
        bounds = [*self.parts, len(self.starts) - 1]
        with open(self.questions_path, "rb") as fh:
            for number in range(len(self.parts)):
                yield self._questions(bounds[number], bounds[number + 1], fh)

    def version_lineage(self, led: Ledger) -> dict:
        """This benchmark's place among the versions of its name (``intake_lineage``); ``{}`` for a
        first version. Its question ids (dropped after the check) are read back from the spill only
        when there is an earlier version, and each question is looked up there by number."""
        latest = intake_lineage.latest_version(led, self.name, "template")
        if latest[1] is None:
            return {}
        numbers = {question["id"]: number for number, question in
                   enumerate(q for part in self.question_parts() for q in part)}
        with open(self.questions_path, "rb") as fh:
            return intake_lineage.lineage(led, latest, numbers,
                                          lambda qid: self._questions(numbers[qid], numbers[qid] + 1, fh)[0])

    def record(self) -> dict:
        """What ``case.opened`` and ``responses.registered`` need of the registration."""
        return {"benchmark": self.benchmark, "name": self.name, "kind": "template", "config": self.config}

    def events(self, source: dict, received: NewEvent) -> Iterator[NewEvent]:
        """The file's events after ``received``, as ``intake._accept_benchmark`` makes them for
        the same file read whole: the registration (its parts), then its responses and cases."""
        with open(self.questions_path, "rb") as fh:
            yield from self._registration(source, received.id, fh)
            if self.responses:
                yield from self._cases(source, received.id, fh)

    def _registration(self, source: dict, causation: str, fh: IO[bytes]) -> Iterator[NewEvent]:
        """``benchmark.registered`` and, past one part, its ``benchmark.questions_added``."""
        bounds = [*self.parts, len(self.starts) - 1]
        data = {"benchmark": self.benchmark, "name": self.name, "kind": "template", "format": "benchmark",
                "config": self.config, "questions": self._questions(bounds[0], bounds[1], fh), "source": source,
                "rejected_questions": [], "rejected_traits": [],
                **({"description": self.description} if self.description else {})}
        if self.warnings:
            data["warnings"] = self.warnings
        data.update(self.lineage)
        if len(self.parts) > 1:
            data = {**data, "question_count": self.question_count, "question_parts": len(self.parts)}
        stream, meta = f"benchmark:{self.benchmark}", ev.meta(causation)
        yield NewEvent(stream, "benchmark.registered", data, key=self.benchmark, meta=meta)
        for number in range(1, len(self.parts)):
            part = {"benchmark": self.benchmark, "part": number,
                    "questions": self._questions(bounds[number], bounds[number + 1], fh)}
            yield NewEvent(stream, "benchmark.questions_added", part, key=f"{self.benchmark}:questions:{number}",
                           meta=meta)

    def _cases(self, source: dict, causation: str, fh: IO[bytes]) -> Iterator[NewEvent]:
        """``responses.registered`` (every case id), then a ``case.opened`` per response."""
        record = self.record()

        @lru_cache(maxsize=_QUESTION_CACHE)
        def question(number: int) -> dict:
            return self._questions(number, number + 1, fh)[0]

        # The case ids a part at a time (bounded-size events), and each case's id made again below
        # (cheaper than holding 100,000 of them through the whole batch).
        yield from ev.responses_parts(record, source, (case_id(self.benchmark, qid, model, text)
                                                       for _, qid, model, text in self._responses()),
                                      self.responses, causation)
        for n, (number, qid, model, text) in enumerate(self._responses()):
            response = ParsedResponse(qid, model, text, f"$.responses[{n}]")
            cid = case_id(self.benchmark, qid, model, text)
            yield ev.case_opened(record, response, question(number), source, causation, cid)


def read_native(spool: Path, folder: Path, max_response_chars: int) -> SpilledBenchmark | None:
    """The native benchmark file at ``spool`` checked and spilled into ``folder``; None when it is
    not plainly valid (or not a native benchmark): then read it whole."""
    return taken(SpilledBenchmark(folder, max_response_chars), spool)


class _Taker(Protocol):
    def take(self, fh: IO[bytes]) -> None: ...


T = TypeVar("T", bound=_Taker)


def taken(spilled: T, spool: Path) -> T | None:
    """``spilled`` once it has taken the file at ``spool``; None when that file is not plainly valid."""
    try:
        with open(spool, "rb") as fh:
            spilled.take(fh)
    except NotStreamable:
        return None
    return spilled
