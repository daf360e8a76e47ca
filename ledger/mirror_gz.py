"""The compressed mirror of a home, ``events.jsonl.gz``: the plain mirror's lines, gzip-compressed.

A home made with ``init --mirror gzip`` keeps this file instead of ``events.jsonl`` and its
``.blobs`` file. Each commit appends two gzip members: a data member holding the commit's lines
(each blob line before the first event line that uses it, as in an export), then a footer, an
empty member whose header carries an extra field (subfield ``EL``) with the data member's length
and the seq of its last event. ``zcat events.jsonl.gz`` gives an importable JSONL ledger; the
footer lets a writer find the last commit from the end of the file without reading the rest
(``ledger.gz_members`` writes and reads the members; this module is the mirror that uses them).

As with the plain mirror (``ledger.mirror``), SQLite is the store and this is a derived copy: a
mirror that is behind is completed from SQLite; a torn last append (a crash during the write) is
cut when what it holds agrees with SQLite; any other disagreement is recorded in ``problem`` and
nothing is rewritten.
"""

from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from evalledger.ledger.blob_lines import is_blob_line, parse_blob_line
from evalledger.ledger.blobs import BlobError, has_markers, raw_refs
from evalledger.ledger.envelope import EnvelopeError, line_seq
from evalledger.ledger.gz_members import (
    FOOTER_HEAD,
    FOOTER_SIZE,
    HEADER,
    READ_SIZE,
    ZLIB_HEADER,
    MemberEnd,
    MirrorDamage,
    member,
    parse_footer,
    read_lines,
    scan,
)
from evalledger.ledger.gz_members import footer as footer  # re-exported: the format's writer, beside member
from evalledger.ledger.mirror import MirrorFile
from evalledger.ledger.persistence import Head, TreeState
from evalledger.ledger.verify import Problem, VerifyReport, verify_sqlite

if TYPE_CHECKING:
    from evalledger.ledger.sqlite import SQLiteRecorder

#: the compressed mirror's file name in a home (the plain one is ``events.jsonl``)
GZ_MIRROR = "events.jsonl.gz"
_CHUNK_LINES = 1000   # lines per member when a mirror is completed from SQLite


