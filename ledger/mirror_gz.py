"""The compressed mirror of a home, ``events.jsonl.gz``: the plain mirror's lines, gzip-compressed.

A home made with ``init --mirror gzip`` keeps this file instead of ``events.jsonl`` and its
``.blobs`` file. Each commit appends two gzip members: a data member holding the commit's lines
(each blob line before the first event line that uses it, as in an export), then a footer, an
empty member whose header carries an extra field (subfield ``EL``) with the data member's length
and the seq of its last event. ``zcat events.jsonl.gz`` gives an importable JSONL ledger; the
footer lets a writer find the last commit from the end of the file without reading the rest.

As with the plain mirror (``ledger.mirror``), SQLite is the store and this is a derived copy: a
mirror that is behind is completed from SQLite; a torn last append (a crash during the write) is
cut when what it holds agrees with SQLite; any other disagreement is recorded in ``problem`` and
nothing is rewritten.
"""

from __future__ import annotations

import os
import struct
import zlib
from bisect import bisect_right
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from evalledger.ledger.blobs import (
    BlobError,
    blob_file_path,
    blob_text_line,
    deflater,
    has_markers,
    is_blob_line,
    parse_blob_line,
    raw_refs,
)
from evalledger.ledger.envelope import EnvelopeError, line_seq
from evalledger.ledger.mirror import MirrorFile
from evalledger.ledger.persistence import Head, TreeState
from evalledger.ledger.verify import Problem, VerifyReport, verify_sqlite

if TYPE_CHECKING:
    from evalledger.ledger.sqlite import SQLiteRecorder

#: the compressed mirror's file name in a home (the plain one is ``events.jsonl``)
GZ_MIRROR = "events.jsonl.gz"
_LEVEL = 6
# The footer member: a gzip header with FEXTRA (XLEN 20; subfield "EL", 16 bytes: the data
# member's length and the seq of its last event, little-endian), an empty deflate block, and the
# trailer of no data (crc32 0, size 0). Fixed bytes around the two numbers make it easy to find.
_FOOTER_HEAD = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x14\x00EL\x10\x00"
_FOOTER_TAIL = b"\x03\x00" + b"\x00" * 8
_FOOTER_SIZE = len(_FOOTER_HEAD) + 16 + len(_FOOTER_TAIL)
# A data member's gzip header, written by us rather than by zlib: mtime 0, no file name, XFL 0 and
# OS 255 ("unknown"), so the same lines give the same bytes on every platform (zlib would write its
# own OS code: 3 on Linux, 19 on macOS). _ZLIB_HEADER is what zlib wrote before (still read).
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_ZLIB_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
_CHUNK_LINES = 1000   # lines per member when a mirror is completed from SQLite
_READ = 1 << 20
_OUT = 1 << 20        # the most one decompression step gives (a line longer than this is read in steps)
#: the longest line a compressed mirror may hold (256 MiB): a longer one is refused, so a crafted
#: file that inflates to gigabytes (a decompression bomb) never fills the memory. The ledger
#: writes nothing near it: an ingested file is at most 50 MB, a response at most 1,000,000 characters.
MAX_LINE = 256 << 20


class MirrorDamage(Exception):
    """The compressed mirror cannot be read past a byte offset (a torn or altered member)."""

    def __init__(self, offset: int, reason: str, torn: bool = False):
        super().__init__(f"at byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason
        self.torn = torn   # the file ends inside a member: an interrupted append, which a writer cuts


def is_gz_mirror(path: str) -> bool:
    """True when the mirror at ``path`` is the compressed one (by its name)."""
    return path.endswith(".gz")


def footer(length: int, last_seq: int) -> bytes:
    """The footer member after a data member of ``length`` bytes whose last event is ``last_seq``."""
    return _FOOTER_HEAD + struct.pack("<QQ", length, last_seq) + _FOOTER_TAIL


def member(lines: Iterable[bytes], last_seq: int) -> bytes:
    """The bytes one append writes: the lines as a gzip member (blob lines in the ``text`` form),
    then its footer."""
    body = b"".join(as_text(line) for line in lines)
    packer = deflater(len(body), _LEVEL, -15)   # raw deflate: the header and trailer are ours
    data = (_HEADER + packer.compress(body) + packer.flush()
            + struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF))
    return data + footer(len(data), last_seq)


