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
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from evalledger.ledger.blobs import BlobError, blob_text_line, has_markers, is_blob_line, parse_blob_line, raw_refs
from evalledger.ledger.envelope import EnvelopeError
from evalledger.ledger.mirror import line_seq
from evalledger.ledger.persistence import Head, TreeState, is_disk_full
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
_CHUNK_LINES = 1000   # lines per member when a mirror is completed from SQLite
_READ = 1 << 20
_OUT = 1 << 23        # the most one decompression step gives (a line longer than this is read in steps)


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
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, 31)   # 31: a gzip header (mtime 0: same bytes every time)
    data = packer.compress(b"".join(as_text(line) for line in lines)) + packer.flush()
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


def _inflate_one(data: bytes) -> bytes:
    """The content of exactly one whole gzip member (zlib.error when ``data`` is anything else)."""
    unpacker = zlib.decompressobj(31)
    out = unpacker.decompress(data)
    if not unpacker.eof or unpacker.unused_data:
        raise zlib.error("not one whole gzip member")
    return out


def read_lines(path: str, size: int | None = None, offset: int = 0) -> Iterator[bytes]:
    """The lines of a compressed mirror (blob lines included) from byte ``offset`` (a member's start)
    to byte ``size`` (the end when None), member after member; MirrorDamage at a member that is cut
    off or altered. Each step's output is bounded, so an altered member cannot exhaust memory."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        left = None if size is None else size - offset
        read = offset        # the file offset after the bytes read so far
        start = offset       # where the member being decompressed starts
        unpacker = zlib.decompressobj(31)
        fed = False          # the current member has been given bytes and has not ended yet
        pending = b""
        while left is None or left > 0:
            data = fh.read(_READ if left is None else min(_READ, left))
            if not data:
                break
            if left is not None:
                left -= len(data)
            read += len(data)
            while data:
                try:
                    out = unpacker.decompress(data, _OUT)
                except zlib.error as exc:
                    raise MirrorDamage(start, f"a gzip member cannot be decompressed ({exc}): it was altered") \
                        from None
                fed = True
                if out:
                    pending += out
                    cut = pending.rfind(b"\n") + 1
                    if cut:
                        yield from pending[:cut].splitlines(keepends=True)
                        pending = pending[cut:]
                if not unpacker.eof:
                    data = unpacker.unconsumed_tail   # empty: the member goes on in the next read
                    continue
                if pending:
                    raise MirrorDamage(start, "a gzip member ends in the middle of a line: it was altered")
                data = unpacker.unused_data
                start = read - len(data)
                unpacker, fed = zlib.decompressobj(31), False
        if fed or pending:
            raise MirrorDamage(start, "the file ends in the middle of a gzip member: a write was interrupted "
                                      "(never acknowledged) or the file was cut", torn=True)


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


class GzMirror:
    """Appends each commit's lines to ``events.jsonl.gz`` as a member and its footer, under the
    home's write lock (the interface of ``ledger.mirror.Mirror``)."""

    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self.fsync = fsync
        self.problem: str | None = None
        self.disk_full = ""   # the problem is only a full disk (its reason): the next open completes the mirror
        self.blob_path = ""   # blob lines are written into the mirror itself, never beside it
        self._fd: int | None = None
        self._size = -1  # size after our last write or check; a different size means someone else wrote
        self._seq = 0    # seq of the last event at that size

    def size(self) -> int | None:
        """The mirror's size in bytes (None when there is no mirror file)."""
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return None

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
            if tail:
                fh.seek(end - _FOOTER_SIZE)
                length, _ = _parse_footer(fh.read(_FOOTER_SIZE)) or (0, 0)
                fh.seek(end - _FOOTER_SIZE - length)
                try:
                    lines = _inflate_one(fh.read(length)).splitlines(keepends=True)
                except zlib.error as exc:
                    raise MirrorDamage(end - _FOOTER_SIZE - length, f"the last append cannot be read ({exc})") \
                        from None
                stored = next(recorder.lines(tail, tail), (0, b""))[1]
                if not lines or lines[-1] != stored:
                    raise MirrorDamage(end - _FOOTER_SIZE - length,
                                       f"the last append differs from the SQLite store at seq {tail}")
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
        except (OSError, EnvelopeError, ValueError, zlib.error, BlobError) as exc:
            if isinstance(exc, OSError) and is_disk_full(exc):
                self.disk_full = exc.strerror or str(exc)
                self.problem = (f"{self.path}: the disk is full ({exc.strerror}): every event up to seq "
                                f"{last_seq} is committed in the SQLite store, the mirror stops before seq "
                                f"{self._seq + 1}; free space and run the command again (opening the home "
                                "completes the mirror)")
                return
            self.problem = f"{self.path}: could not write the mirror after seq {first_seq - 1}: {exc}"

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

    def _current_size(self) -> int:
        return os.fstat(self._fd).st_size if self._fd is not None else self.size() or 0

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

    def close(self) -> None:
        """Close the descriptor kept for appending."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def verify(self, rows: Iterator[tuple[Any, ...]], source: str, expect_head: Head | None,
               size: int, tree: TreeState | None) -> VerifyReport:
        """Verify SQLite ``rows`` with this mirror's lines (its first ``size`` bytes) alongside, and
        every blob line in it: it hashes to its key and comes before the first event using it."""
        lines = _EventLines(read_lines(self.path, size), self.path)
        report = verify_sqlite(rows, source, lines, self.path, expect_head, tree=tree)
        if lines.problem is not None:   # the mirror's own problem, said better than "it ends early"
            report.problems = [p for p in report.problems if p.source != self.path] + [lines.problem]
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
    (each hashes to its key; an event's blobs come before it), and damage becomes ``problem``."""

    def __init__(self, lines: Iterator[bytes], path: str):
        self._lines = lines
        self._path = path
        self._seen: set[bytes] = set()
        self._last = b""   # the last event line read: its seq is computed only for a message
        self.problem: Problem | None = None

    def __iter__(self) -> "_EventLines":
        return self

    def __next__(self) -> bytes:
        while self.problem is None:
            try:
                line = next(self._lines)
            except MirrorDamage as exc:
                self._fail(f"{exc.reason} (byte {exc.offset})" + (f"; {_REPAIR}" if exc.torn else ""))
                break
            if is_blob_line(line):
                self._blob(line)
                continue
            if has_markers(line):
                self._refs(line)
            self._last = line
            return line
        raise StopIteration

    def _fail(self, reason: str) -> None:
        """Record the mirror's problem at the seq after the last event line read (once)."""
        if self.problem is None:
            try:
                seq = line_seq(self._last) if self._last else 0
            except (EnvelopeError, ValueError):
                seq = 0   # verify names that line itself
            self.problem = Problem(seq + 1, self._path, reason)

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


_REPAIR = "'evalledger verify --repair' (or any command that writes) cuts a torn last append"
