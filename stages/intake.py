"""Benchmark intake: a file becomes ``file.received``, ``benchmark.registered``,
``responses.registered`` and ``case.opened`` events in one atomic batch, or one
``benchmark.rejected`` event and nothing else.

The content hash (sha256 of the bytes) decides "known": the same bytes are ingested once.
Responses naming a benchmark that is not registered yet are kept pending (in the ledger, so a
restart loses nothing) and open their cases in the batch that registers that benchmark.
From the inbox, a file is moved only after its events committed: after a crash it is simply
ingested again, which is a no-op. The file itself is read once by ``intake_read`` and filed away
by ``intake_files``; this module decides what its events are.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator

from evalledger.ledger import Event, Ledger, NewEvent, event_id
from evalledger.ledger.api import CHUNK_BYTES
from evalledger.ledger.persistence import Recorder
from evalledger.stages import intake_events as ev
from evalledger.stages import (
    intake_files,
    intake_lineage,
    intake_lines,
    intake_pending,
    intake_spool,
    intake_stream,
)
from evalledger.stages.formats import FileRejected, ParsedFile, ParsedResponse, Problem, parse
from evalledger.stages.intake_pending import HeldSpill, pending_for, pending_responses  # noqa: F401 (re-exported)
from evalledger.stages.intake_read import FileRead, read_once
from evalledger.stages.intake_spooled import REJECTED, WHOLE, find_registration, read_spooled
from evalledger.stages.limits import (  # noqa: F401 (the limit is re-exported: callers import it from here)
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_RESPONSE_CHARS,
    MAX_RESPONSE_CHARS_LIMIT,
)
from evalledger.stages.printable import escape_unprintable, shown_name


@dataclass
class IngestResult:
    """What happened to one file. ``status``: accepted | known | rejected | pending."""

    file: str
    sha256: str
    status: str
    format: str | None = None
    benchmark: str | None = None
    benchmark_name: str | None = None
    cases_opened: int = 0
    errors: list[dict] = field(default_factory=list)
    untranslated: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    moved_to: Path | None = None
    filing_error: str | None = None   # committed, but the move to processed/ or rejected/ failed

    @property
    def ok(self) -> bool:
        return self.status != "rejected"

    def line(self) -> str:
        """One line for the command line: status, file, and what it became."""
        parts = [f"{self.status:<8} {shown_name(self.file)}"]
        if self.format:
            parts.append(self.format)
        if self.benchmark_name or self.benchmark:
            parts.append(f"benchmark {escape_unprintable(self.benchmark_name or '')} "
                         f"({self.benchmark or 'not registered yet'})")
        if self.status in ("accepted", "known"):
            parts.append(f"{_count(self.cases_opened, 'new case')}")
        if self.errors:
            parts.append(_count(len(self.errors), "error"))
        if self.filing_error:
            parts.append(f"({self.filing_error})")
        return "  ".join(parts + [escape_unprintable(note) for note in self.notes])

    def error_lines(self) -> list[str]:
        """``file: where: reason`` for every error (what the .error.txt holds), then every
        untranslated part of an accepted Karenina checkpoint, then every load-time warning. Names,
        places and reasons are escaped (``stages.printable``): a newline in a file name cannot
        forge a line."""
        name = shown_name(self.file)
        return ([f"{name}: {escape_unprintable(e['where'])}: {escape_unprintable(e['reason'])}" for e in self.errors]
                + [f"{name}: not translated: {escape_unprintable(e['where'])}: {escape_unprintable(e['reason'])}"
                   for e in self.untranslated]
                + [f"{name}: warning: {escape_unprintable(w['where'])}: {escape_unprintable(w['reason'])}"
                   for w in self.warnings])


def _count(n: int, noun: str) -> str:
    """``1 question``, ``2 questions``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


SPILLED_CHUNK_BYTES = 1_000_000
# Pending parts are about intake_events.PART_BYTES each: one a chunk (two, held as validated dicts
# too, made a 100,000-response file's peak 20 MB higher than a one-event file's).
HELD_CHUNK_BYTES = 1     # (any event is at least a byte)