def as_text(line: bytes) -> bytes:
    """A line as the compressed mirror holds it: a blob line in the ``text`` form, an event line as it is."""
    if not is_blob_line(line) or b'"text":' in line[73:82]:
        return line
    key, raw, _ = parse_blob_line(line, "a blob line to mirror")
    return blob_text_line(key, raw)


def _parse_footer(raw: bytes) -> tuple[int, int] | None:
    """(data member length, last seq) of a footer's bytes, or None when they are not a footer."""
    if len(raw) != _FOOTER_SIZE or not raw.startswith(_FOOTER_HEAD) or not raw.endswith(_FOOTER_TAIL):
        return None
    length, seq = struct.unpack("<QQ", raw[len(_FOOTER_HEAD):len(_FOOTER_HEAD) + 16])
    return length, seq


def read_lines(path: str, size: int | None = None, offset: int = 0, max_line: int = MAX_LINE) -> Iterator[bytes]:
    """The lines of a compressed mirror (blob lines included) from byte ``offset`` (a member's start)
    to byte ``size`` (the end when None), member after member; MirrorDamage at a member that is cut
    off or altered, or at a line longer than ``max_line`` bytes. Memory stays bounded (one step's
    output and one line), so a decompression bomb is refused instead of filling the memory."""
    for item in scan(path, size, offset, max_line):
        if isinstance(item, bytes):
            yield item


class MemberEnd:
    """Where one gzip member of a compressed mirror starts and ends, and its first bytes (up to a
    footer's length: its header, or the whole footer); ``scan`` yields it after the member's lines."""

    __slots__ = ("start", "end", "head")

    def __init__(self, start: int, end: int, head: bytes = b""):
        self.start = start
        self.end = end
        self.head = head


