"""The member format of the compressed mirror (``events.jsonl.gz``): how lines become gzip members
with footers, and how a file of them is read back and checked, member by member, in bounded memory.

A commit is a data member (its lines) followed by a footer: an empty member whose header carries an
extra field (subfield ``EL``) with the data member's length and the seq of its last event. Readers
here know nothing of the ledger: ``ledger.mirror_gz`` is the mirror that writes and checks them.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any, Iterable, Iterator

from evalledger.ledger.blob_lines import blob_text_line, is_blob_line, parse_blob_line
from evalledger.ledger.blobs import blob_file_path, deflater

_LEVEL = 6
# The footer member: a gzip header with FEXTRA (XLEN 20; subfield "EL", 16 bytes: the data
# member's length and the seq of its last event, little-endian), an empty deflate block, and the
# trailer of no data (crc32 0, size 0). Fixed bytes around the two numbers make it easy to find.
FOOTER_HEAD = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x14\x00EL\x10\x00"
FOOTER_TAIL = b"\x03\x00" + b"\x00" * 8
FOOTER_SIZE = len(FOOTER_HEAD) + 16 + len(FOOTER_TAIL)
# A data member's gzip header, written by us rather than by zlib: mtime 0, no file name, XFL 0 and
# OS 255 ("unknown"), so the same lines give the same bytes on every platform (zlib would write its
# own OS code: 3 on Linux, 19 on macOS). ZLIB_HEADER is what zlib wrote before (still read).
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
ZLIB_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
READ_SIZE = 1 << 20
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
    return FOOTER_HEAD + struct.pack("<QQ", length, last_seq) + FOOTER_TAIL


def member(lines: Iterable[bytes], last_seq: int) -> bytes:
    """The bytes one append writes: the lines as a gzip member (blob lines in the ``text`` form),
    then its footer."""
    body = b"".join(as_text(line) for line in lines)
    packer = deflater(len(body), _LEVEL, -15)   # raw deflate: the header and trailer are ours
    data = (HEADER + packer.compress(body) + packer.flush()
            + struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF))
    return data + footer(len(data), last_seq)


def as_text(line: bytes) -> bytes:
    """A line as the compressed mirror holds it: a blob line in the ``text`` form, an event line as it is."""
    if not is_blob_line(line) or b'"text":' in line[73:82]:
        return line
    key, raw, _ = parse_blob_line(line, "a blob line to mirror")
    return blob_text_line(key, raw)


def parse_footer(raw: bytes) -> tuple[int, int] | None:
    """(data member length, last seq) of a footer's bytes, or None when they are not a footer."""
    if len(raw) != FOOTER_SIZE or not raw.startswith(FOOTER_HEAD) or not raw.endswith(FOOTER_TAIL):
        return None
    length, seq = struct.unpack("<QQ", raw[len(FOOTER_HEAD):len(FOOTER_HEAD) + 16])
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
            data = chunk = fh.read(READ_SIZE if left is None else min(READ_SIZE, left))
            if not data:
                break
            if left is not None:
                left -= len(data)
            read += len(data)
            while data:
                if not fed and data[:16] == FOOTER_HEAD and data[32:FOOTER_SIZE] == FOOTER_TAIL:
                    # a footer (an empty member of fixed bytes, as zlib would read it): taken as it is,
                    # half the members of a mirror need no decompressor
                    end = read - len(data) + FOOTER_SIZE
                    yield MemberEnd(start, end, data[:FOOTER_SIZE])
                    data, start = data[FOOTER_SIZE:], end
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
    size = min(end - start, FOOTER_SIZE)
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