def ingest_path(led: Ledger, path: str | os.PathLike, *, from_inbox: bool = False,
                max_bytes: int = DEFAULT_MAX_BYTES,
                max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
                collection: str | None = None, spool_above: int | None = None) -> IngestResult:
    """Ingest one file; from the inbox it then moves to processed/ or rejected/.

    The file is read once (``read_once``); what is filed away is what was read: a file replaced
    in the inbox while it was ingested stays there, to be ingested on its own. ``collection``
    names the reconstruction collection of documents that do not name their own (the CLI passes
    the folder a file was ingested with); a file from a folder dropped into the inbox gets that
    folder's name. A file over ``spool_above`` bytes (default ``SPOOL_ABOVE``) is read through a
    private copy on disk (``read_once``), and a native benchmark among them item by item.
    """
    path = Path(path)
    if collection is None and from_inbox and led.home is not None \
            and path.resolve().parent.parent == (Path(led.home) / "inbox").resolve():
        collection = path.parent.name
    name = recorded_name(path)
    spool_dir = _spool_folder(led)
    if spool_dir is not None:   # what a killed ingest left there (the system's temporary folder is the OS's)
        intake_spool.remove_leftovers(spool_dir)
    read = read_once(path, max_bytes, spool_above, spool_dir)
    try:
        return _ingest_read(led, path, read, name, from_inbox, max_bytes, max_response_chars, collection)
    finally:
        if read.spool is not None:
            read.spool.unlink(missing_ok=True)


def _spool_folder(led: Ledger) -> Path | None:
    """Where large files are spooled: the home's processed/ (the same disk as what it holds),
    else the system's temporary folder."""
    return None if led.home is None else Path(led.home) / "processed"


def _ingest_read(led: Ledger, path: Path, read: FileRead, name: str, from_inbox: bool, max_bytes: int,
                 max_response_chars: int, collection: str | None) -> IngestResult:
    """``ingest_path`` once the file is read: its events, then filing it away."""
    if read.over_limit:
        problems = [Problem("$", f"the file is {read.size} bytes, over the limit of {max_bytes} bytes")]
        result = _reject(led, name, read.sha256, read.size, problems)
    elif read.spool is not None:
        result = _ingest_spooled(led, read, name, max_response_chars, collection)
    else:
        assert read.raw is not None
        result = ingest_bytes(led, read.raw, name, sha=read.sha256, max_response_chars=max_response_chars,
                              collection=collection)
    if led.home is not None:
        try:
            rejection = _rejection_note(result) if result.status == "rejected" else None
            result.moved_to = intake_files.file_away(Path(led.home), path, read, from_inbox, rejection)
        except OSError as exc:
            # The events are committed: say so, and that filing it away is what is left to do.
            where = "it stays in the inbox" if from_inbox else "processed/ has no copy yet"
            result.filing_error = (f"its events are committed, but filing it away failed "
                                   f"({exc.strerror or exc}): {where}; ingesting it again finishes that")
        if from_inbox and collection is not None:
            intake_files.drop_empty_folder(path.parent)
    return result


def _rejection_note(result: IngestResult) -> list[str]:
    """The lines of a rejected file's ``.error.txt``: which file (its hash), then its errors."""
    return [f"{shown_name(result.file)}: rejected (sha256 {result.sha256})", *result.error_lines()]


def _ingest_spooled(led: Ledger, read: FileRead, name: str, max_response_chars: int,
                    collection: str | None) -> IngestResult:
    """Ingest a large file from its spool: a plainly valid native benchmark item by item
    (``intake_stream``) or responses JSONL line by line (``intake_lines``), the same events in
    bounded memory; any other file read whole."""
    assert read.spool is not None
    known = led.get(ev.file_event_id(read.sha256))
    if known is not None:   # as ingest_bytes says it, without reading the file into memory
        result = _known(led, known)
        if result.ok:
            resolve_pending(led)
        return result
    spill = intake_spool.prefix(intake_spool.SPILL)
    with tempfile.TemporaryDirectory(dir=read.spool.parent, prefix=spill) as folder:
        found = read_spooled(led, read.spool, Path(folder), max_response_chars)
        try:
            if found.kind == REJECTED:   # its errors found as the whole read finds them, in bounded memory
                return _reject(led, name, read.sha256, read.size, found.problems)
            if found.kind != WHOLE:
                _keep_spooled(led, read)
                if found.spilled is not None:
                    found.spilled.lineage = found.spilled.version_lineage(led)
                    result = _accept_spilled(led, found.spilled, name, read)
                elif found.head is None:   # responses waiting for their benchmark
                    assert found.lines is not None
                    result = _hold_lines(led, found.lines, name, read)
                else:
                    assert found.lines is not None and found.questions is not None
                    result = _accept_lines(led, found.lines, found.head.data, found.questions, name, read)
                resolve_pending(led)
                return result
        finally:
            found.close()
    return ingest_bytes(led, read.whole(), name, sha=read.sha256, max_response_chars=max_response_chars,
                        collection=collection)


