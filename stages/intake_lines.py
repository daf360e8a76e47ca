"""A responses JSONL file taken in from its spool line by line (issue 15: flat ingest memory).

``read_response_lines`` reads the spooled file once, a line at a time, checks each line as
``formats.native.read_responses_lines`` does and spills what it keeps to a file beside the spool
(``[question id, model, text, line number]`` a line). ``SpilledResponses.events`` then makes,
from the spill, the very events (byte for byte) that intake makes from the file read whole, one
at a time as ``Ledger.append_many`` takes them. Nothing per response is held in memory: a
repeated (question, model) pair is found on disk (``intake_seen``).

Like ``intake_stream``, this path only says yes: a file with a bad line or a repeated pair gives
None, and intake finds its errors as the whole read does (``intake_bad_lines``, or the file read
whole), so every error (file, line and reason) stays as it was, and nothing is appended. Two
rejections are found here, in the whole read's words and order: responses over the size limit
(``SpilledResponses.oversized``, before anything else is looked at) and, in intake, responses
naming questions the registered benchmark lacks (``intake_events.unfit_responses``). A file whose benchmark is not registered yet is held pending from the
spill (``intake_events.pending_parts``), in bounded parts.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, cast

import orjson
from pydantic import ValidationError

from evalledger.ledger import Event, Ledger, NewEvent, canonical_json
from evalledger.stages import intake_events as ev
from evalledger.stages import intake_lineage
from evalledger.stages.formats import native
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.errors import FileRejected
from evalledger.stages.formats.ids import case_id
from evalledger.stages.formats.model import ParsedResponse
from evalledger.stages.formats.stream import NotStreamable
from evalledger.stages.intake_seen import SeenPairs
from evalledger.stages.intake_stream import taken

_BOM = b"\xef\xbb\xbf"
_SPACE = " \t\r"                   # JSON's whitespace within a line (formats.decode._JSON_SPACE)
_RESPONSE_KEYS = {"question_id", "model", "text"}
_QUESTION_CACHE = 1024             # questions kept parsed: a file's responses mostly follow their question
_OTHER_KEYS = {"tag", "model_output", "context_input"}   # an audit line (formats._AUDIT_KEYS)


@dataclass
class SpilledResponses:
    """A responses JSONL file checked line by line, its responses on disk."""

    folder: Path
    max_response_chars: int
    benchmark_ref: str = ""
    count: int = 0
    # Responses over the size limit (the first kept): a file otherwise plainly valid is rejected
    # with them, as the whole read rejects it, without being read whole.
    oversized: ev.FirstProblems = field(default_factory=ev.FirstProblems)

    @property
    def spill_path(self) -> Path:
        """The responses' spill: ``[question id, model, text, line number]`` a line, in file order."""
        return self.folder / "lines.jsonl"

    def take(self, fh: IO[bytes]) -> None:
        """Read and check the whole file ``fh``; NotStreamable when it is not plainly valid."""
        with SeenPairs(self.folder) as seen, open(self.spill_path, "wb") as out:
            for number, row in _rows(fh):
                seen.add(*self._line(number, row, out))
        if self.count < 2:
            raise NotStreamable("fewer than two lines: the file may be read as one document")

    def _line(self, number: int, row: Any, out: IO[bytes]) -> tuple[str, str | None]:
        """Check one response line and spill it; its (question id, model) pair."""
        if not isinstance(row, dict) or (not self.count and (not _RESPONSE_KEYS & row.keys()
                                                             or _OTHER_KEYS & row.keys()
                                                             or {"doc_id", "original_claims"} <= row.keys())):
            raise NotStreamable(f"line {number} is not a response line")
        try:
            line = native.ResponseLine.model_validate(row)
        except ValidationError:
            raise NotStreamable(f"line {number} does not validate") from None
        if self.count and line.benchmark != self.benchmark_ref:
            raise NotStreamable(f"line {number} names another benchmark")
        if len(line.text) > self.max_response_chars:
            self.oversized.extend([ev.oversized(f"line {number}", len(line.text), self.max_response_chars)])
        self.benchmark_ref = line.benchmark
        self.count += 1
        out.write(canonical_json([line.question_id, line.model, line.text, number]) + b"\n")
        return line.question_id, line.model

    def responses(self) -> Iterator[ParsedResponse]:
        """Every response, in file order, from the spill."""
        with open(self.spill_path, "rb") as fh:
            for raw in fh:
                qid, model, text, number = orjson.loads(raw)
                yield ParsedResponse(qid, model, text, f"line {number}")

    def fits(self, bench: dict, questions: SpilledQuestions) -> bool:
        """True when every response names a question of the registered benchmark ``bench``."""
        return bench["kind"] != "reconstruction" and all(r.question_id in questions for r in self.responses())

    def events(self, bench: dict, questions: SpilledQuestions, source: dict,
               received: NewEvent) -> Iterator[NewEvent]:
        """The file's events after ``received``, as ``intake._accept`` makes them for the same file
        read whole: its ``responses.registered`` (in parts), then a ``case.opened`` per response."""
        ids = (case_id(bench["benchmark"], r.question_id, r.model, r.response) for r in self.responses())
        yield from ev.responses_parts(bench, source, ids, self.count, received.id)
        for r in self.responses():
            cid = case_id(bench["benchmark"], r.question_id, r.model, r.response)
            yield ev.case_opened(bench, r, questions.get(r.question_id), source, received.id, cid)


