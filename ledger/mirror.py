"""The JSONL mirror of a home's SQLite store: written after each commit, completed after a crash.

The mirror is a derived copy: every line equals the line the SQLite row gives. Everything here
runs under the home's write lock. A mirror that is behind (a crash between commit and mirror
write, or whole lines cut off its end: the two cannot be told apart) is completed from SQLite;
nothing is lost, SQLite is the store. A torn last line that is a prefix of the line it should be
is an interrupted write and is completed too. A mirror that disagrees in any other way (a last
line that differs from SQLite, a mirror ahead of SQLite) is reported in ``problem`` and never
rewritten: appends stop until a person looks (``evalledger verify`` says where).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Iterator

from evalledger.ledger.blob_lines import is_blob_line
from evalledger.ledger.envelope import EnvelopeError, line_seq
from evalledger.ledger.persistence import is_disk_full

if TYPE_CHECKING:
    from evalledger.ledger.sqlite import SQLiteRecorder

_FLUSH_BYTES = 1 << 20   # a catch-up writes at most about this many bytes of lines at once

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
            if buf.count(b"\n") >= 2:
                break
    last_nl = buf.rfind(b"\n")
    if last_nl < 0:
        return None, buf, end - len(buf)
    fragment = buf[last_nl + 1:]
    prev_nl = buf.rfind(b"\n", 0, last_nl)
    return buf[prev_nl + 1:last_nl + 1], fragment, end - len(fragment)


def lines_upto(path: str, size: int | None) -> Iterator[bytes]:
    """The lines of a file within its first ``size`` bytes (all of it when None); a cut line last."""
    with open(path, "rb") as fh:
        if size is None:
            yield from fh
            return
        left = size
        for line in fh:
            if len(line) >= left:
                yield line[:left]
                return
            left -= len(line)
            yield line


class MirrorFile:
    """What every form of a home's mirror shares: its file, the descriptor kept for appending, the
    size and seq after our last write, and how a failed write is recorded (appends then stop)."""

    #: what a write or a catch-up may raise; the events are committed whatever happens in the mirror
    WRITE_ERRORS: tuple[type[Exception], ...] = (OSError, EnvelopeError, ValueError)

    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self.fsync = fsync
        self.problem: str | None = None
        self.disk_full = ""   # the problem is only a full disk (its reason): the next open completes the mirror
        self._fd: int | None = None
        self._size = -1  # size after our last write or check; a different size means someone else wrote
        self._seq = 0    # seq of the last event at that size
        self.blob_path = ""   # where blob lines go beside the mirror ("" when the mirror holds them itself)

    def size(self) -> int | None:
        """The mirror's size in bytes (None when there is no mirror file)."""
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return None

    def recover(self, recorder: "SQLiteRecorder") -> None:
        """Bring the mirror level with SQLite, or record in ``problem`` why it cannot be."""
        raise NotImplementedError

    def catch_up(self, recorder: "SQLiteRecorder", first_seq: int) -> None:
        """After a commit whose lines were not kept (``SQLiteRecorder.append_chunks``): write what
        the store holds past the mirror, streamed from the table; a failure is recorded in
        ``problem`` as for ``append`` (the events are committed whatever happens here)."""
        if self.problem:
            return
        try:
            self.recover(recorder)
        except self.WRITE_ERRORS as exc:
            self._failed(exc, first_seq, recorder.head_seq_unlocked())

    def retry_if_full(self, recorder: "SQLiteRecorder") -> None:
        """Try again to complete a mirror stopped only by a full disk (space may have been freed
        since): a long-lived process, the watch daemon, otherwise refused every append until it
        was restarted. Call under the home's write lock; a failure is recorded again."""
        if self.problem and self.disk_full:
            first = self._seq + 1
            self.problem, self.disk_full = None, ""
            self.catch_up(recorder, first)

    def _failed(self, exc: Exception, first_seq: int, last_seq: int) -> None:
        """Record why the mirror could not be written after seq ``first_seq - 1`` (appends stop)."""
        if isinstance(exc, OSError) and is_disk_full(exc):
            self.disk_full = exc.strerror or str(exc)
            self.problem = (f"{self.path}: the disk is full ({exc.strerror}): every event up to seq "
                            f"{last_seq} is committed in the SQLite store, the mirror stops before seq "
                            f"{self._seq + 1}; free space and run the command again (opening the home "
                            "completes the mirror)")
            return
        self.problem = f"{self.path}: could not write the mirror after seq {first_seq - 1}: {exc}"

    def _current_size(self) -> int:
        return os.fstat(self._fd).st_size if self._fd is not None else self.size() or 0

    def close(self) -> None:
        """Close the descriptor kept for appending."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Mirror(MirrorFile):
    """Appends lines to ``events.jsonl`` in seq order, under the home's write lock."""

    def __init__(self, path: str, fsync: bool = False):
        super().__init__(path, fsync)
        self._blobs_checked = False

    def recover(self, recorder: "SQLiteRecorder") -> None:
        """Bring the mirror level with SQLite, or record why it cannot be done without rewriting it."""
        self.problem = None
        self.disk_full = ""
        if not os.path.exists(self.path):
            open(self.path, "ab").close()
        line, fragment, frag_at = read_tail(self.path)
        head = recorder.head()
        try:
            tail = line_seq(line) if line else 0
        except (EnvelopeError, ValueError) as exc:
            self.problem = f"{self.path}: its last line is not an event ({exc}); not rewritten"
            return
        if tail > head.seq:
            self.problem = (f"{self.path} is ahead of the SQLite store: the mirror ends at seq {tail}, "
                            f"SQLite at seq {head.seq}; not rewritten")
            return
        if tail:
            stored = next(recorder.lines(tail, tail), (0, b""))[1]
            if stored != line:
                self.problem = f"{self.path} differs from the SQLite store at seq {tail}; not rewritten"
                return
        if fragment:
            expected = next(recorder.lines(tail + 1, tail + 1), (0, b""))[1]
            if not expected.startswith(fragment):
                self.problem = (f"{self.path} ends with {len(fragment)} bytes that are not part of "
                                f"seq {tail + 1}; not rewritten")
                return
            with open(self.path, "r+b") as fh:  # an interrupted write: drop the torn bytes
                fh.truncate(frag_at)
        self._size, self._seq = os.path.getsize(self.path), tail
        if tail < head.seq:
            self._write_split(recorder.mirror_lines(tail + 1, head.seq))

    def append(self, recorder: "SQLiteRecorder", first_seq: int, lines: list[bytes], last_seq: int,
               checked: bool = False) -> None:
        """After a commit: write ``lines`` (seq ``first_seq`` on), catching up first if behind.

        ``checked``: the store proved nobody committed since our last append (so nobody wrote
        the mirror either) and the size check can be skipped. The events are committed whatever
        happens here, so a failure is recorded in ``problem`` (stopping later appends) rather
        than raised as if the append had failed.
        """
        if self.problem:
            return
        try:
            if self._seq != first_seq - 1 or (not checked and self._size != self._current_size()):
                # Another process wrote, or crashed between its commit and its mirror write.
                self.recover(recorder)
            elif self.blob_path and any(is_blob_line(line) for line in lines):
                self._write_split(lines, last_seq)
            elif len(lines) == 1 and self._fd is not None and not self.fsync:
                self._write_all(lines[0])  # the one-event append: the hot path, kept short
                self._seq = last_seq
            else:
                self._write(lines, last_seq)
        except self.WRITE_ERRORS as exc:
            self._failed(exc, first_seq, last_seq)

    def _write_split(self, lines: Iterable[bytes], last_seq: int | None = None) -> None:
        """Write blob lines to the mirror's blob file (synced first: an event line never goes out
        before the blobs it uses) and the event lines to the mirror."""
        events: list[bytes] = []
        blobs: list[bytes] = []
        held = 0
        for line in lines:
            (blobs if is_blob_line(line) else events).append(line)
            held += len(line)
            # by bytes too: 1,000 lines of a big benchmark's registration parts are hundreds of MB
            if len(events) >= 1000 or held >= _FLUSH_BYTES:
                self._write_blobs(blobs)
                self._write(events)
                events, blobs, held = [], [], 0
        self._write_blobs(blobs)
        if events:
            self._write(events, last_seq)

    def _write_blobs(self, lines: list[bytes]) -> None:
        """Append blob lines to ``<mirror>.blobs`` (a torn line a crash left there is cut first)."""
        if not lines or not self.blob_path:
            return
        if not self._blobs_checked and os.path.exists(self.blob_path):
            _, fragment, frag_at = read_tail(self.blob_path)
            if fragment:
                with open(self.blob_path, "r+b") as fh:
                    fh.truncate(frag_at)
        self._blobs_checked = True
        with open(self.blob_path, "ab") as fh:
            fh.write(b"".join(lines))
            if self.fsync:
                fh.flush()
                os.fsync(fh.fileno())

    def _write(self, lines: Iterable[bytes], last_seq: int | None = None) -> None:
        """Append lines (the last one holding ``last_seq``) through one O_APPEND descriptor."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        last = None
        chunk: list[bytes] = []
        for line in lines:
            chunk.append(line)
            last = line
            if len(chunk) >= 1000:
                self._write_all(b"".join(chunk))
                chunk = []
        if chunk:
            self._write_all(b"".join(chunk))
        if self.fsync:
            os.fsync(self._fd)
        if last is not None:
            self._seq = line_seq(last) if last_seq is None else last_seq

    def _write_all(self, data: bytes) -> None:
        fd = self._fd
        assert fd is not None, "the mirror is written only after it was opened"
        written = os.write(fd, data)
        if written != len(data):  # a short write (a full disk, a signal): finish it or raise
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view):]
        self._size += len(data)
