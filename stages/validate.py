"""Check a file as intake would, writing nothing: ``evalledger validate``.

Every check of ``stages.intake`` runs (size, encoding, JSON, the format's rules, response
question ids against a registered benchmark) and the outcome is an ``IngestResult`` with the
messages ``ingest`` would print. Nothing is appended and no file moves, so fixing a file by
trial and error leaves no permanent rejection behind.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from evalledger.ledger import Ledger, event_id
from evalledger.stages import intake_events as ev
from evalledger.stages.formats import FileRejected, Problem, parse
from evalledger.stages.intake import DEFAULT_MAX_BYTES, _count, IngestResult, find_benchmark, recorded_name


def validate_path(led: Ledger | None, path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> IngestResult:
    """What ``ingest`` would make of the file at ``path``: ``valid``, ``known``, ``pending`` or ``rejected``.

    ``led`` (opened read-only is enough) answers which benchmarks exist and which bytes were
    seen; without one, responses are checked as far as they can be and said to wait.
    """
    path = Path(path)
    name = recorded_name(path)
    with open(path, "rb") as handle:  # one read, bounded: the bytes checked are the bytes hashed
        size = os.fstat(handle.fileno()).st_size
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        sha = hashlib.sha256(raw).hexdigest()
        return _rejected(name, sha, size, [Problem("$", f"the file is {max(size, len(raw))} bytes, over the "
                                                        f"limit of {max_bytes} bytes")])
    return validate_bytes(led, raw, name, max_bytes=max_bytes)


def validate_bytes(led: Ledger | None, raw: bytes, name: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> IngestResult:
    """What ``ingest`` would make of ``raw`` under the file name ``name``; nothing is written."""
    sha = hashlib.sha256(raw).hexdigest()
    if len(raw) > max_bytes:
        return _rejected(name, sha, len(raw), [Problem("$", f"the file is {len(raw)} bytes, over the limit of "
                                                             f"{max_bytes} bytes")])
    if led is not None:
        known = led.get(event_id(f"file:{sha}", "file.received", sha))
        if known is not None:
            data = known.data
            return IngestResult(name, sha, "known", data.get("format"), data.get("benchmark"),
                                data.get("benchmark_name"), notes=[f"(same bytes as seq {known.seq}: "
                                                                   f"ingest would add nothing)"])
    try:
        parsed = parse(raw, name)
    except FileRejected as exc:
        return _rejected(name, sha, len(raw), exc.problems)
    if parsed.benchmark is not None:
        bench = parsed.benchmark
        bid, _ = ev.registered(bench, {"file": name, "sha256": sha}, parsed.format, ev.file_event_id(sha))
        result = IngestResult(name, sha, "valid", parsed.format, bid, bench.name,
                              notes=[f"({_count(len(bench.questions), 'question')}, "
                                     f"{_count(len(parsed.responses), 'response')})"])
        if led is not None and led.stream_version(f"benchmark:{bid}"):
            result.notes.append("(this benchmark is already registered)")
        result.untranslated = [p.as_dict() for p in bench.rejected_questions + bench.rejected_traits]
        return result
    bench = find_benchmark(led, parsed.benchmark_ref) if led is not None else None
    if bench is None:
        return IngestResult(name, sha, "pending", parsed.format, None, parsed.benchmark_ref,
                            notes=[f"(valid; its {len(parsed.responses)} responses would wait for benchmark "
                                   f"{parsed.benchmark_ref!r}, which is not registered)"])
    problems = ev.response_problems(bench, parsed.responses)
    if problems:
        return _rejected(name, sha, len(raw), problems)
    return IngestResult(name, sha, "valid", parsed.format, bench["benchmark"], bench["name"],
                        notes=[f"({_count(len(parsed.responses), 'response')})"])


def _rejected(name: str, sha: str, size: int, problems: list[Problem]) -> IngestResult:
    """The rejection ingest would record, with the same capped error list, not appended."""
    errors = ev.rejected(name, sha, size, problems).data["errors"]
    return IngestResult(name, sha, "rejected", errors=list(errors))