def _keep_spooled(led: Ledger, read: FileRead) -> None:
    """Keep a spooled file's bytes in a store that keeps files (read whole only for that store)."""
    if type(led.recorder).keep_file is not Recorder.keep_file:
        led.keep_file(read.sha256, read.whole())


def _accept_lines(led: Ledger, lines: intake_lines.SpilledResponses, bench: dict,
                  questions: intake_lines.SpilledQuestions, name: str, read: FileRead) -> IngestResult:
    """``_accept`` for a responses JSONL file spilled to disk: the same events and result."""
    source = {"file": name, "sha256": read.sha256}
    received = ev.file_received(name, read.sha256, read.size, "responses", "accepted", bench["benchmark"],
                                bench["name"])
    result = IngestResult(name, read.sha256, "accepted", "responses", bench["benchmark"], bench["name"])
    return _commit(led, chain([received], lines.events(bench, questions, source, received)), result, SPILLED_CHUNK_BYTES)


def _accept_spilled(led: Ledger, spilled: intake_stream.SpilledBenchmark, name: str,
                    read: FileRead) -> IngestResult:
    """``_accept_benchmark`` for a native benchmark spilled to disk: the same events and result."""
    source = {"file": name, "sha256": read.sha256}
    received = ev.file_received(name, read.sha256, read.size, "benchmark", "accepted", spilled.benchmark,
                                spilled.name)
    result = IngestResult(name, read.sha256, "accepted", "benchmark", spilled.benchmark, spilled.name)
    result.warnings = list(spilled.warnings)
    if spilled.lineage:
        result.notes.append(_version_note(led, {**spilled.record(), **spilled.lineage}))
    events = chain([received], spilled.events(source, received))
    waiting = pending_for(led, spilled.record())
    if not waiting:
        # Smaller chunks than the default: a chunk's events are held as dicts too (several times
        # their bytes), and a registration's parts would fill a default chunk with ~8,000 questions.
        return _commit(led, events, result, SPILLED_CHUNK_BYTES)
    questions = intake_lines.SpilledQuestions(spilled.question_parts(), spilled.folder / "registered.json")
    try:
        resolving, notes = _resolving(led, spilled.record(), waiting, questions, spilled.folder)
        result.notes += notes
        return _commit(led, chain(events, resolving), result, SPILLED_CHUNK_BYTES)
    finally:
        questions.close()


def _hold_lines(led: Ledger, lines: intake_lines.SpilledResponses, name: str, read: FileRead) -> IngestResult:
    """``_accept``'s pending responses for a responses JSONL file spilled to disk: the same events
    (in bounded parts) and result."""
    ref = lines.benchmark_ref
    received = ev.file_received(name, read.sha256, read.size, "responses", "pending", None, ref)
    held = ev.pending_parts(ref, lines.responses(), lines.count, {"file": name, "sha256": read.sha256},
                            received.id)
    result = IngestResult(name, read.sha256, "pending", "responses", None, ref,
                          notes=[f"({lines.count} responses wait for benchmark {ref!r})"])
    return _commit(led, chain([received], held), result, HELD_CHUNK_BYTES)


def recorded_name(path: Path) -> str:
    """The file name as events can hold it: bytes that are not UTF-8 (Python keeps them as
    surrogates, which canonical JSON refuses) become U+FFFD, so such a name cannot stop intake."""
    return os.fsencode(path.name).decode("utf-8", "replace")


def ingest_bytes(led: Ledger, raw: bytes, name: str, *, sha: str | None = None,
                 max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
                 collection: str | None = None) -> IngestResult:
    """Ingest one file's bytes under the file name ``name`` (no file is moved); a response longer
    than ``max_response_chars`` rejects the file; ``collection`` as for ``ingest_path``."""
    sha = sha or hashlib.sha256(raw).hexdigest()
    known = led.get(event_id(f"file:{sha}", "file.received", sha))
    if known is not None:
        result = _known(led, known)
    else:
        try:
            parsed = parse(raw, name)
        except FileRejected as exc:
            return _reject(led, name, sha, len(raw), exc.problems)
        oversized = response_size_problems(parsed.responses, max_response_chars)
        if oversized:
            return _reject(led, name, sha, len(raw), oversized)
        if collection and parsed.format == "reconstruction" and parsed.benchmark is not None:
            for question in parsed.benchmark.questions:  # a collection named in the file wins
                question.setdefault("collection", collection)
        # The bytes go first: once the events commit, any machine sharing the store can open the file.
        led.keep_file(sha, raw)
        result = _accept(led, parsed, name, sha, len(raw))
    if result.ok:
        resolve_pending(led)
    return result


