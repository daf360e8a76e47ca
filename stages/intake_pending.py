"""Responses that arrive before their benchmark: which wait, and the events that resolve them.

A pending file is held in the ledger as its pending ``responses.registered`` event and, past
``intake_events.PART_CASES`` responses, ``responses.pending_added`` parts (issue 15: bounded
events). Resolving it never holds its responses whole: they are copied, a part at a time, to a
spill file before the resolving batch begins (so nothing reads the ledger while that batch is
being appended), then read from it three times: to check every question id, to list the case
ids (``responses_parts``), and to open the cases. The benchmark's questions are looked up in
something that answers ``in`` and ``get`` (a dict, or ``intake_lines.SpilledQuestions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator, Protocol

import orjson

from evalledger.ledger import Event, Ledger, NewEvent, canonical_json
from evalledger.stages import intake_events as ev
from evalledger.stages.formats.ids import case_id
from evalledger.stages.formats.model import ParsedResponse


class Questions(Protocol):
    """A benchmark's questions by id."""

    def __contains__(self, question_id: object) -> bool: ...

    def get(self, question_id: str) -> dict | None: ...


def pending_responses(led: Ledger) -> list[Event]:
    """Pending ``responses.registered`` events that no benchmark has resolved yet."""
    held, resolved = [], set()
    for event in led.read(types=["responses.registered"]):
        if _opened_only(event):
            continue
        if event.data.get("pending"):
            held.append(event)
        elif event.data.get("resolved_from"):
            resolved.add(event.data["resolved_from"])
    return [e for e in held if e.id not in resolved]


def _opened_only(event: Event) -> bool:
    """True for a record that neither waits nor resolved a pending file, seen in its stored bytes
    without decoding them: a big benchmark's record lists 100,000 case ids. (Canonical JSON: in a
    string a quote is escaped, so these two exact pieces are fields.)"""
    raw = event.raw_data
    if isinstance(raw, str):
        return '"pending":false' in raw and '"resolved_from":null' in raw
    return b'"pending":false' in raw and b'"resolved_from":null' in raw


def pending_for(led: Ledger, bench: dict) -> list[Event]:
    """The pending responses that name this benchmark (by id or by name)."""
    return [e for e in pending_responses(led) if e.data["benchmark"] in (bench["benchmark"], bench["name"])]


def held_responses(led: Ledger, held: Event) -> Iterator[ParsedResponse]:
    """Every response the pending event ``held`` keeps, in file order, its parts read one at a
    time (a pending event of every old home holds them all itself)."""
    parts = (e.data for e in led.read(types=["responses.pending_added"], stream=held.stream))
    return ev.held_responses(held.data, parts)


@dataclass
class HeldSpill:
    """A pending file's responses copied to ``path`` (``[question id, model, text, where]`` a
    line), read back as many times as its resolution needs."""

    held: Event
    path: Path

    @classmethod
    def of(cls, led: Ledger, held: Event, folder: Path) -> HeldSpill:
        """Copy the responses of ``held`` (a part at a time) to a new file in ``folder``."""
        path = folder / f"held-{held.data['sha256']}.jsonl"
        with open(path, "wb") as out:
            for r in held_responses(led, held):
                out.write(canonical_json([r.question_id, r.model, r.response, r.where]) + b"\n")
        return cls(held, path)

    def responses(self) -> Iterator[ParsedResponse]:
        """The responses, in file order."""
        with open(self.path, "rb") as fh:
            for line in fh:
                qid, model, text, where = orjson.loads(line)
                yield ParsedResponse(qid, model, text, where)


def resolution(bench: dict, questions: Questions, spill: HeldSpill) -> tuple[NewEvent, Iterable[NewEvent]]:
    """The events that resolve the pending file ``spill`` holds against the benchmark ``bench``
    (its record: id, name, kind, config), all cases or none: the first (what became of them:
    rejected when any response names a question ``questions`` lacks) and the rest (its case ids
    in bounded parts, then its ``case.opened`` events, made as they are appended)."""
    held = spill.held
    source = {"file": held.data["file"], "sha256": held.data["sha256"]}
    problems = ev.response_problems(bench, spill.responses(), questions)
    if problems:
        return ev.resolution_rejected(bench, source, problems, held.id), ()
    ids = (case_id(bench["benchmark"], r.question_id, r.model, r.response) for r in spill.responses())
    record = ev.responses_parts(bench, source, ids, held.data["count"], held.id, resolved_from=held.id)
    first = next(record)
    return first, chain(record, _cases(bench, questions, spill, source))


def _cases(bench: dict, questions: Questions, spill: HeldSpill, source: dict) -> Iterator[NewEvent]:
    """The ``case.opened`` of each held response, one at a time (each case id made again: cheaper
    than holding 100,000 of them through the batch)."""
    for r in spill.responses():
        question = questions.get(r.question_id)
        assert question is not None, "the checking pass found every question"
        cid = case_id(bench["benchmark"], r.question_id, r.model, r.response)
        yield ev.case_opened(bench, r, question, source, spill.held.id, cid)
