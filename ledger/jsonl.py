"""The JSONL backend: one canonical envelope a line, appended under a file lock, fsync per batch.

A plain file that any tool can read. Writers take an exclusive ``flock`` on the file; the index
of ids and stream versions is built by scanning the file and caught up when another process has
appended. A torn last line (a writer killed mid-write, never acknowledged) is ignored by readers
and cut off by the next writer.
"""

from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator

from ledger.envelope import Event, event_from_line, line_bytes
from ledger.mirror import line_seq
from ledger.persistence import ConflictError, Head, LedgerError, Prepared, Recorder, chain_start, seal
from ledger.envelope import GENESIS_HASH, split_line


class JSONLRecorder(Recorder):
    """Events in one JSONL file (the store itself, not a mirror)."""

    def __init__(self, path: str, durability: str = "normal", readonly: bool = False):
        self.path = path
        self.location = path
        self.durability = durability
        self.readonly = readonly
        if not os.path.exists(path):
            if readonly:
                raise LedgerError(f"{path}: no such ledger file")
            open(path, "ab").close()
        self._thread_lock = threading.RLock()
        self._indexed_to = 0  # bytes of the file already folded into the index
        self._ids: dict[str, int] = {}
        self._offsets: list[int] = []  # byte offset of each seq's line (index seq - 1)
        self._versions: dict[str, int] = {}
        self._head = Head(0, GENESIS_HASH)

    @contextmanager
    def _locked(self):
        with self._thread_lock:
            fh = open(self.path, "r+b")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                yield fh
            finally:
                fh.close()

    def _catch_up(self, fh, repair: bool) -> None:
        """Fold lines appended since the last look into the index; cut a torn tail if repairing."""
        fh.seek(self._indexed_to)
        offset = self._indexed_to
        for line in fh:
            if not line.endswith(b"\n"):
                if repair:
                    fh.truncate(offset)
                break
            canonical, _, hash = split_line(line)
            seq = line_seq(line)
            if seq != len(self._offsets) + 1:
                raise LedgerError(f"{self.path}: seq {seq} found where seq {len(self._offsets) + 1} was "
                                  "expected; run 'evalledger verify'")
            event = event_from_line(line)
            self._ids[event.id] = seq
            self._versions[event.stream] = event.version
            self._offsets.append(offset)
            self._head = Head(seq, hash)
            offset += len(line)
        self._indexed_to = offset

    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        with self._locked() as fh:
            self._catch_up(fh, repair=True)
            seq, prev_hash = chain_start(self._head)
            out: list[Event] = []
            lines: list[bytes] = []
            staged: dict[str, Event] = {}
            versions: dict[str, int] = {}
            for p in batch:
                if p.id in staged:
                    out.append(staged[p.id])
                    continue
                if p.id in self._ids:
                    staged[p.id] = self._event_at(fh, self._ids[p.id])
                    out.append(staged[p.id])
                    continue
                if p.stream not in versions:
                    versions[p.stream] = self._versions.get(p.stream, 0)
                    want = expected.get(p.stream)
                    if want is not None and want != versions[p.stream]:
                        raise ConflictError(f"stream {p.stream!r} is at version {versions[p.stream]}, "
                                            f"expected {want}; nothing was appended")
                versions[p.stream] += 1
                event, canonical = seal(p, seq, versions[p.stream], prev_hash)
                staged[p.id] = event
                out.append(event)
                lines.append(line_bytes(canonical, prev_hash, event.hash))
                seq, prev_hash = seq + 1, event.hash
            if lines:
                fh.seek(0, os.SEEK_END)
                fh.write(b"".join(lines))
                fh.flush()
                os.fsync(fh.fileno())
                self._catch_up(fh, repair=False)
        return out

    def _event_at(self, fh, seq: int) -> Event:
        fh.seek(self._offsets[seq - 1])
        return event_from_line(fh.readline())

    def lines(self, from_seq: int = 1) -> Iterator[tuple[int, bytes]]:
        seq = 0
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    return  # a torn tail is not an event
                seq += 1
                if seq >= from_seq:
                    yield seq, line

    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        wanted = set(types) if types is not None else None
        for seq, line in self.lines(from_seq):
            if to_seq is not None and seq > to_seq:
                return
            event = event_from_line(line)
            if wanted is not None and event.type not in wanted:
                continue
            if stream is not None and event.stream != stream:
                continue
            yield event

    def _index(self) -> None:
        with self._thread_lock, open(self.path, "rb") as fh:
            self._catch_up(fh, repair=False)

    def head(self) -> Head:
        self._index()
        return self._head

    def get(self, id: str) -> Event | None:
        self._index()
        seq = self._ids.get(id)
        if seq is None:
            return None
        with open(self.path, "rb") as fh:
            return self._event_at(fh, seq)

    def stream_version(self, stream: str) -> int:
        self._index()
        return self._versions.get(stream, 0)

    def import_lines(self, lines: Iterable[bytes]) -> int:
        with self._locked() as fh:
            self._catch_up(fh, repair=True)
            if self._head.seq:
                raise LedgerError(f"{self.path} is not empty; import goes into an empty ledger only")
            count = 0
            fh.seek(0, os.SEEK_END)
            for line in lines:
                fh.write(line)
                count += 1
            fh.flush()
            os.fsync(fh.fileno())
            self._catch_up(fh, repair=False)
        return count