def response_size_problems(responses: list[ParsedResponse], max_chars: int) -> list[Problem]:
    """A problem for every response longer than ``max_chars`` characters (a reconstruction
    response counts the characters of all its texts)."""
    problems = []
    for response in responses:
        size = _characters(response.response)
        if size > max_chars:
            problems.append(ev.oversized(response.where, size, max_chars))
    return problems


def _characters(value: object) -> int:
    """The characters of every string in a response (text, or reconstruction answers)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_characters(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_characters(v) for v in value)
    return 0


def _known(led: Ledger, event: Event) -> IngestResult:
    """The earlier outcome of these bytes; pending responses show the benchmark that resolved them."""
    data = event.data
    result = IngestResult(data["file"], data["sha256"], "known", data.get("format"), data.get("benchmark"),
                          data.get("benchmark_name"), notes=[f"(same bytes as seq {event.seq})"])
    if data.get("status") == "pending":
        held = event_id(f"file:{data['sha256']}", "responses.registered", f"pending:{data['sha256']}")
        resolved = next((e for e in led.read(types=["responses.registered"])
                         if e.data.get("resolved_from") == held), None)
        if resolved is None:
            result.notes.append("(still waiting for its benchmark)")
        else:
            result.benchmark, result.benchmark_name = resolved.data["benchmark"], resolved.data["benchmark_name"]
    return result


def _reject(led: Ledger, name: str, sha: str, size: int,
            problems: Iterable[Problem] | ev.FirstProblems) -> IngestResult:
    """Append the file's ``benchmark.rejected`` event (its first errors: ``intake_events.error_list``)."""
    [stored] = led.append([ev.rejected(name, sha, size, problems)])
    return IngestResult(name, sha, "rejected", errors=list(stored.data["errors"]))


def _accept(led: Ledger, parsed: ParsedFile, name: str, sha: str, size: int) -> IngestResult:
    """Build the file's whole batch and append it at once."""
    source = {"file": name, "sha256": sha}
    if parsed.benchmark is not None:
        return _accept_benchmark(led, parsed, source, size)
    ref = parsed.benchmark_ref
    assert ref is not None, "a file that defines no benchmark names the one it answers"
    bench = find_benchmark(led, ref)
    if bench is None:
        received = ev.file_received(name, sha, size, parsed.format, "pending", None, ref)
        held = ev.pending_parts(ref, parsed.responses, len(parsed.responses), source, received.id)
        return _commit(led, chain([received], held), IngestResult(
            name, sha, "pending", parsed.format, None, ref,
            notes=[f"({len(parsed.responses)} responses wait for benchmark {ref!r})"]), HELD_CHUNK_BYTES)
    problems = ev.response_problems(bench, parsed.responses)
    if problems:
        return _reject(led, name, sha, size, problems)
    received = ev.file_received(name, sha, size, parsed.format, "accepted", bench["benchmark"], bench["name"])
    batch = chain([received], _opened(bench, parsed.responses, source, received.id))
    return _commit(led, batch, IngestResult(name, sha, "accepted", parsed.format, bench["benchmark"], bench["name"]))


def _opened(bench: dict, responses: list[ParsedResponse], source: dict, causation: str,
            resolved_from: str | None = None) -> Iterator[NewEvent]:
    """The ``responses.registered`` of ``responses`` and then their ``case.opened`` events, made
    one at a time as the append takes them (``Ledger.append_many``)."""
    ids = ev.case_ids(bench, responses)
    yield from ev.responses_parts(bench, source, ids, len(ids), causation, resolved_from)
    yield from ev.case_events(bench, responses, source, causation, ids)


