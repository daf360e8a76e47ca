"""The JSONL mirror of a home's SQLite store: written after each commit, completed after a crash.

The mirror is a derived copy: every line equals the line the SQLite row gives. A mirror that is
behind (a crash between commit and mirror write) is completed from SQLite; a torn last line that
is a prefix of the line it should be is an interrupted write and is completed too. A mirror that
disagrees in any other way is reported and never rewritten: appends stop until a person looks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable

from ledger.envelope import EnvelopeError, split_line

if TYPE_CHECKING:
    from ledger.persistence import Recorder


def line_seq(line: bytes) -> int:
    """The seq of a stored line, read from its tail (stream and type never hold a quote)."""
    canonical, _, _ = split_line(line)
    at = canonical.rfind(b',"seq":')
    if at < 0:
        raise EnvelopeError("line has no seq field")
    end = canonical.index(b",", at + 7)
    return int(canonical[at + 7:end])


def read_tail(path: str) -> tuple[bytes | None, bytes, int]:
    """(last complete line or None, bytes after the last newline, offset of that fragment)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        end = fh.tell()
        pos, buf = end, b""
        # Read backwards until two newlines (or the start) bound the last complete line.
        while pos > 0:
            step = min(1 << 16, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            if buf.count(b"\n") >= 2 or (pos == 0):
                break
    last_nl = buf.rfind(b"\n")
    if last_nl < 0:
        return None, buf, end - len(buf)
    fragment = buf[last_nl + 1:]
    prev_nl = buf.rfind(b"\n", 0, last_nl)
    return buf[prev_nl + 1:last_nl + 1], fragment, end - len(fragment)


class Mirror:
    """Appends lines to ``events.jsonl`` in seq order, under the home's write lock."""

    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self.fsync = fsync
        self.problem: str | None = None
        self._size = -1  # size after our last write; another writer changes it
        self._seq = 0

    def _tail_seq(self) -> int:
        size = os.path.getsize(self.path)
        if size == self._size:
            return self._seq
        line, fragment, _ = read_tail(self.path)
        if fragment:
            raise EnvelopeError("torn last line")
        self._seq = line_seq(line) if line else 0
        self._size = size
        return self._seq

    def check_and_complete(self, recorder: "Recorder") -> None:
        """On open: complete a mirror that is behind; record a problem for one that disagrees."""
        if not os.path.exists(self.path):
            open(self.path, "ab").close()
        line, fragment, frag_at = read_tail(self.path)
        head = recorder.head()
        try:
            tail = line_seq(line) if line else 0
        except EnvelopeError as exc:
            self.problem = f"{self.path}: last line is not an event ({exc}); not rewritten"
            return
        if tail > head.seq:
            self.problem = (f"{self.path} is ahead of the SQLite store: mirror ends at seq {tail}, "
                            f"SQLite at seq {head.seq}; not rewritten")
            return
        if tail:
            stored = next(iter(recorder.lines(tail)), (0, b""))[1]
            if stored != line:
                self.problem = f"{self.path} disagrees with the SQLite store at seq {tail}; not rewritten"
                return
        if fragment:
            expected = next(iter(recorder.lines(tail + 1)), (0, b""))[1]
            if not expected.startswith(fragment):
                self.problem = (f"{self.path} ends with {len(fragment)} bytes that are not part of "
                                f"seq {tail + 1}; not rewritten")
                return
            with open(self.path, "r+b") as fh:  # an interrupted write: drop the torn bytes
                fh.truncate(frag_at)
        self._size, self._seq = os.path.getsize(self.path), tail
        if tail < head.seq:
            self._write(line for _, line in recorder.lines(tail + 1))

    def append(self, recorder: "Recorder", first_seq: int, lines: list[bytes]) -> None:
        """After a commit: write ``lines`` (seq ``first_seq`` on), catching up first if behind."""
        if self.problem:
            return
        tail = self._tail_seq()
        if tail == first_seq - 1:
            self._write(lines)
        elif tail < first_seq - 1:
            self._write(line for _, line in recorder.lines(tail + 1))
        # tail >= first_seq: another process already caught the mirror up past our events

    def _write(self, lines: Iterable[bytes]) -> None:
        last = None
        with open(self.path, "ab") as fh:
            for line in lines:
                fh.write(line)
                last = line
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
            self._size = fh.tell()
        if last is not None:
            self._seq = line_seq(last)
