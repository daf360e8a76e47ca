"""A large responses JSONL file that is not plainly valid, checked line by line for the errors its
rejection shows (issue 15: flat ingest memory; bad input never hangs us).

``intake_lines`` takes a plainly valid file from its spool and says None at the first problem.
Read whole, a file of a hundred thousand bad lines held every line parsed and every problem found
(4 MB of bad lines: 186 MB, ~6 s) to show the first MAX_ERRORS of them. ``line_problems`` reads the
spool once more, a line at a time, and finds the very problems the whole read finds
(``formats.parse``), keeping the first MAX_ERRORS in line order and counting the rest
(``intake_events.FirstProblems``). The whole read names every line that is not JSON; then, when
some line is not a response (or names another benchmark), every such line, else every repeated
(question, model) pair: both lists are kept as the file goes by, and the end decides. Whatever it
cannot tell the same way (no problem at all: then a size or a question decides; a line not UTF-8;
a first line that is not a response line) is left to the whole read, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalledger.stages.formats import FileRejected, jsonl_kind, line_order
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.errors import Problems
from evalledger.stages.formats.native import repeated, response_line
from evalledger.stages.formats.stream import NotStreamable
from evalledger.stages.intake_events import FirstProblems
from evalledger.stages.intake_lines import text_lines
from evalledger.stages.intake_seen import FirstAnswers


@dataclass
class _Check:
    """The two rejections a responses JSONL file may get, found a line at a time."""

    answers: FirstAnswers
    refs: dict[str, int] = field(default_factory=dict)
    checked: FirstProblems = field(default_factory=FirstProblems)   # bad JSON, bad responses
    repeats: FirstProblems = field(default_factory=FirstProblems)   # bad JSON, repeated pairs
    bad_response: bool = False
    lines: int = 0

    def line(self, number: int, text: str) -> None:
        """Check line ``number`` (its ``text``) as ``formats.parse`` does."""
        self.lines += 1
        try:
            row: Any = loads(text, where=f"line {number}: $", line_offset=number - 1)
        except FileRejected as exc:
            found = sorted(exc.problems, key=line_order)
            self.checked.extend(found)
            self.repeats.extend(found)
            return
        problems = Problems()
        response = response_line(number, row, self.refs, problems)
        if problems:
            self.bad_response = True
            self.checked.extend(sorted(problems.items, key=line_order))
        elif response is not None and not self.bad_response:    # repeats are named only then
            earlier = self.answers.earlier(response.question_id, response.model, response.where)
            if earlier is not None:
                self.repeats.extend([repeated(response, earlier)])

    def rejection(self) -> FirstProblems | None:
        """The problems the whole read rejects the file with; None when it finds none."""
        found = self.checked if self.bad_response else self.repeats
        return found or None


def line_problems(spool: Path, folder: Path) -> FirstProblems | None:
    """The problems ``formats.parse`` rejects the responses JSONL file at ``spool`` with, the first
    MAX_ERRORS kept and the rest counted (scratch files in ``folder``); None when it finds none, or
    when the file is not one whose problems it finds as the whole read does (then read it whole)."""
    with open(spool, "rb") as fh, FirstAnswers(folder) as answers:
        lines = text_lines(fh)
        try:
            first = next(lines, None)
            if first is None or not _response_lines(first[1]):
                return None
            check = _Check(answers)
            check.line(*first)
            more = False      # text after the first line: else the whole file may be one JSON value
            for number, text in lines:
                more = more or bool(text.strip())
                check.line(number, text)
        except NotStreamable:    # not UTF-8: the whole read names the first bad byte
            return None
    return check.rejection() if more else None


def _response_lines(text: str) -> bool:
    """True when ``text``, a file's first non-blank line, makes ``formats.parse`` read the file as
    response lines (``formats.decode.first_json_line``, then ``formats.jsonl_kind``)."""
    try:
        first = loads(text)
    except FileRejected:
        return False
    return isinstance(first, dict) and jsonl_kind(first) == "responses"