def scan(path: str, size: int | None = None, offset: int = 0,
         max_line: int = MAX_LINE) -> Iterator[bytes | MemberEnd]:
    """Each line of the compressed mirror at ``path``, and a MemberEnd after each member's lines
    (the arguments and errors of ``read_lines``)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        left = None if size is None else size - offset
        read = offset        # the file offset after the bytes read so far
        start = offset       # where the member being decompressed starts
        unpacker = zlib.decompressobj(31)
        fed = False          # the current member has been given bytes and has not ended yet
        pending = bytearray()
        while left is None or left > 0:
            data = chunk = fh.read(_READ if left is None else min(_READ, left))
            if not data:
                break
            if left is not None:
                left -= len(data)
            read += len(data)
            while data:
                if not fed and data[:16] == _FOOTER_HEAD and data[32:_FOOTER_SIZE] == _FOOTER_TAIL:
                    # a footer (an empty member of fixed bytes, as zlib would read it): taken as it is,
                    # half the members of a mirror need no decompressor
                    end = read - len(data) + _FOOTER_SIZE
                    yield MemberEnd(start, end, data[:_FOOTER_SIZE])
                    data, start = data[_FOOTER_SIZE:], end
                    continue
                try:
                    out = unpacker.decompress(data, _OUT)
                except zlib.error as exc:
                    raise _undecompressable(start, exc) from None
                fed = True
                pending += out
                yield from _whole_lines(pending, len(out), start, max_line)
                while len(out) == _OUT and not unpacker.eof and not unpacker.unconsumed_tail:
                    out = _inflate(unpacker, b"", start)   # a full step: zlib may hold more for this input
                    pending += out
                    yield from _whole_lines(pending, len(out), start, max_line)
                if not unpacker.eof:
                    data = unpacker.unconsumed_tail   # empty: the member goes on in the next read
                    continue
                if pending:
                    raise MirrorDamage(start, "a gzip member ends in the middle of a line: it was altered")
                data = unpacker.unused_data
                end = read - len(data)
                yield MemberEnd(start, end, _head(fh, chunk, read - len(chunk), start, end))
                start = end
                unpacker, fed = zlib.decompressobj(31), False
        if fed or pending:
            raise MirrorDamage(start, "the file ends in the middle of a gzip member: a write was interrupted "
                                      "(never acknowledged) or the file was cut", torn=True)


def _head(fh: Any, chunk: bytes, base: int, start: int, end: int) -> bytes:
    """The first bytes (at most a footer's length) of the member from ``start`` to ``end``: from the
    chunk just read (at file offset ``base``) when it holds them, else read again."""
    size = min(end - start, _FOOTER_SIZE)
    if start >= base:
        return chunk[start - base:start - base + size]
    return os.pread(fh.fileno(), size, start)


def _inflate(unpacker: Any, data: bytes, start: int) -> bytes:
    """One bounded decompression step of the member that starts at byte ``start``."""
    try:
        return unpacker.decompress(data, _OUT)  # type: ignore[no-any-return]
    except zlib.error as exc:
        raise _undecompressable(start, exc) from None


def _undecompressable(start: int, exc: zlib.error) -> MirrorDamage:
    return MirrorDamage(start, f"a gzip member cannot be decompressed ({exc}): it was altered, "
                               "or it is not a compressed mirror")


def _whole_lines(pending: bytearray, fresh: int, start: int, max_line: int) -> list[bytes]:
    """Take the whole lines out of ``pending`` (its last ``fresh`` bytes just added; the bytes before
    hold no newline, so only the new ones are searched and a long line costs linear time).
    MirrorDamage when a line is longer than ``max_line``. At most one step's output (1 MiB) is
    split at a time, so the list stays small whatever the member holds."""
    cut = pending.rfind(b"\n", len(pending) - fresh) + 1
    if not cut:
        if len(pending) > max_line:
            raise _too_long(start, max_line)
        return []
    if cut > max_line and not _all_shorter(pending, cut, max_line):
        raise _too_long(start, max_line)
    lines = bytes(pending[:cut]).splitlines(keepends=True)
    del pending[:cut]
    if len(pending) > max_line:
        raise _too_long(start, max_line)
    return lines


def _all_shorter(pending: bytearray, cut: int, max_line: int) -> bool:
    """True when every line in ``pending[:cut]`` is at most ``max_line`` bytes long."""
    at = 0
    while at < cut:
        end = pending.find(b"\n", at, cut) + 1
        if end - at > max_line:
            return False
        at = end
    return True


def _too_long(start: int, max_line: int) -> MirrorDamage:
    return MirrorDamage(start, f"a line longer than {max_line:,} bytes: no ledger writes one (a crafted file, "
                               "a decompression bomb, or not a compressed mirror)")


def is_gzip_file(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes (a compressed mirror to import)."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def gz_import_lines(path: str) -> Iterator[bytes]:
    """The lines of a compressed mirror for ``import``: a damaged or cut member is refused, by offset."""
    from evalledger.ledger.importer import ImportRefused
    try:
        yield from read_lines(path)
    except MirrorDamage as exc:
        raise ImportRefused(f"refusing to import {path}: {exc}; nothing was imported") from None


def gz_side_file(path: str) -> str | None:
    """The blob file of a gzipped export, when there is one: ``FILE.gz.blobs``, or ``FILE.blobs``
    for ``FILE.gz`` (``gzip FILE`` leaves the export's blob file as it was). A compressed mirror has none."""
    for side in (blob_file_path(path), blob_file_path(path[:-3]) if path.endswith(".gz") else ""):
        if side and os.path.isfile(side):
            return side
    return None


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
                fh.seek(end - _FOOTER_SIZE)
                length, _ = _parse_footer(fh.read(_FOOTER_SIZE)) or (0, 0)
        if end:
            at = end - _FOOTER_SIZE - length
            last = _last_line(self.path, at, end - _FOOTER_SIZE, tail)
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
    if size >= _FOOTER_SIZE:
        fh.seek(size - _FOOTER_SIZE)
        found = _parse_footer(fh.read(_FOOTER_SIZE))
        if found is not None and found[0] <= size - _FOOTER_SIZE:
            return size, found[1]
    end = size
    while end > 0:   # a torn append: the last footer before it, a window at a time
        start = max(0, end - _READ)
        fh.seek(start)
        window = fh.read(min(size, end + _FOOTER_SIZE) - start)
        at = window.rfind(_FOOTER_HEAD)
        while at >= 0:
            found = _parse_footer(window[at:at + _FOOTER_SIZE])
            if found is not None and found[0] <= start + at:
                return start + at + _FOOTER_SIZE, found[1]
            at = window.rfind(_FOOTER_HEAD, 0, at)
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
        found = _parse_footer(raw) if not self._member_last else None
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
        elif raw[:len(_HEADER)] not in (_HEADER, _ZLIB_HEADER):
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