def _accept_benchmark(led: Ledger, parsed: ParsedFile, source: dict, size: int) -> IngestResult:
    """A file that defines a benchmark: register it, open its own cases and any pending ones."""
    bench = parsed.benchmark
    assert bench is not None, "called for a file that defines a benchmark"
    bid, registered = ev.registered(bench, source, parsed.format, ev.file_event_id(source["sha256"]),
                                    lineage=version_lineage(led, bench.name, bench.kind, bench.questions))
    received = ev.file_received(source["file"], source["sha256"], size, parsed.format, "accepted", bid, bench.name)
    record = registered.data
    parts: list[Iterable[NewEvent]] = [[received, *ev.registration_events(registered)]]
    if parsed.responses:
        parts.append(_opened(record, parsed.responses, source, received.id))
    result = IngestResult(source["file"], source["sha256"], "accepted", parsed.format, bid, bench.name)
    if record.get("version"):
        result.notes.append(_version_note(led, record))
    waiting = pending_for(led, record)
    # a spill folder only when pending responses wait: most benchmarks resolve none
    with spill_folder(led) if waiting else contextlib.nullcontext("") as folder:
        resolving, notes = _resolving(led, record, waiting, {q["id"]: q for q in record["questions"]}, Path(folder))
        result.notes += notes
        result.untranslated = [p.as_dict() for p in bench.rejected_questions + bench.rejected_traits]
        result.warnings = list(record.get("warnings") or [])
        if result.untranslated:
            result.notes.append(f"({_count(len(bench.rejected_questions), 'question')} and "
                                f"{_count(len(bench.rejected_traits), 'trait')} not translated; the rest is registered)")
        return _commit(led, chain(chain.from_iterable(parts), resolving), result)


def _resolving(led: Ledger, record: dict, waiting: list[Event], questions: intake_pending.Questions,
               folder: Path) -> tuple[Iterator[NewEvent], list[str]]:
    """The events that resolve the pending responses ``waiting`` for the benchmark ``record``
    (``pending_for``; its questions by id in ``questions``), to append in the batch that registers
    it, and what its line says of them. Their responses are spilled into ``folder`` first: consume
    the events before leaving it."""
    resolutions = [intake_pending.resolution(record, questions, HeldSpill.of(led, held, folder)) for held in waiting]
    return chain.from_iterable(chain([first], rest) for first, rest in resolutions), \
        _resolution_notes(waiting, resolutions)


def _version_note(led: Ledger, record: dict) -> str:
    """'(version 2 of NAME: 1 changed (q3), 1 added (q7); N responses of earlier versions: rebind)'."""
    changes = record["changes"]
    parts = [f"{len(changes[k])} {k} ({', '.join(changes[k][:5])}{', ...' if len(changes[k]) > 5 else ''})"
             for k in ("changed", "added", "removed") if changes[k]]
    earlier = sum(1 for e in led.read(types=["case.opened"]) if e.data.get("benchmark_name") == record["name"]
                  and e.data.get("benchmark") != record["benchmark"])
    tail = (f"; {earlier} responses of earlier versions stay with them: evalledger rebind {record['name']!r} "
            f"judges them against this one") if earlier else ""
    return f"(version {record['version']} of {record['name']!r}: {', '.join(parts) or 'same questions'}{tail})"


def _resolution_notes(waiting: list[Event], resolutions: list[tuple[NewEvent, Iterable[NewEvent]]]) -> list[str]:
    """What the benchmark's line says about the pending files it resolved: taken in, or rejected
    now (a rejection would otherwise show only in ``status``, the benchmark itself being fine)."""
    taken = [held.data["file"] for held, (first, _) in zip(waiting, resolutions) if not first.data.get("rejected")]
    notes = [f"(including the responses of {_count(len(taken), 'pending file')}: "
             f"{', '.join(map(shown_name, taken))})"] if taken else []
    for held, (first, _) in zip(waiting, resolutions):
        errors = first.data.get("errors") or []
        if first.data.get("rejected") and errors:
            first = errors[0]
            notes.append(f"(pending file {shown_name(held.data['file'])} rejected: {_count(len(errors), 'error')}, "
                         f"first {first['where']}: {first['reason']})")
    return notes


def _commit(led: Ledger, batch: Iterable[NewEvent], result: IngestResult,
            chunk_bytes: int = CHUNK_BYTES) -> IngestResult:
    """Append the batch atomically, a chunk at a time (``Ledger.append_many``: a file of any size
    is one all-or-nothing batch without being held whole, one chunk of at most ``chunk_bytes``
    bytes of payload at a time), and count the cases it newly opened."""
    found: list[Event] = []

    def seen(event: Event, new: bool) -> None:
        if event.type == "case.opened" and new:
            result.cases_opened += 1
        elif event.type == "benchmark.registered" and not new and not found:
            found.append(event)

    led.append_many(batch, seen, chunk_bytes=chunk_bytes)
    earlier = found[0] if found else None
    if earlier is not None:
        result.benchmark_name = earlier.data["name"]
        result.notes.append(f"(benchmark already registered at seq {earlier.seq})")
    return result


