"""What a large file's spool holds, decided once for ingest and for validate.

A file too large to read whole is spooled to disk (``intake_read``). ``read_spooled`` looks at the
spool as ingest does: a plainly valid native benchmark (read item by item), a responses JSONL file
(line by line) that fits its registered benchmark, waits for it, or does not fit it, a JSONL file
of bad lines (its problems found a line at a time), or a file to read whole. Ingest then commits
what was found and validate says what ingest would do: one decision, so the two cannot disagree
(they once did: validate had no response size check on this path).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalledger.ledger import Event, Ledger, event_id
from evalledger.stages import intake_bad_lines, intake_lines, intake_stream
from evalledger.stages import intake_events as ev

#: what ``read_spooled`` found: a native benchmark, responses that fit a registered benchmark,
#: responses waiting for theirs, a file rejected with its problems, or one to read whole
BENCHMARK, RESPONSES, WAITING, REJECTED, WHOLE = "benchmark", "responses", "waiting", "rejected", "whole"


@dataclass
class Spooled:
    """What a spool holds (``kind``), with what ingest needs to commit it. ``close()`` releases
    the registered questions spilled for a responses file (the caller's folder holds the rest)."""

    kind: str
    spilled: intake_stream.SpilledBenchmark | None = None
    lines: intake_lines.SpilledResponses | None = None
    head: Event | None = None
    questions: intake_lines.SpilledQuestions | None = None
    problems: Any = None

    def close(self) -> None:
        """Close the spilled questions, if any were opened."""
        if self.questions is not None:
            self.questions.close()


def read_spooled(led: Ledger | None, spool: Path, folder: Path, max_response_chars: int) -> Spooled:
    """Decide what the spooled file ``spool`` is, spilling what it reads into ``folder``.

    ``led`` None (validate without a home): responses always wait, no benchmark being registered.
    Problems are found in the order the whole read finds them: a response over the size limit
    before anything is looked up in the home.
    """
    spilled = intake_stream.read_native(spool, folder, max_response_chars)
    if spilled is not None:
        return Spooled(REJECTED, problems=spilled.oversized) if spilled.oversized else Spooled(BENCHMARK, spilled)
    lines = intake_lines.read_response_lines(spool, folder, max_response_chars)
    if lines is None:
        problems = intake_bad_lines.line_problems(spool, folder)
        return Spooled(REJECTED, problems=problems) if problems else Spooled(WHOLE)
    if lines.oversized:
        return Spooled(REJECTED, problems=lines.oversized)
    head = find_registration(led, lines.benchmark_ref) if led is not None else None
    if head is None:
        return Spooled(WAITING, lines=lines)
    assert led is not None
    questions = intake_lines.registered_questions(led, head, folder)
    try:
        if lines.fits(head.data, questions):
            return Spooled(RESPONSES, lines=lines, head=head, questions=questions)
        # responses that do not fit their benchmark: the errors the whole read finds, a line at a time
        unfit = ev.FirstProblems(ev.unfit_responses(head.data, lines.responses(), questions))
    except BaseException:
        questions.close()
        raise
    questions.close()
    return Spooled(REJECTED, problems=unfit) if unfit else Spooled(WHOLE)


def find_registration(led: Ledger, ref: str | None) -> Event | None:
    """The ``benchmark.registered`` event a responses file names (its parts not joined): by id,
    else the latest with that name."""
    if ref is None:
        return None
    by_id = led.get(event_id(f"benchmark:{ref}", "benchmark.registered", ref))
    if by_id is not None:
        return by_id
    latest = None
    for event in led.read(types=["benchmark.registered"]):
        if event.data["name"] == ref:
            latest = event
    return latest