class SpilledQuestions:
    """A benchmark's questions in a spill file, found by id (taken a part at a time, not joined:
    a 50,000-question benchmark is ~100 MB as Python objects). ``registered_questions`` makes
    one from a registration's events."""

    def __init__(self, parts: Iterable[list[dict]], path: Path) -> None:
        self.path = path
        self.index: dict[str, int] = {}                     # question id -> its number
        self.starts = array("q", [0])                       # question n's offset in the spill
        with open(self.path, "wb") as out:
            for part in parts:
                for question in part:
                    self.index[question["id"]] = len(self.starts) - 1
                    out.write(canonical_json(question))
                    self.starts.append(out.tell())
        self._fh = open(self.path, "rb")
        self.get = lru_cache(maxsize=_QUESTION_CACHE)(self._read)

    def __contains__(self, question_id: object) -> bool:
        return question_id in self.index

    def _read(self, question_id: str) -> dict:
        """The question ``question_id``, from the spill."""
        number = self.index[question_id]
        self._fh.seek(self.starts[number])
        return cast(dict, orjson.loads(self._fh.read(self.starts[number + 1] - self.starts[number])))

    def close(self) -> None:
        """Close the spill (the caller's folder removes it)."""
        self._fh.close()


def registered_questions(led: Ledger, head: Event, folder: Path) -> SpilledQuestions:
    """The questions of the registration ``head`` (a ``benchmark.registered`` event, its parts
    not joined) spilled into ``folder``."""
    return SpilledQuestions(intake_lineage.registration_parts(led, head), folder / "questions.json")


def _rows(fh: IO[bytes]) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line, as ``formats.decode.parse_jsonl`` numbers
    them; NotStreamable at the first line that is not UTF-8 or not one JSON value."""
    for number, line in text_lines(fh):
        if not line.lstrip(_SPACE).startswith("{"):
            raise NotStreamable(f"line {number} is not an object")
        try:
            yield number, loads(line)
        except FileRejected:
            raise NotStreamable(f"line {number} is not one JSON value") from None


def text_lines(fh: IO[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of a JSONL file, numbered and cut as
    ``formats.decode.parse_jsonl`` does (a leading BOM and each line ending dropped);
    NotStreamable at the first line that is not UTF-8."""
    for number, raw in enumerate(fh, start=1):
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise NotStreamable(f"line {number} is not UTF-8") from None
        if line.strip(_SPACE):
            yield number, line


def read_response_lines(spool: Path, folder: Path, max_response_chars: int) -> SpilledResponses | None:
    """The responses JSONL file at ``spool`` checked and spilled into ``folder``; None when it is
    not plainly valid (or not a responses JSONL file): then read it whole."""
    return taken(SpilledResponses(folder, max_response_chars), spool)
