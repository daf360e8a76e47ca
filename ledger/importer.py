"""Checks every line of a JSONL ledger before a backend stores it: ``import`` accepts nothing unverified.

The checks run in the same pass as the insert (inside the backend's transaction or lock), so the
file cannot change between being verified and being imported. The first bad line stops the
import and nothing is kept.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable, Iterator

from evalledger.ledger.blob_lines import is_blob_line, parse_blob_line
from evalledger.ledger.blobs import BlobError, has_markers, refs
from evalledger.ledger.envelope import (
    GENESIS_HASH,
    EnvelopeError,
    canonical_bytes,
    canonical_json,
    check_type_name,
    decode_json,
    split_line,
)
from evalledger.ledger.persistence import LedgerError, check_stream


class ImportRefused(LedgerError):
    """A file that is not a valid ledger; nothing of it was imported."""


_INT_FIELDS = ("seq", "version", "schema")
_STR_FIELDS = ("id", "stream", "type")


def _refuse(source: str, where: str, reason: str) -> ImportRefused:
    return ImportRefused(f"refusing to import {source}: {where}: {reason}; nothing was imported")


def _envelope(canonical: bytes) -> dict[str, Any]:
    """The decoded envelope, with the field types checked."""
    env = decode_json(canonical)
    if not isinstance(env, dict) or set(env) != {"data", "id", "meta", "schema", "seq", "stream", "type",
                                                 "version"}:
        raise EnvelopeError("the line does not hold exactly the envelope fields")
    for name in _INT_FIELDS:
        if type(env[name]) is not int or env[name] < 1:
            raise EnvelopeError(f"{name} is not a positive integer")
    for name in _STR_FIELDS:
        if not isinstance(env[name], str):
            raise EnvelopeError(f"{name} is not a string")
    check_stream(env["stream"])
    check_type_name(env["type"])
    if not isinstance(env["meta"], dict):
        raise EnvelopeError("meta is not an object")
    return env


class FileLines:
    """The lines of a blob file and then of the file it belongs to, read as one stream, with each
    line's place named in its own file: ``import FILE`` reads ``FILE.blobs`` first, and a refusal
    at line 29 of FILE must say line 29, not 29 plus the blob file's length."""

    def __init__(self, side: str, side_lines: Iterable[bytes], lines: Iterable[bytes]) -> None:
        self.side, self.parts = side, (side_lines, lines)
        self.number, self.in_side = 0, True

    def __iter__(self) -> Iterator[bytes]:
        for in_side, lines in zip((True, False), self.parts):
            self.number, self.in_side = 0, in_side
            for line in lines:
                self.number += 1
                yield line

    def place(self) -> str:
        """Where the line last read is: ``line N`` of the file, or ``line N of <blob file>``."""
        return f"line {self.number} of {self.side}" if self.in_side else f"line {self.number}"


def checked_lines(lines: Iterable[bytes], source: str, keep_blob: Callable[[str, bytes], None] | None = None
                  ) -> Iterator[tuple[tuple[Any, ...], bytes]]:
    """Yield (row, line) for each event line once it is verified: row = the ten envelope column values.

    Refuses (ImportRefused) a cut line, a line that is not a canonical envelope, a broken chain
    (seq, prev_hash, hash), a repeated id, and a stream version that skips or repeats. Blob lines
    (a home with the blob store writes them) are checked against their keys and handed to
    ``keep_blob(key, stored form)`` before the events that use them; every blob an event refers
    to must come before it. A store without blobs (``keep_blob`` None) refuses them.
    """
    prev, expected_seq = GENESIS_HASH, 1
    ids: set[str] = set()
    versions: dict[str, int] = {}
    blobs: set[str] = set()
    place = lines.place if isinstance(lines, FileLines) else None
    for number, line in enumerate(lines, start=1):
        where = f"{place() if place else f'line {number}'} (seq {expected_seq})"
        if not line.endswith(b"\n"):
            raise _refuse(source, where, "the file ends in the middle of a line (truncated)")
        if is_blob_line(line):
            _take_blob(line, source, where, keep_blob, blobs)
            continue
        try:
            canonical, prev_hash, hash = split_line(line)
            env = _envelope(canonical)
            data, meta = canonical_json(env["data"]), canonical_json(env["meta"])
        except (EnvelopeError, ValueError) as exc:
            raise _refuse(source, where, f"not an event envelope ({exc})") from None
        rebuilt = canonical_bytes(env["seq"], env["id"], env["stream"], env["version"], env["type"],
                                  env["schema"], data, meta)
        reason = _chain_fault(env, rebuilt, canonical, prev_hash, hash, prev, expected_seq, ids, versions)
        if reason:
            raise _refuse(source, where, reason)
        if keep_blob is not None and has_markers(data):
            _check_refs(env["data"], blobs, source, where)
        ids.add(env["id"])
        versions[env["stream"]] = env["version"]
        prev, expected_seq = hash, expected_seq + 1
        yield (env["seq"], env["id"], env["stream"], env["version"], env["type"], env["schema"],
               data.decode(), meta.decode(), prev_hash, hash), line


def _take_blob(line: bytes, source: str, where: str, keep_blob: Callable[[str, bytes], None] | None,
               blobs: set[str]) -> None:
    """Check one blob line and hand it on (refused by a store without blobs, or when altered)."""
    if keep_blob is None:
        raise _refuse(source, where, "a blob line (the file was written by a home with the blob store): "
                                     "import it into a home, a .db file or a PostgreSQL store")
    try:
        key, raw, packed = parse_blob_line(line, "the blob line")
    except BlobError as exc:
        raise _refuse(source, where, str(exc)) from None
    if has_markers(raw):
        _check_refs(decode_json(raw), blobs, source, where)
    if key not in blobs:
        blobs.add(key)
        keep_blob(key, packed)


def _check_refs(value: Any, blobs: set[str], source: str, where: str) -> None:
    """Refuse a value that refers to a blob the file has not given before it."""
    try:
        keys = refs(value)
    except EnvelopeError as exc:
        raise _refuse(source, where, str(exc)) from None
    for key in keys:
        if key not in blobs:
            raise _refuse(source, where, f"refers to blob sha256:{key}, which no line before it holds")


def _chain_fault(env: dict[str, Any], rebuilt: bytes, canonical: bytes, prev_hash: str, hash: str, prev: str,
                 expected_seq: int, ids: set[str], versions: dict[str, int]) -> str | None:
    """Why this envelope cannot follow the ones before it, or None."""
    if rebuilt != canonical:
        return "the line is not in canonical form (re-serialised or edited by hand)"
    if env["seq"] != expected_seq:
        return f"holds seq {env['seq']} where seq {expected_seq} should be"
    if prev_hash != prev:
        return "prev_hash does not match the hash of the event before it"
    if hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest() != hash:
        return "hash does not match the bytes of the line (the event was edited)"
    if env["id"] in ids:
        return f"id {env['id']} appears twice"
    if env["version"] != versions.get(env["stream"], 0) + 1:
        return (f"stream {env['stream']!r} jumps from version {versions.get(env['stream'], 0)} "
                f"to {env['version']}")
    return None


def checked_rows(lines: Iterable[bytes], source: str,
                 keep_blob: Callable[[str, bytes], None] | None = None) -> Iterator[tuple[Any, ...]]:
    """The rows of ``checked_lines`` alone (what the SQLite backend inserts)."""
    for row, _ in checked_lines(lines, source, keep_blob):
        yield row
