"""The JSONL backend: one canonical envelope a line, appended under a file lock, fsync per batch.

A plain file that any tool can read. Writers take an exclusive ``flock`` on the file; the index
of ids and stream versions is built by scanning the file and caught up when another process has
appended.

A batch is all or nothing even when its writer is killed half-way through the write: a batch of
several lines is first written whole to ``<file>.pending`` (the offset it starts at, then its
lines; fsync, then renamed into place), then appended to the file, then the pending file is
removed. Whoever takes the lock next finds a pending file and rolls the batch forward: the file
is cut back to the recorded offset and the batch written again. A single line needs no pending
file: a torn last line (a writer killed mid-write, never acknowledged) is ignored by readers and
cut off by the next writer or writable open.

Tracking records live in ``<file>.tracking.json`` ({name: position}), replaced atomically
(written whole to a temporary file, fsynced, renamed) under the same lock, right after the batch
they go with: after a crash a position can lag its batch (the stage redoes work whose appends
are idempotent) but never run ahead of it.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import IO, Any, Callable, Iterable, Iterator, NamedTuple

import orjson

from evalledger.ledger.blob_lines import BlobFile, blob_line, interleave
from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import DOLLAR, escape_batch, has_markers
from evalledger.ledger.envelope import (
    GENESIS_HASH,
    EnvelopeError,
    Event,
    event_from_line,
    line_bytes,
    line_seq,
    split_line,
)
from evalledger.ledger.filelock import FileLock
from evalledger.ledger.importer import checked_lines
from evalledger.ledger.lost_blobs import NoBlobTable, refers_anywhere
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.mirror import lines_upto, read_tail
from evalledger.ledger.persistence import (
    ConflictError,
    Head,
    LedgerError,
    Prepared,
    Recorder,
    TreeState,
    chain_start,
    seal,
)
from evalledger.ledger.same_file import CheckedHold, OpenedFile
from evalledger.ledger.verify import VerifyReport, verify_lines
from evalledger.ledger.verify_blobs import checked_blobs


class Snapshot(NamedTuple):
    """A JSONL ledger at one instant: its size, a pending batch, its last complete seq, a torn tail."""

    size: int
    pending: bool
    last_seq: int | None
    torn: bool


def pending_path(path: str) -> str:
    """Where a batch of several lines waits while it is being appended."""
    return path + ".pending"


def tracking_path(path: str) -> str:
    """Where a JSONL ledger keeps its tracking records."""
    return path + ".tracking.json"


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
        self._lock = FileLock(path, create=not readonly)
        self._thread_lock = self._lock.thread_lock
        self._fd: int | None = None
        self._indexed_to = 0  # bytes of the file already folded into the index
        self._ids: dict[str, int] = {}
        self._offsets: list[int] = []  # byte offset of each seq's line (index seq - 1)
        self._versions: dict[str, int] = {}
        self._head = Head(0, GENESIS_HASH)
        self._tree = Frontier()  # the Merkle tree over the indexed lines' hashes, folded as they are indexed
        # Blobs, for a ledger imported from a home with the blob store: their lines in <file>.blobs.
        self.blob_file = BlobFile(path + ".blobs")
        self.blobs = BlobReader(self.blob_file.load, self.blob_file.path) if os.path.exists(self.blob_file.path) \
            else None
        # reads without it: a reference there is a blob lost with the file (deleted, or not copied along)
        self._no_blobs = NoBlobTable(path, f"blob file {self.blob_file.path}", "deleted")
        # writes take the lock, then check the path still names the file opened (same_file.py)
        self._write_hold = self._lock.exclusive() if readonly else CheckedHold(self._lock, OpenedFile(path))
        if not readonly:
            with self._lock.exclusive():
                self._recover()

    # --- recovery and index -----------------------------------------------------------------------
    def _recover(self) -> None:
        """Under the lock: roll an interrupted batch forward, then cut a torn last line."""
        pending = pending_path(self.path)
        if os.path.exists(pending):
            with open(pending, "rb") as src, open(self.path, "r+b") as fh:
                offset = int(src.readline())
                fh.truncate(offset)
                fh.seek(offset)
                shutil.copyfileobj(src, fh, 1 << 20)   # streamed: a long batch (append_chunks) is never held
                fh.flush()
                os.fsync(fh.fileno())
            os.unlink(pending)
            return
        _, fragment, frag_at = read_tail(self.path)
        if fragment:
            with open(self.path, "r+b") as fh:
                fh.truncate(frag_at)

    def _catch_up(self) -> None:
        """Fold complete lines appended since the last look into the index, checking each."""
        with open(self.path, "rb") as fh:
            fh.seek(self._indexed_to)
            offset = self._indexed_to
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # a torn tail (or a write in progress) is not an event
                self._index_line(line, offset)
                offset += len(line)
        self._indexed_to = offset

    def _index_line(self, line: bytes, offset: int) -> None:
        seq = len(self._offsets) + 1
        try:
            split_line(line)
            env = orjson.loads(line)
            id, stream, version, hash = env["id"], env["stream"], env["version"], env["hash"]
        except (EnvelopeError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"{self.path}: seq {seq} (byte {offset}) is not an event ({exc}); "
                              "run 'evalledger verify'") from None
        fault = None
        if env.get("seq") != seq:
            fault = f"holds seq {env.get('seq')}"
        elif id in self._ids:
            fault = f"repeats the id of seq {self._ids[id]}"
        elif version != self._versions.get(stream, 0) + 1:
            fault = f"gives stream {stream!r} version {version} after {self._versions.get(stream, 0)}"
        if fault:
            raise LedgerError(f"{self.path}: the line of seq {seq} (byte {offset}) {fault}; "
                              "run 'evalledger verify'")
        self._ids[id] = seq
        self._versions[stream] = version
        self._offsets.append(offset)
        self._head = Head(seq, hash)
        self._tree.append(bytes.fromhex(hash))

    # --- appending --------------------------------------------------------------------------------
    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        with self._write_hold:
            self._recover()
            self._catch_up()
            out, lines = self._seal(batch, expected)
            if lines:
                self._write_batch(lines)
                self._catch_up()
            if tracking is not None:
                self._write_tracking(*tracking)
        return out

    def append_chunks(self, chunks: Iterable[list[Prepared]],
                      seen: Callable[[list[Event], list[Event]], None]) -> None:
        """The chunks' lines are written to the pending file as they are sealed (one chunk held at a
        time), then appended as one batch the way ``_write_batch`` appends several lines: a kill
        before the pending file is complete leaves nothing, one after it is rolled forward."""
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        with self._write_hold:
            self._recover()
            self._catch_up()
            pending = pending_path(self.path)
            tmp = pending + ".tmp"
            try:
                with open(tmp, "w+b") as fh:
                    header = b"%d\n" % self._indexed_to
                    fh.write(header)
                    run = _Staged(fh, chain_start(self._head), self._resolver())
                    for batch in chunks:
                        out, lines = self._seal(batch, {}, run)
                        for event, line in zip(run.new, lines):
                            run.ids[event.id] = (fh.tell(), len(line))
                            fh.write(line)
                        seen(out, run.new)
                    if fh.tell() > len(header):
                        fh.flush()
                        os.fsync(fh.fileno())
                        os.replace(tmp, pending)   # the batch is decided from here on
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            if os.path.exists(pending):
                self._recover()   # appends the pending batch to the file, streamed, and removes it
                self._catch_up()

    def _seal(self, batch: list[Prepared], expected: dict[str, int],
              run: "_Staged | None" = None) -> tuple[list[Event], list[bytes]]:
        """Give the new events of a batch their seq, version and hashes (nothing written yet);
        ``run`` carries the chain, the versions and the staged ids on from earlier chunks of one
        batch (``append_chunks``), and gets this chunk's new events in ``run.new``."""
        seq, prev_hash = chain_start(self._head) if run is None else run.next
        out: list[Event] = []
        lines: list[bytes] = []
        staged: dict[str, Event] = {}
        versions: dict[str, int] = {} if run is None else run.versions
        new: list[Event] = []
        # stored as a store with blobs stores them: a reference-shaped object escaped, in any type
        for p in escape_batch(batch):
            if p.id in staged:
                out.append(staged[p.id])
                continue
            if p.id in self._ids:
                staged[p.id] = self._event_at(self._ids[p.id])
                out.append(staged[p.id])
                continue
            if run is not None and p.id in run.ids:   # staged by an earlier chunk of this batch
                staged[p.id] = run.event(p.id)
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
            new.append(event)
            lines.append(line_bytes(canonical, prev_hash, event.hash))
            seq, prev_hash = seq + 1, event.hash
        if run is not None:
            run.next, run.new = (seq, prev_hash), new
        return out, lines

    def _write_batch(self, lines: list[bytes]) -> None:
        """Append the lines; several go through the pending file so a kill cannot split them."""
        data = b"".join(lines)
        pending = None
        if len(lines) > 1:
            pending = pending_path(self.path)
            tmp = pending + ".tmp"
            with open(tmp, "wb") as fh:
                fh.write(b"%d\n" % self._indexed_to)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, pending)  # the batch is decided from here on
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)
        if pending:
            os.unlink(pending)

    def _event_at(self, seq: int) -> Event:
        with open(self.path, "rb") as fh:
            fh.seek(self._offsets[seq - 1])
            return event_from_line(fh.readline(), self._resolver())

    # --- reading ----------------------------------------------------------------------------------
    def lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[tuple[int, bytes]]:
        seq = 0
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    return  # a torn tail is not an event
                seq += 1
                if to_seq is not None and seq > to_seq:
                    return
                if seq >= from_seq:
                    yield seq, line

    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        wanted = set(types) if types is not None else None
        resolve = self.blobs.resolve if self.blobs is not None else None
        # without the blob file, a reference is a blob lost with it and an escaped literal is
        # unwrapped: an event holding a "$" (one memchr, where a call a line cost a tenth of a read
        # of small events) is looked at, and one holding a marker read again through the refusal
        lost = self._no_blobs if self.blobs is None else None
        for _, line in self.lines(from_seq, to_seq):
            event = event_from_line(line, resolve)
            if wanted is not None and event.type not in wanted:
                continue
            if stream is not None and event.stream != stream:
                continue
            if lost is not None and DOLLAR in line and has_markers(line):
                event = event_from_line(line, lost.resolve)
            yield event

    def _resolver(self) -> Callable[[bytes | str, Any], Any]:
        """What completes a line's payload: the blob file's reader, or without one the refusal of a
        payload that refers to a blob (the file was lost)."""
        return (self.blobs or self._no_blobs).resolve

    def export_lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[bytes]:
        """The lines ``export`` writes: with blobs, each blob's line before the first event that uses
        it; without the blob file, the first event that refers to a blob stops them."""
        if self.blobs is None:
            return self._no_blobs.lines(super().export_lines(from_seq, to_seq))
        return interleave(((line, line) for _, line in self.lines(from_seq, to_seq)), self.blobs,
                          self.blob_file.load)

    def _index(self) -> None:
        with self._thread_lock:
            self._catch_up()

    def head(self) -> Head:
        """The last complete line's seq and hash (read from the end of the file, no scan)."""
        with self._thread_lock:
            if os.path.getsize(self.path) == self._indexed_to:
                return self._head
            line, _, _ = read_tail(self.path)
        if line is None:
            return Head(0, GENESIS_HASH)
        env = orjson.loads(line)
        return Head(env["seq"], env["hash"])

    def get(self, id: str) -> Event | None:
        self._index()
        seq = self._ids.get(id)
        return None if seq is None else self._event_at(seq)

    def stream_version(self, stream: str) -> int:
        self._index()
        return self._versions.get(stream, 0)

    def snapshot(self) -> Snapshot:
        """What the file holds at one instant with no writer mid-append (for verify)."""
        with self._lock.shared():
            line, fragment, _ = read_tail(self.path)
            try:
                last = line_seq(line) if line else 0
            except (EnvelopeError, ValueError):
                last = None  # a damaged last line: verify reads up to the size instead
            return Snapshot(os.path.getsize(self.path), os.path.exists(pending_path(self.path)), last,
                            bool(fragment))

    def verify(self, expect_head: Head | None = None) -> VerifyReport:
        """Verify the file's lines up to the last complete line of one snapshot (taken under the
        lock: a writer's later lines, or one it is writing, are not damage)."""
        snap = self.snapshot()
        pending = pending_path(self.path) if snap.pending else None
        if snap.last_seq is None:
            report = verify_lines(lines_upto(self.path, snap.size), self.location, expect_head, pending)
        else:
            with open(self.path, "rb") as fh:  # the file itself, iterated in C; verify stops at the snapshot's seq
                report = verify_lines(fh, self.location, expect_head, pending, limit=snap.last_seq, torn=snap.torn)
        if report.ok:
            self._verify_blobs(report, snap.size)
        return report

    def _verify_blobs(self, report: VerifyReport, size: int) -> None:
        """Add to ``report`` each event (up to its head) whose blob is missing or altered in the blob
        file; without the file, each that refers to a blob (looked for only when the bytes hold one)."""
        if self.blobs is not None:
            reader = BlobReader(self.blob_file.load, self.blob_file.path, keep=0)
        elif refers_anywhere(self.path, size):
            reader = self._no_blobs.reader()
        else:
            return
        rows = ((seq, None, None, None, None, None, line) for seq, line in self.lines(1, report.head.seq))
        for _ in checked_blobs(rows, [reader], report.problems):
            pass

    def tree_state(self) -> TreeState:
        """The tree derived from the file's lines as the index reads them: a JSONL ledger is a plain
        file any tool may append to, so nothing beside it is trusted to hold the tree."""
        with self._thread_lock:
            self._catch_up()
            return TreeState(self._tree.size, self._tree.state(), f"{self.path} (derived from its lines)",
                             "derived from the file's lines each time it is opened and caught up")

    def leaf_hashes(self, to_seq: int) -> Iterator[bytes]:
        """The hash of each line, sliced from its end (no JSON parse)."""
        for _, line in self.lines(1, to_seq):
            yield bytes.fromhex(line[-67:-3].decode("ascii"))

    def own_files(self) -> list[str]:
        """The file itself (its pending batch and tracking sidecar sit beside it, same prefix)."""
        return [self.path]

    def read_models_path(self) -> str:
        """A sibling ``<name>.projections.db``: the JSONL file holds events only."""
        root, _ = os.path.splitext(self.path)
        return root + ".projections.db"

    # --- tracking ---------------------------------------------------------------------------------
    def tracking_position(self, name: str) -> int:
        """The position recorded in the tracking sidecar (0 when none, or no sidecar yet)."""
        return int(self._read_tracking().get(name, 0))

    def set_tracking(self, name: str, position: int) -> None:
        """Record a position on its own, under the write lock."""
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        with self._write_hold:
            self._write_tracking(name, position)

    def tracking_records(self) -> dict[str, int]:
        """Every tracking record, name -> position (the whole sidecar)."""
        return dict(self._read_tracking())

    def _read_tracking(self) -> dict[str, int]:
        path = tracking_path(self.path)
        try:
            with open(path, "rb") as fh:
                records = orjson.loads(fh.read())
        except FileNotFoundError:
            return {}
        except orjson.JSONDecodeError as exc:
            raise LedgerError(f"{path}: the tracking records are not JSON ({exc}); delete the file to "
                              "let the stages scan from the start") from None
        if not isinstance(records, dict) or not all(isinstance(v, int) for v in records.values()):
            raise LedgerError(f"{path}: the tracking records are not an object of name: position; delete "
                              "the file to let the stages scan from the start")
        return records

    def _write_tracking(self, name: str, position: int) -> None:
        """Under the write lock: replace the sidecar whole, so a reader sees the old or the new one."""
        records = self._read_tracking()
        records[name] = int(position)
        path = tracking_path(self.path)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(records, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())  # a crash must leave the old records or the new, never an empty file
        os.replace(tmp, path)

    # --- import -----------------------------------------------------------------------------------
    def import_lines(self, lines: Iterable[bytes], source: str = "the input") -> int:
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        with self._write_hold:
            self._recover()
            if os.path.getsize(self.path):
                raise LedgerError(f"{self.path} is not empty; import goes into an empty ledger only")
            count = 0
            blob_path = self.blob_file.path
            try:
                with open(self.path, "r+b") as fh, open(blob_path, "ab") as blob_fh:
                    def keep_blob(key: str, packed: bytes) -> None:
                        blob_fh.write(blob_line(key, packed))
                    for _, line in checked_lines(lines, source, keep_blob):
                        fh.write(line)
                        count += 1
                    fh.flush()
                    blob_fh.flush()
                    os.fsync(blob_fh.fileno())
                    os.fsync(fh.fileno())
            except BaseException:
                with open(self.path, "r+b") as fh:  # nothing of a refused file is kept
                    fh.truncate(0)
                if os.path.exists(blob_path):
                    os.unlink(blob_path)
                raise
            if os.path.getsize(blob_path):
                self.blobs = BlobReader(self.blob_file.load, blob_path)
            else:
                os.unlink(blob_path)   # a ledger without blobs keeps no blob file
            self._catch_up()
        return count

    def close(self) -> None:
        self.blob_file.close()
        with self._thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._lock.close()


class _Staged:
    """What ``JSONLRecorder.append_chunks`` carries from one chunk to the next: the pending file
    being written, the next seq and prev_hash, the stream versions, and where each staged id's
    line is in the file (offset, length), so a later chunk repeating an id gets its event back."""

    def __init__(self, fh: IO[bytes], next: tuple[int, str], resolve: Callable[[bytes | str, Any], Any]):
        self.fh = fh
        self.next = next
        self.resolve = resolve
        self.versions: dict[str, int] = {}
        self.ids: dict[str, tuple[int, int]] = {}
        self.new: list[Event] = []

    def event(self, id: str) -> Event:
        """The staged event ``id``, read back from the pending file."""
        offset, size = self.ids[id]
        self.fh.flush()
        return event_from_line(os.pread(self.fh.fileno(), size, offset), self.resolve)