class GzMirror(MirrorFile):
    """Appends each commit's lines to ``events.jsonl.gz`` as a member and its footer, under the
    home's write lock (blob lines are written into the mirror itself, never beside it)."""

    WRITE_ERRORS = (*MirrorFile.WRITE_ERRORS, zlib.error, BlobError)

    def recover(self, recorder: "SQLiteRecorder") -> None:
        """Bring the mirror level with SQLite, or record why it cannot be done without rewriting it."""
        self.problem = None
        self.disk_full = ""
        if not os.path.exists(self.path):
            open(self.path, "ab").close()
        try:
            tail, end, size = self._tail(recorder)
        except MirrorDamage as exc:
            self.problem = f"{self.path}: {exc}; not rewritten"
            return
        head = recorder.head()
        if tail > head.seq:
            self.problem = (f"{self.path} is ahead of the SQLite store: the mirror ends at seq {tail}, "
                            f"SQLite at seq {head.seq}; not rewritten")
            return
        if end < size:
            with open(self.path, "r+b") as fh:   # an interrupted append that agrees with SQLite: cut it
                fh.truncate(end)
        self._size, self._seq = end, tail
        if tail < head.seq:
            self._write_chunks(recorder.mirror_lines(tail + 1, head.seq))

    def _tail(self, recorder: "SQLiteRecorder") -> tuple[int, int, int]:
        """(seq of the last whole append's last event, where that append ends, the file's size).

        MirrorDamage when the last append disagrees with SQLite, or what follows it is not a
        torn append of the events SQLite holds next."""
        with open(self.path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            end, tail = _last_footer(fh, size)
            if end:
                fh.seek(end - FOOTER_SIZE)
                length, _ = parse_footer(fh.read(FOOTER_SIZE)) or (0, 0)
        if end:
            at = end - FOOTER_SIZE - length
            last = _last_line(self.path, at, end - FOOTER_SIZE, tail)
            stored = next(recorder.lines(tail, tail), None) if tail else (0, b"")
            if stored is None:
                return tail, end, size   # the mirror is ahead of SQLite: recover says so
            if last != stored[1]:
                raise MirrorDamage(at, f"the last append differs from the SQLite store at seq {tail}")
        if end < size:
            _check_torn(self.path, tail, recorder, end)
        return tail, end, size

    def append(self, recorder: "SQLiteRecorder", first_seq: int, lines: list[bytes], last_seq: int,
               checked: bool = False) -> None:
        """After a commit: write ``lines`` (seq ``first_seq`` on) as one member, catching up first if behind.

        ``checked``: the store proved nobody committed since our last append, so the size check is
        skipped. The events are committed whatever happens here, so a failure is recorded in
        ``problem`` (stopping later appends) rather than raised.
        """
        if self.problem:
            return
        try:
            if self._seq != first_seq - 1 or (not checked and self._size != self._current_size()):
                self.recover(recorder)   # another process wrote, or crashed before its mirror write
            else:
                self._write(member(lines, last_seq), last_seq)
        except self.WRITE_ERRORS as exc:
            self._failed(exc, first_seq, last_seq)

    def _write_chunks(self, lines: Iterable[bytes]) -> None:
        """Write lines from SQLite as members of about ``_CHUNK_LINES`` lines, each ending with an event."""
        chunk: list[bytes] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) >= _CHUNK_LINES and not is_blob_line(line):
                seq = line_seq(line)
                self._write(member(chunk, seq), seq)
                chunk = []
        if chunk:
            seq = line_seq(chunk[-1])
            self._write(member(chunk, seq), seq)

    def _write(self, data: bytes, last_seq: int) -> None:
        """Append one member and its footer through an O_APPEND descriptor."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(data)
        while view:   # a short write (a full disk, a signal): finish it or raise
            view = view[os.write(self._fd, view):]
        if self.fsync:
            os.fsync(self._fd)
        self._size += len(data)
        self._seq = last_seq

    def verify(self, rows: Iterator[tuple[Any, ...]], source: str, expect_head: Head | None,
               size: int, tree: TreeState | None) -> VerifyReport:
        """Verify SQLite ``rows`` with this mirror's lines (its first ``size`` bytes) alongside, and
        every blob line in it: it hashes to its key and comes before the first event using it."""
        lines = _EventLines(scan(self.path, size), self.path)
        report = verify_sqlite(rows, source, lines, self.path, expect_head, tree=tree)
        if lines.problem is not None:   # the mirror's own problem, said better than "it ends early"
            report.problems = [p for p in report.problems if p.source != self.path] + [lines.problem]
        report.problems = [_placed(p, lines, report.count, self.path) for p in report.problems]
        return report


def _last_footer(fh: Any, size: int) -> tuple[int, int]:
    """(end of the last whole append, seq of its last event), found from the end of the file:
    (0, 0) when there is none. A footer is looked for backwards (a torn append after it is cut)."""
    if size >= FOOTER_SIZE:
        fh.seek(size - FOOTER_SIZE)
        found = parse_footer(fh.read(FOOTER_SIZE))
        if found is not None and found[0] <= size - FOOTER_SIZE:
            return size, found[1]
    end = size
    while end > 0:   # a torn append: the last footer before it, a window at a time
        start = max(0, end - READ_SIZE)
        fh.seek(start)
        window = fh.read(min(size, end + FOOTER_SIZE) - start)
        at = window.rfind(FOOTER_HEAD)
        while at >= 0:
            found = parse_footer(window[at:at + FOOTER_SIZE])
            if found is not None and found[0] <= start + at:
                return start + at + FOOTER_SIZE, found[1]
            at = window.rfind(FOOTER_HEAD, 0, at)
        end = start
    return 0, 0


def _last_line(path: str, start: int, end: int, seq: int) -> bytes:
    """The last line of the one data member from byte ``start`` to ``end`` (a footer says where it is
    and that it ends at ``seq``), read in bounded steps; MirrorDamage when it is not one whole member."""
    last = b""
    try:
        for item in scan(path, end, start):
            if isinstance(item, MemberEnd):
                if item.end != end:
                    raise MirrorDamage(start, "the footer's length does not match the member before it")
            else:
                last = item
    except MirrorDamage as exc:
        raise MirrorDamage(start, f"the last append cannot be read ({exc.reason})") from None
    if not seq:
        raise MirrorDamage(start, "the last footer names seq 0: no append ends there")
    return last


def _check_torn(path: str, tail: int, recorder: "SQLiteRecorder", at: int) -> None:
    """Accept the bytes after the last whole append (at byte ``at``) only as an interrupted append:
    gzip data cut short (or a member whose footer was not written) whose whole event lines are the
    lines SQLite holds after seq ``tail`` (MirrorDamage otherwise)."""
    expected = recorder.lines(tail + 1)
    try:
        for line in read_lines(path, offset=at):
            if not is_blob_line(line) and line != next(expected, (0, b""))[1]:
                raise MirrorDamage(at, "its event lines differ from the SQLite store")
    except MirrorDamage as exc:
        if not exc.torn:
            raise MirrorDamage(at, f"the bytes after the last append (seq {tail}) are not an interrupted "
                                   f"append: {exc.reason}") from None


class _EventLines:
    """The event lines of a compressed mirror, for verify: its blob lines are checked on the way
    (each hashes to its key; an event's blobs come before it), so is the members' layout (each data
    member has the header the ledger writes and is followed by its footer, which names its length
    and last seq), and damage becomes ``problem``."""

    def __init__(self, items: Iterator[bytes | MemberEnd], path: str):
        self._items = items
        self._path = path
        self._seen: set[bytes] = set()
        self._last = b""   # the last event line read: its seq is computed only for a message
        self._member_last = b""   # the last line of the member being read (b"": none yet)
        self._start = 0           # where that member starts
        self._open: tuple[int, int, int] | None = None   # (start, length, last seq) of a member before its footer
        self.read = 0            # event lines read
        self._firsts: list[int] = []   # per data member: the number of its first event line ...
        self._starts: list[int] = []   # ... and its byte offset (to name where a line is)
        self.problem: Problem | None = None

    def __iter__(self) -> "_EventLines":
        return self

    def __next__(self) -> bytes:
        while self.problem is None:
            try:
                line = next(self._items)
            except MirrorDamage as exc:
                self._fail(f"{exc.reason} (byte {exc.offset})" + (f"; {_REPAIR}" if exc.torn else ""))
                break
            except StopIteration:
                self._finish()
                break
            if isinstance(line, MemberEnd):
                self._member_end(line)
                continue
            if is_blob_line(line):
                self._member_last = line
                self._blob(line)
                continue
            if has_markers(line):
                self._refs(line)
            if not self._member_last:
                self._firsts.append(self.read + 1)
                self._starts.append(self._start)
            self.read += 1
            self._last = self._member_last = line
            return line
        raise StopIteration

    def member_at(self, seq: int) -> int | None:
        """The byte offset of the member holding the ``seq``-th event line (None before any)."""
        at = bisect_right(self._firsts, seq) - 1
        return self._starts[at] if at >= 0 else None

    def _member_end(self, end: MemberEnd) -> None:
        """Check one member's place in the layout: a data member, then its footer."""
        length, raw = end.end - end.start, end.head
        found = parse_footer(raw) if not self._member_last else None
        if found is not None:
            if self._open is None:
                self._fail(f"a footer with no data member before it (byte {end.start}): it was added or moved")
            elif found != self._open[1:]:
                self._fail(f"the footer at byte {end.start} says the member before it is {found[0]} bytes "
                           f"ending at seq {found[1]}, but it is {self._open[1]} bytes ending at seq "
                           f"{self._open[2]}: it was altered", self._open[2])
            self._open = None
        elif self._open is not None:
            self._fail(f"the gzip member at byte {self._open[0]} has no footer after it: it was removed",
                       self._open[2])
        elif raw[:len(HEADER)] not in (HEADER, ZLIB_HEADER):
            self._fail(f"the gzip member at byte {end.start} has a header the ledger never writes "
                       "(a time, a name or flags set): it was rewritten", self._first_seq(end.start))
        elif not self._member_last or is_blob_line(self._member_last):
            self._fail(f"the gzip member at byte {end.start} does not end with an event line: "
                       "the ledger never writes one")
        else:
            self._open = (end.start, length, self.read)   # lines are in seq order: the count is its last seq
        self._member_last, self._start = b"", end.end

    def _first_seq(self, start: int) -> int | None:
        """The number of the first event line of the member at byte ``start`` (None: it holds none)."""
        return self._firsts[-1] if self._starts and self._starts[-1] == start else None

    def _finish(self) -> None:
        """At the end of the mirror: the last data member must have its footer."""
        if self._open is not None:
            self._fail(f"the last gzip member (byte {self._open[0]}) has no footer after it: an append was "
                       f"interrupted (never acknowledged) or the footer was removed; {_REPAIR}", self._open[2])

    def _fail(self, reason: str, seq: int | None = None) -> None:
        """Record the mirror's problem at ``seq`` (the seq after the last event line read when None), once."""
        if self.problem is None:
            if seq is None:
                seq = _seq_or_zero(self._last) + 1 if self._last else 1
            self.problem = Problem(seq, self._path, reason)

    def _blob(self, line: bytes) -> None:
        """Check a blob line: it hashes to its key, and the blobs inside it came before it."""
        try:
            key, raw, _ = parse_blob_line(line, "a blob line")
            if has_markers(raw):
                self._check_refs(raw_refs(raw))
        except (BlobError, EnvelopeError, ValueError) as exc:
            self._fail(f"a blob line before this event: {exc}")
            return
        self._seen.add(bytes.fromhex(key))

    def _refs(self, line: bytes) -> None:
        """Check that every blob an event line refers to came before it in the mirror."""
        try:
            self._check_refs(raw_refs(line))
        except (BlobError, EnvelopeError, ValueError) as exc:
            self._fail(str(exc))

    def _check_refs(self, keys: list[str]) -> None:
        for key in keys:
            if bytes.fromhex(key) not in self._seen:
                raise BlobError(f"refers to blob sha256:{key}, which no line before it holds")


def _placed(problem: Problem, lines: "_EventLines", count: int, path: str) -> Problem:
    """A verify problem with the byte offset of the gzip member it is about: the member holding the
    line that differs, or the first one past SQLite's last event when the mirror goes on."""
    if problem is lines.problem:
        return problem   # it names its byte already
    if problem.source == path:
        at = lines.member_at(problem.seq)
        return problem if at is None else replace(problem, reason=f"{problem.reason} (the gzip member at byte {at})")
    if path in problem.reason and lines.read > count:
        at = lines.member_at(count + 1)
        return replace(problem, reason=f"{problem.reason} (from the gzip member at byte {at})")
    return problem


def _seq_or_zero(line: bytes) -> int:
    """The seq of an event line, 0 when it is not one (verify names that line itself)."""
    try:
        return line_seq(line)
    except (EnvelopeError, ValueError):
        return 0


_REPAIR = "'evalledger verify --repair' (or any command that writes) cuts a torn last append"
