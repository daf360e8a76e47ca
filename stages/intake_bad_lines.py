"""A large responses JSONL file that is not plainly valid, checked line by line for the errors its
rejection shows (issue 15: flat ingest memory; bad input never hangs us).

``intake_lines`` takes a plainly valid file from its spool and says None at the first problem.
Read whole, a file of a million bad lines held every line parsed and every problem found (4 MB of
bad lines took 6 s and 190 MB) to show the first MAX_ERRORS of them. ``line_problems`` reads the
spool once more, a line at a time, and finds the very problems the whole read finds
(``formats.parse``: each line's JSON, then its response, then its benchmark; in line order), keeping
the first MAX_ERRORS and counting the rest (``intake_events.FirstProblems``). Whatever it cannot
tell the same way (no problem at all: then a repeat, a size or a question decides; a line not
UTF-8; a first line that is not a response line) is left to the whole read, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalledger.stages.formats import FileRejected, Problem, jsonl_kind, line_order
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.errors import Problems
from evalledger.stages.formats.native import response_line
from evalledger.stages.formats.stream import NotStreamable
from evalledger.stages.intake_events import FirstProblems
from evalledger.stages.intake_lines import text_lines


def line_problems(spool: Path) -> FirstProblems | None:
    """The problems ``formats.parse`` rejects the responses JSONL file at ``spool`` with, the first
    MAX_ERRORS kept and the rest counted; None when it finds none, or when the file is not one
    whose problems it finds as the whole read does (then read it whole)."""
    found, refs = FirstProblems(), {}
    with open(spool, "rb") as fh:
        lines = text_lines(fh)
        try:
            first = next(lines, None)
            if first is None or not _response_lines(first[1]):
                return None
            found.extend(_problems(*first, refs))
            more = False      # a line after the first: else the whole file may be one JSON value
            for number, text in lines:
                more = more or bool(text.strip())
                found.extend(_problems(number, text, refs))
        except NotStreamable:    # not UTF-8: the whole read names the first bad byte
            return None
    return found if found and more else None


def _response_lines(text: str) -> bool:
    """True when ``text``, a file's first non-blank line, makes ``formats.parse`` read the file as
    response lines (``formats.decode.first_json_line``, then ``formats.jsonl_kind``)."""
    try:
        first = loads(text)
    except FileRejected:
        return False
    return isinstance(first, dict) and jsonl_kind(first) == "responses"


def _problems(number: int, text: str, refs: dict[str, int]) -> list[Problem]:
    """The problems of line ``number`` (its ``text``) in the order the whole read shows them:
    its JSON's (``formats.decode.parse_jsonl``), else its response's (``native.response_line``)."""
    try:
        row: Any = loads(text, where=f"line {number}: $", line_offset=number - 1)
    except FileRejected as exc:
        return sorted(exc.problems, key=line_order)
    problems = Problems()
    response_line(number, row, refs, problems)
    return sorted(problems.items, key=line_order)