# --- benchmarks and pending responses ------------------------------------------------------------

def version_lineage(led: Ledger, name: str, kind: str, questions: list[dict]) -> dict:
    """Where a benchmark named ``name`` with ``questions`` stands among the versions registered
    before it (``intake_lineage``); ``{}`` for a first version."""
    after = {q["id"]: q for q in questions}
    return intake_lineage.lineage(led, intake_lineage.latest_version(led, name, kind), after, after.__getitem__)


def registered_benchmarks(led: Ledger) -> Iterator[Event]:
    """Every ``benchmark.registered`` event, in ledger order, each with all its questions (those of
    its ``benchmark.questions_added`` parts joined in; one benchmark's held at a time)."""
    for event in led.read(types=["benchmark.registered"]):
        yield whole_benchmark(led, event)


def whole_benchmark(led: Ledger, event: Event) -> Event:
    """A ``benchmark.registered`` event with the questions of its parts joined into its data."""
    if (event.data.get("question_parts") or 1) == 1:
        return event
    parts = (e.data for e in led.read(types=["benchmark.questions_added"], stream=event.stream))
    return Event(event.seq, event.id, event.stream, event.version, event.type, event.schema, None, None,
                 event.prev_hash, event.hash, data=ev.whole_registration(event.data, parts), meta=event.meta)


def find_benchmark(led: Ledger, ref: str | None) -> dict | None:
    """The registered benchmark a responses file names: by id, else the latest with that name."""
    event = find_registration(led, ref)
    return None if event is None else whole_benchmark(led, event).data


def resolve_pending(led: Ledger) -> int:
    """Open the cases of pending responses whose benchmark is now registered; returns how many.

    The registering batch already does this; running it again after every file closes the race
    where responses and their benchmark are ingested at the same time by two processes. The
    benchmark's questions and the held responses are spilled to disk first (``intake_pending``):
    a batch of any size is resolved in bounded memory.
    """
    opened = 0
    for held in pending_responses(led):
        head = find_registration(led, held.data["benchmark"])
        if head is None:
            continue
        with spill_folder(led) as name:
            folder = Path(name)
            questions = intake_lines.registered_questions(led, head, folder)
            try:
                first, rest = intake_pending.resolution(head.data, questions, HeldSpill.of(led, held, folder))
                result = IngestResult(held.data["file"], held.data["sha256"], "accepted")
                _commit(led, chain([first], rest), result, SPILLED_CHUNK_BYTES)
            finally:
                questions.close()
        opened += result.cases_opened
    return opened


def spill_folder(led: Ledger) -> tempfile.TemporaryDirectory[str]:
    """A private folder for spill files, removed when left: in the home's processed/ (the same disk
    as what it holds), else the system's temporary folder."""
    folder = _spool_folder(led)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=folder, prefix=intake_spool.prefix(intake_spool.SPILL))


def case_source(led: Ledger, case_id: str) -> tuple[str, str, bytes | None]:
    """(file name, sha256, bytes) of the file case ``case_id`` was opened from; the bytes are
    None when neither the store nor this home keeps them (ingested by an evalledger that did not)."""
    opened = next(led.read(types=["case.opened"], stream=f"case:{case_id}"), None)
    if opened is None:
        raise LookupError(f"no case {case_id!r} in this ledger")
    source = opened.data.get("source") or {}
    sha = str(source.get("sha256"))
    return str(source.get("file")), sha, led.file_bytes(sha) or _replayed_source_bytes(led, sha)


def _replayed_source_bytes(led: Ledger, sha256: str) -> bytes | None:
    """In a replay's home, the bytes of an input file from the home it replayed: a replay copies the
    inputs' events, not the files (None when this is no replay, or the source is gone or lacks them)."""
    from evalledger import ledger
    first = next(iter(led.read(to_seq=1)), None)
    if first is None or first.type != "replay.started" or not isinstance(first.data.get("source"), str):
        return None
    try:
        with ledger.open_ledger(first.data["source"], readonly=True) as source:
            return source.file_bytes(sha256)
    except (ledger.LedgerError, OSError):
        return None
