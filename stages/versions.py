"""Re-bind the responses of earlier versions of a benchmark to its latest version: ``evalledger rebind``.

A fixed ground truth makes a new version (a new benchmark id). The responses already ingested
stay with the version they were judged against; ``rebind`` opens, for each of them whose
question the latest version still has, a case of the latest version with the same response, and
records that it did so (``responses.registered`` with ``rebound_from``). Case ids come from the
benchmark, question, model and response, so running it twice opens nothing new.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator

import orjson

from evalledger.ledger import Event, Ledger, NewEvent, canonical_json, event_id
from evalledger.stages import intake_events as ev
from evalledger.stages.formats import ParsedResponse
from evalledger.stages.formats.ids import case_id
from evalledger.stages.intake import spill_folder
from evalledger.stages.intake_lines import SpilledQuestions, registered_questions


class RebindError(LookupError):
    """No benchmark of that name, or nothing to re-bind it from."""


@dataclass
class RebindResult:
    """What ``rebind`` did: the latest version, and per earlier version what moved and what could not."""

    name: str
    latest: str
    version: int
    opened: int = 0
    already: int = 0
    dropped: list[str] = field(default_factory=list)      # "question q3 (model m): not in the latest version"
    sources: list[str] = field(default_factory=list)      # the earlier benchmark ids taken from


def rebind(led: Ledger, name: str) -> RebindResult:
    """Open the responses of every earlier version of ``name`` as cases of its latest version.

    Memory does not grow with the benchmark: the registrations are read without their parts
    joined, the latest version's questions and each earlier version's responses wait in spill
    files, and the cases are appended as ONE batch a chunk at a time (``Ledger.append_many``)."""
    versions: dict[str, Event] = {}   # benchmark id -> its registration (its first part of questions)
    for event in led.read(types=["benchmark.registered"]):
        if event.data["name"] == name or event.data["benchmark"] == name:
            versions[event.data["benchmark"]] = event
    if not versions:
        raise RebindError(f"no benchmark named {name!r} in this ledger")
    head = list(versions.values())[-1]
    latest = head.data
    kinds = {v.data["kind"] for v in versions.values()}
    if len(versions) == 1:
        raise RebindError(f"{latest['name']!r} has one version; nothing to re-bind")
    if len(kinds) > 1:
        raise RebindError(f"benchmarks named {latest['name']!r} are of different kinds ({', '.join(sorted(kinds))}); "
                          "they are not versions of one another")
    result = RebindResult(latest["name"], latest["benchmark"], latest.get("version") or 1)
    cause = event_id(f"benchmark:{latest['benchmark']}", "benchmark.registered", latest["benchmark"])
    with spill_folder(led) as folder:
        questions = registered_questions(led, head, Path(folder))
        try:
            batches = []
            for number, old_id in enumerate(list(versions)[:-1]):
                kept = _spill_responses(led, old_id, questions, Path(folder) / f"responses-{number}.jsonl", result)
                if kept:
                    result.sources.append(old_id)
                    batches.append(_rebound(latest, old_id, kept, questions, cause))
            if batches:
                _append_counted(led, chain.from_iterable(batches), result)
        finally:
            questions.close()
    return result


@dataclass
class _Kept:
    """An earlier version's responses to re-bind, one JSON line each in ``path``."""

    path: Path
    count: int

    def rows(self) -> Iterator[list]:
        """[question id, model, response, earlier case id] of each response, in order."""
        with open(self.path, "rb") as fh:
            for line in fh:
                yield orjson.loads(line)


def _spill_responses(led: Ledger, old_id: str, questions: SpilledQuestions, path: Path,
                     result: RebindResult) -> _Kept | None:
    """Spill the distinct responses of benchmark ``old_id`` whose question the latest version
    has into ``path``; note in ``result`` those it has not. None when none is kept."""
    seen: set[bytes] = set()   # 16 bytes of a digest a response, not its text
    count = 0
    with open(path, "wb") as out:
        for event in led.read(types=["case.opened"]):
            d = event.data
            if d.get("benchmark") != old_id:
                continue
            key = hashlib.sha256(canonical_json([d["question_id"], d.get("model"), d["response"]])).digest()[:16]
            if key in seen:
                continue
            seen.add(key)
            if d["question_id"] not in questions:
                result.dropped.append(f"question {d['question_id']} (model {d.get('model')}): not in the latest version")
                continue
            out.write(canonical_json([d["question_id"], d.get("model"), d["response"], d["case_id"]]) + b"\n")
            count += 1
    return _Kept(path, count) if count else None


def _rebound(latest: dict, old_id: str, kept: _Kept, questions: SpilledQuestions, cause: str) -> Iterator[NewEvent]:
    """The events that open ``kept`` as cases of ``latest``: the record (``rebound_from`` in its
    first event, its case ids a part at a time), then a ``case.opened`` per response."""
    digest = hashlib.sha256(f"rebind:{old_id}->{latest['benchmark']}".encode()).hexdigest()
    source = {"file": f"rebind of {old_id}", "sha256": digest}
    ids = (case_id(latest["benchmark"], qid, model, text) for qid, model, text, _ in kept.rows())
    record = ev.responses_parts(latest, source, ids, kept.count, cause)
    first = next(record)
    yield replace(first, data={**first.data, "rebound_from": old_id})
    yield from record
    for qid, model, text, old_case in kept.rows():
        response = ParsedResponse(qid, model, text, f"case {old_case}")
        yield ev.case_opened(latest, response, questions.get(qid), source, cause,
                             case_id(latest["benchmark"], qid, model, text))


def _append_counted(led: Ledger, events: Iterable[NewEvent], result: RebindResult) -> None:
    """Append ``events`` as one batch; count in ``result`` the cases opened and those already there."""
    def seen(event: Event, new: bool) -> None:
        if event.type == "case.opened":
            if new:
                result.opened += 1
            else:
                result.already += 1

    led.append_many(events, seen)
