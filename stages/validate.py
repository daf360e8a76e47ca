"""Check a file as intake would, writing nothing: ``evalledger validate``.

Every check of ``stages.intake`` runs (size, encoding, JSON, the format's rules, the response
size limit, response question ids against a registered benchmark) and the outcome is an
``IngestResult`` with the messages ``ingest`` would print. Nothing is appended and no file moves,
so fixing a file by trial and error leaves no permanent rejection behind.

A large file is read as ingest reads it: through a private copy in the system's temporary
folder, a native benchmark item by item and a responses JSONL file line by line, so validating a
file takes no more memory than ingesting it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from evalledger.ledger import Event, Ledger, event_id
from evalledger.stages import intake_events as ev
from evalledger.stages import intake_spool
from evalledger.stages.formats import FileRejected, Problem, parse
from evalledger.stages.intake import (
    DEFAULT_MAX_BYTES,
    IngestResult,
    _count,
    find_benchmark,
    recorded_name,
    response_size_problems,
)
from evalledger.stages.intake_read import FileRead, read_once
from evalledger.stages.intake_spooled import REJECTED, WAITING, Spooled, read_spooled
from evalledger.stages.limits import DEFAULT_MAX_RESPONSE_CHARS


def validate_path(led: Ledger | None, path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES,
                  max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
                  spool_above: int | None = None) -> IngestResult:
    """What ``ingest`` would make of the file at ``path``: ``valid``, ``known``, ``pending`` or ``rejected``.

    ``led`` (opened read-only is enough) answers which benchmarks exist and which bytes were
    seen; without one, responses are checked as far as they can be and said to wait. A file over
    ``spool_above`` bytes (ingest's default when None) is read as ingest reads it, in bounded memory.
    """
    path = Path(path)
    name = recorded_name(path)
    read = read_once(path, max_bytes, spool_above)   # one read, bounded: the bytes checked are the bytes hashed
    try:
        if read.over_limit:
            return _rejected(name, read.sha256, read.size, [_too_large(read.size, max_bytes)])
        if read.spool is not None:
            return _validate_spooled(led, read, name, max_bytes, max_response_chars)
        assert read.raw is not None
        return validate_bytes(led, read.raw, name, max_bytes=max_bytes, max_response_chars=max_response_chars)
    finally:
        if read.spool is not None:
            read.spool.unlink(missing_ok=True)


def validate_bytes(led: Ledger | None, raw: bytes, name: str, *, max_bytes: int = DEFAULT_MAX_BYTES,
                   max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> IngestResult:
    """What ``ingest`` would make of ``raw`` under the file name ``name``; nothing is written."""
    sha = hashlib.sha256(raw).hexdigest()
    if len(raw) > max_bytes:
        return _rejected(name, sha, len(raw), [_too_large(len(raw), max_bytes)])
    known = _known(led, name, sha)
    if known is not None:
        return known
    try:
        parsed = parse(raw, name)
    except FileRejected as exc:
        return _rejected(name, sha, len(raw), exc.problems)
    oversized = response_size_problems(parsed.responses, max_response_chars)
    if oversized:
        return _rejected(name, sha, len(raw), oversized)
    if parsed.benchmark is not None:
        bench = parsed.benchmark
        bid, registered = ev.registered(bench, {"file": name, "sha256": sha}, parsed.format, ev.file_event_id(sha))
        result = _valid_benchmark(led, name, sha, parsed.format, bid, bench.name, len(bench.questions),
                                  len(parsed.responses))
        result.untranslated = [p.as_dict() for p in bench.rejected_questions + bench.rejected_traits]
        result.warnings = list(registered.data.get("warnings") or [])  # what ingest would print
        return result
    bench = find_benchmark(led, parsed.benchmark_ref) if led is not None else None
    if bench is None:
        return _waiting(name, sha, parsed.format, parsed.benchmark_ref, len(parsed.responses))
    problems = ev.response_problems(bench, parsed.responses)
    if problems:
        return _rejected(name, sha, len(raw), problems)
    return _valid_responses(name, sha, parsed.format, bench, len(parsed.responses))


def _validate_spooled(led: Ledger | None, read: FileRead, name: str, max_bytes: int,
                      max_response_chars: int) -> IngestResult:
    """``validate_bytes`` for a large file read into a spool, taking the paths ingest's
    ``_ingest_spooled`` takes: a plainly valid native benchmark or responses JSONL file is checked
    from disk, a JSONL file of bad lines a line at a time; any other file is read whole."""
    assert read.spool is not None
    known = _known(led, name, read.sha256)
    if known is not None:
        return known
    with tempfile.TemporaryDirectory(prefix=intake_spool.prefix(intake_spool.SPILL)) as scratch:
        found = read_spooled(led, read.spool, Path(scratch), max_response_chars)
        found.close()
        said = _spooled_result(led, found, name, read)
    if said is not None:
        return said
    # a format read whole
    return validate_bytes(led, read.whole(), name, max_bytes=max_bytes, max_response_chars=max_response_chars)


def _spooled_result(led: Ledger | None, found: Spooled, name: str, read: FileRead) -> IngestResult | None:
    """What validate says of a spool ``read_spooled`` looked at (None: the file is read whole)."""
    if found.kind == REJECTED:
        return _rejected(name, read.sha256, read.size, found.problems)
    if found.spilled is not None:
        spilled = found.spilled
        result = _valid_benchmark(led, name, read.sha256, "benchmark", spilled.benchmark, spilled.name,
                                  spilled.question_count, spilled.responses)
        result.warnings = list(spilled.warnings)
        return result
    if found.lines is not None and found.kind == WAITING:
        return _waiting(name, read.sha256, "responses", found.lines.benchmark_ref, found.lines.count)
    if found.lines is not None and found.head is not None:
        return _valid_responses(name, read.sha256, "responses", found.head.data, found.lines.count)
    return None


def _known(led: Ledger | None, name: str, sha: str) -> IngestResult | None:
    """``known`` when the home has received these bytes before (ingest would add nothing)."""
    known: Event | None = led.get(event_id(f"file:{sha}", "file.received", sha)) if led is not None else None
    if known is None:
        return None
    data = known.data
    return IngestResult(name, sha, "known", data.get("format"), data.get("benchmark"), data.get("benchmark_name"),
                        notes=[f"(same bytes as seq {known.seq}: ingest would add nothing)"])


def _valid_benchmark(led: Ledger | None, name: str, sha: str, format: str, bid: str, bench_name: str,
                     questions: int, responses: int) -> IngestResult:
    """A benchmark file ingest would accept, with its counts (and whether it is registered already)."""
    result = IngestResult(name, sha, "valid", format, bid, bench_name,
                          notes=[f"({_count(questions, 'question')}, {_count(responses, 'response')})"])
    if led is not None and led.stream_version(f"benchmark:{bid}"):
        result.notes.append("(this benchmark is already registered)")
    return result


def _valid_responses(name: str, sha: str, format: str, bench: dict, responses: int) -> IngestResult:
    """A responses file ingest would accept for the registered benchmark ``bench``."""
    return IngestResult(name, sha, "valid", format, bench["benchmark"], bench["name"],
                        notes=[f"({_count(responses, 'response')})"])


def _waiting(name: str, sha: str, format: str, ref: str | None, responses: int) -> IngestResult:
    """Responses ingest would hold until their benchmark is registered."""
    return IngestResult(name, sha, "pending", format, None, ref,
                        notes=[f"(valid; its {responses} responses would wait for benchmark {ref!r}, "
                               "which is not registered)"])


def _too_large(size: int, max_bytes: int) -> Problem:
    return Problem("$", f"the file is {size} bytes, over the limit of {max_bytes} bytes")


def _rejected(name: str, sha: str, size: int, problems) -> IngestResult:
    """The rejection ingest would record, with the same capped error list, not appended."""
    errors = ev.rejected(name, sha, size, problems).data["errors"]
    return IngestResult(name, sha, "rejected", errors=list(errors))
