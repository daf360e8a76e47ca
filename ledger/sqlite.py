"""The SQLite backend: table ``events`` with one column per envelope field, WAL, append-only.

Writers serialise on a lock file beside the database (so the JSONL mirror is written in seq
order, after the commit, by the process that committed) and on ``BEGIN IMMEDIATE``. Triggers
refuse UPDATE and DELETE on ``events``.

One event per transaction must cost little more than a raw INSERT, so the writer caches the
head and the stream versions it has seen and lets the seq key tell it when they went stale.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from functools import partial
from itertools import chain
from typing import Any, Callable, Collection, Iterable, Iterator, Literal

from evalledger.ledger.blob_lines import BlobFile, blob_line, interleave
from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import (
    blob_file_path,
    escape_batch,
    has_markers,
    pack,
    page_events,
    remember_blobs,
    split_batch,
)
from evalledger.ledger.envelope import GENESIS_HASH, Event, line_bytes
from evalledger.ledger.filelock import FileLock
from evalledger.ledger.gz_members import is_gz_mirror
from evalledger.ledger.lost_blobs import NoBlobTable
from evalledger.ledger.lost_store import refuse_if_lost
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.mirror import Mirror
from evalledger.ledger.mirror_gz import GzMirror
from evalledger.ledger.paging import row_pages
from evalledger.ledger.persistence import (
    TREE_KEPT,
    TREE_LAG,
    ConflictError,
    DiskFull,
    Head,
    LedgerDamaged,
    LedgerError,
    Prepared,
    Recorder,
    ScanRow,
    TreeState,
    advanced_tree,
    chain_start,
    is_disk_full,
    seal,
    tree_built_note,
)
from evalledger.ledger.row_codec import (
    COMPACT_COLUMNS,
    COMPACT_SCHEMA,
    ROWS_FORMS,
    hex_of,
    is_compact,
    pack_row,
    payload_cells,
    raw_hex,
    unmarked_packing,
    unpack_row,
)
from evalledger.ledger.same_file import CheckedHold, OpenedFile
from evalledger.ledger.sqlite_schema import (
    BLOB_SCHEMA,
    BLOBS_A_QUERY,
    COLUMNS,
    INSERT,
    INSERT_BLOB,
    SCHEMA,
    SELECT_BLOB,
    SELECT_BLOBS,
    TRIGGERS,
    UPSERT_TREE,
    connect,
    damaged,
    has_blob_table,
    is_damage,
    row_line,
)
from evalledger.ledger.verify import Problem, VerifyReport, verify_sqlite
from evalledger.ledger.verify_blobs import checked_blobs

_PAGE = 256  # rows a read fetches at once: small pages stay in the CPU cache (5,000 made reads 25% slower)
# Stream versions cached (cleared past it): ~150 bytes each, and a run writes each case's stream once.
_MAX_CACHED_STREAMS = 10_000
# What an insert gives back: (every event of the batch, the new ones, their lines, new stream versions)
_Inserted = tuple[list[Event], list[Event], list[bytes], dict[str, int]]


class _StaleCache(Exception):
    """The cached head or a cached stream version was out of date (another writer appended)."""


class _Immediate:
    """BEGIN IMMEDIATE .. COMMIT around a ``with`` body of ``recorder``, rolled back whatever the
    body or the commit raises (a full disk is said as such). A plain class: a ``contextmanager``
    generator was 2-4% of a one-event append."""

    __slots__ = ("recorder",)

    def __init__(self, recorder: SQLiteRecorder):
        self.recorder = recorder

    def __enter__(self) -> None:
        try:
            self.recorder.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._undo(exc)
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is not None:
            self._undo(exc)
            return False   # the body's exception goes on
        try:
            self.recorder.conn.execute("COMMIT")
        except BaseException as failed:
            self._undo(failed)
            raise
        return False

    def _undo(self, exc: BaseException) -> None:
        """Roll the transaction back after ``exc``; a full disk is raised as DiskFull instead."""
        if isinstance(exc, sqlite3.Error) and is_disk_full(exc):
            raise self.recorder._full(exc) from None   # _full rolls back
        self.recorder._rollback()


class SQLiteRecorder(Recorder):
    """Events in a SQLite file, with an optional JSONL mirror kept in seq order."""

    def __init__(self, path: str, durability: str = "normal", mirror_path: str | None = None,
                 lock_path: str | None = None, readonly: bool = False, blobs: bool = True,
                 rows: str = "text"):
        if rows not in ROWS_FORMS:
            raise LedgerError(f"rows are 'text' or 'compact', not {rows!r}")
        self.path = path
        self.location = f"{path} (table events)"
        self.readonly = readonly
        if mirror_path:   # a store that lost the events its mirror holds: refused before anything is written
            refuse_if_lost(path, mirror_path)
        self.conn = connect(path, durability, readonly)
        try:
            if mirror_path:
                refuse_if_lost(path, mirror_path, self.conn)
            self._read_store(path, lock_path, readonly, blobs, rows)
        except LedgerDamaged:
            self._close_unopened()
            raise
        except sqlite3.DatabaseError as exc:
            # A header that reads but pages that do not (a file cut short or overwritten whose stale
            # -wal still holds page 1): named here, as connect names a file that is no database.
            if not is_damage(exc):
                raise
            self._close_unopened()
            raise damaged(path, exc) from None
        self._no_blobs = NoBlobTable(path)   # reads without it: a reference there is a blob lost with its table
        self._known_blobs: set[str] = set()   # keys committed by this object: not packed again
        self._blob_lines: dict[str, bytes] = {}   # the blobs the last transaction stored: key -> stored form
        self.mirror: Mirror | GzMirror | None = None
        if mirror_path:   # the compressed mirror keeps its blob lines inside it
            self.mirror = (GzMirror if is_gz_mirror(mirror_path) else Mirror)(mirror_path, fsync=durability == "full")
        if isinstance(self.mirror, Mirror) and self.blobs is not None:
            self.mirror.blob_path = blob_file_path(self.mirror.path)
        if self.mirror and not readonly:
            with self._write_lock():
                try:
                    self.mirror.recover(self)
                except OSError as exc:
                    if not is_disk_full(exc):
                        raise
                    head = self.head_seq_unlocked()
                    self.close()
                    raise DiskFull(f"{mirror_path}: the disk is full ({exc.strerror}): the mirror is behind "
                                   f"{self.location} (which holds every event, up to seq {head}) and cannot "
                                   "be completed; nothing is lost: free space and run the command again",
                                   exc.strerror or str(exc)) from None

    def _close_unopened(self) -> None:
        """Close what an open that is refused had opened (the connection, the lock file if reached)."""
        if hasattr(self, "_lock"):
            self._lock.close()
        self.conn.close()

    def _read_store(self, path: str, lock_path: str | None, readonly: bool, blobs: bool, rows: str) -> None:
        """What the open reads from the store (its tables, rows form, blob table), making the tables
        of a store made now; SQLite's error when the store's pages cannot be read."""
        if readonly and not _has_events_table(self.conn):
            self.conn = _empty_store(self.conn, path)
        self._lock = FileLock(lock_path or path + ".lock", create=not readonly)
        self._thread_lock = self._lock.thread_lock
        self._head: Head | None = None  # cached head and stream versions: see _insert
        self._versions: dict[str, int] = {}
        self._immediate = _Immediate(self)   # BEGIN IMMEDIATE .. COMMIT, as ``with self._immediate:``
        self._tree: Frontier | None = None  # the merkle row as of the cached head (goes stale with it)
        # writes take the lock, then check the file at ``path`` is still the one opened (same_file.py)
        self._write_hold = None if readonly else CheckedHold(self._lock, OpenedFile(path))
        if not readonly:
            with self._write_lock():
                if _has_events_table(self.conn):
                    self.conn.executescript(SCHEMA)   # an older store gets the tables it lacks
                else:   # a store made now, in one transaction: a kill leaves all of it or none
                    # blobs: only a store made now (an older one reads and grows as it was written);
                    # compact rows likewise: a store keeps the rows form it was made with
                    self.conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + (BLOB_SCHEMA if blobs else "")
                                            + (COMPACT_SCHEMA if rows == "compact" else "") + "COMMIT;")
                self._complete_tree()
        # Compact rows (ledger/row_codec.py): cells are packed on insert and unpacked on every read.
        self.compact = is_compact(self.conn)
        self._columns = COMPACT_COLUMNS if self.compact else COLUMNS
        # Packed rows in a store that does not say it holds them (event_rows deleted): read as text,
        # they would fail deep in a read, so reads refuse, verify names the row and writers stop here.
        self.form_problem = None if self.compact else _form_problem(self.conn, self.location)
        if self.form_problem is not None and not readonly:
            self._lock.close()
            self.conn.close()
            raise LedgerError(unreadable(self.form_problem))
        # The blob store (ledger/blobs.py), when this store was made with one: None for an older store.
        self.blobs = BlobReader(self._load_blob, f"{path} (table blobs)", load_many=self._load_blobs) \
            if has_blob_table(self.conn) else None

    def _write_lock(self) -> AbstractContextManager[None]:
        """Serialise writers of this home across threads and processes (the kernel drops it on death);
        StoreReplaced, holding nothing, when the file at the store's path is not the one opened."""
        return self._write_hold or self._lock.exclusive()

    # --- appending --------------------------------------------------------------------------------
    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        self._check_writable()
        blobs: dict[str, bytes] = {}
        batch = split_batch(batch, self._known_blobs, blobs) if self.blobs is not None else escape_batch(batch)
        with self._write_lock():
            level = self._head is not None  # our cached head was the last commit: nobody wrote since
            try:
                out, new, lines, versions = self._transaction(batch, expected, tracking, blobs)
            except _StaleCache:
                level = False
                self._forget()  # another process appended since we looked: look again, once
                try:
                    out, new, lines, versions = self._transaction(batch, expected, tracking, blobs)
                except _StaleCache:
                    raise LedgerError(f"{self.location}: the next seq is taken although the head was "
                                      "just read; run 'evalledger verify'") from None
            if blobs:
                remember_blobs(self._known_blobs, blobs)
                if new and self._blob_lines:   # the mirror writes them to its blob file first
                    lines = [blob_line(key, packed) for key, packed in self._blob_lines.items()] + lines
            if new:
                self._remember(new, versions)
                if self.mirror:
                    self.mirror.append(self, new[0].seq, lines, new[-1].seq, checked=level)
        return out

    def append_chunks(self, chunks: Iterable[list[Prepared]],
                      seen: Callable[[list[Event], list[Event]], None]) -> None:
        """One BEGIN IMMEDIATE .. COMMIT for every chunk, one chunk held at a time; the mirror is
        then completed from the table (``Mirror.catch_up``), so no line is held either."""
        self._check_writable()
        with self._write_lock():
            self._forget()   # head and versions read inside the transaction: the chunks cannot be retried
            added: dict[str, bytes] = {}
            first = 0
            with self._immediate:
                for batch in chunks:
                    stored, new = self._insert_chunk(batch, added)
                    first = first or (new[0].seq if new else 0)
                    seen(stored, new)
            remember_blobs(self._known_blobs, added)
            if first and self.mirror:
                self.mirror.catch_up(self, first)

    def _insert_chunk(self, batch: list[Prepared], added: dict[str, bytes]) -> tuple[list[Event], list[Event]]:
        """Inside ``append_chunks``' transaction: one chunk's blobs and events (stored, new); the
        cached head and versions follow the transaction (``_rollback`` forgets them)."""
        if self.blobs is not None:
            blobs: dict[str, bytes] = {}
            batch = split_batch(batch, self._known_blobs, blobs)
            self._insert_blobs({k: v for k, v in blobs.items() if k not in added})
            added.update(blobs)
        else:   # a store made before blobs stores reference-shaped objects escaped, as one with them
            batch = escape_batch(batch)
        try:
            out, new, _, versions = self._insert(batch, {})
        except _StaleCache:   # cannot happen with the head read in this transaction: say so plainly
            raise LedgerError(f"{self.location}: the next seq is taken inside a write transaction; "
                              "run 'evalledger verify'") from None
        if new:
            self._advance_tree(new)
            self._remember(new, versions)
        return out, new

    def _remember(self, new: list[Event], versions: dict[str, int]) -> None:
        """Cache the head and the streams' versions an insert left (the table has them all)."""
        self._head = Head(new[-1].seq, new[-1].hash)
        if len(self._versions) > _MAX_CACHED_STREAMS:
            self._versions.clear()
        self._versions.update(versions)

    def _transaction(self, batch: list[Prepared], expected: dict[str, int],
                     tracking: tuple[str, int] | None, blobs: dict[str, bytes]) -> _Inserted:
        """One BEGIN IMMEDIATE .. COMMIT holding the batch's new events and their new blobs (and the
        tracking record); the mirror lines of the blobs the table lacked are left in ``_blob_lines``."""
        with self._immediate:
            self._blob_lines = self._insert_blobs(blobs) if blobs else {}
            result = self._insert(batch, expected)
            if result[1]:
                self._advance_tree(result[1])
            if tracking is not None:
                self.conn.execute("INSERT INTO tracking (name, position) VALUES (?, ?) "
                                  "ON CONFLICT(name) DO UPDATE SET position = excluded.position", tracking)
        return result

    # --- blobs --------------------------------------------------------------------------------------
    def _insert_blobs(self, blobs: dict[str, bytes]) -> dict[str, bytes]:
        """Inside the transaction: store the blobs the table lacks; returns their stored forms (a
        blob the table had was mirrored with the event that first used it)."""
        execute = self.conn.execute
        new = {}
        for key, raw in blobs.items():
            packed = pack(raw)
            if execute(INSERT_BLOB, (bytes.fromhex(key), packed)).rowcount:
                new[key] = packed
        return new

    def _load_blob(self, key: str) -> bytes | None:
        """The stored form of blob ``key`` (None when the table lacks it)."""
        with self._thread_lock:
            row = self.conn.execute(SELECT_BLOB, (bytes.fromhex(key),)).fetchone()
        return bytes(row[0]) if row else None

    def _load_blobs(self, keys: list[str]) -> dict[str, bytes]:
        """The stored forms of the blobs of ``keys`` the table holds, by key: one query a
        ``BLOBS_A_QUERY`` keys (a fold's page of requests: one lookup each was 8% of a rebuild)."""
        found: dict[str, bytes] = {}
        with self._thread_lock:
            for start in range(0, len(keys), BLOBS_A_QUERY):
                part = [bytes.fromhex(k) for k in keys[start:start + BLOBS_A_QUERY]]
                rows = self.conn.execute(SELECT_BLOBS % ", ".join("?" * len(part)), part)
                found.update((key.hex(), data) for key, data in rows)
        return found

    def _event(self, row: tuple[Any, ...]) -> Event:
        """An Event from a row of ``COLUMNS``, its blob references resolved when it is read."""
        if self.compact:
            row = unpack_row(row)
        return (self.blobs or self._no_blobs).row_event(*row)

    def export_lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[bytes]:
        """The lines ``export`` writes: the mirror's (``mirror_lines``); a blob the store lost stops it."""
        return self.mirror_lines(from_seq, to_seq, strict=True)

    def mirror_lines(self, from_seq: int = 1, to_seq: int | None = None, strict: bool = False) -> Iterator[bytes]:
        """The lines of seq from_seq..to_seq as the mirror and ``export`` hold them: each blob's line
        before the first of these events that uses it, then the event's line (``interleave``: a
        missing or altered blob raises BlobError when ``strict``, else is passed over)."""
        rows = self._rows("", [], from_seq, to_seq)
        if self.blobs is None:
            return map(row_line, self._no_blobs.rows(rows) if strict else rows)
        return interleave(((row[6], row_line(row)) for row in rows), self.blobs, self._load_blob, strict)

    def _check_writable(self) -> None:
        if self.readonly:
            raise LedgerError(f"{self.path} is open read-only")
        if self.mirror and self.mirror.disk_full:
            with self._write_lock():
                self.mirror.retry_if_full(self)
        if self.mirror and self.mirror.problem:
            if self.mirror.disk_full:
                raise DiskFull(self.mirror.problem, self.mirror.disk_full)
            raise LedgerError(f"appends are stopped until the mirror is looked at: {self.mirror.problem}")

    def head_seq_unlocked(self) -> int:
        """The last seq, for messages (no lock: a message may be one event stale)."""
        return self._select_head().seq

    def _full(self, exc: BaseException) -> DiskFull:
        """The DiskFull to raise for a commit the disk refused: nothing of the batch is in."""
        self._rollback()
        return DiskFull(f"{self.location}: the disk is full ({exc}): nothing of this batch was committed; "
                        f"the ledger holds every event up to seq {self.head_seq_unlocked()}; free space and run "
                        "the command again", str(exc))

    def _forget(self) -> None:
        self._head = None
        self._tree = None
        self._versions.clear()

    # --- the Merkle tree --------------------------------------------------------------------------
    def _advance_tree(self, new: list[Event]) -> None:
        """Inside the append's transaction: fold the new events into the tree and write its row."""
        tree = self._tree
        if tree is None or tree.size != new[0].seq - 1:
            tree = self._stored_tree(new[0].seq - 1)
        before = tree.size
        for event in new:
            tree.append(bytes.fromhex(event.hash))
        # The row is written when an append crosses a multiple of TREE_LAG events: one more page in
        # every commit's WAL frames cost a fifth of a one-event append; this costs a sixty-fourth.
        if before // TREE_LAG != tree.size // TREE_LAG:
            self.conn.execute(UPSERT_TREE, (tree.size, tree.state(), TREE_KEPT))
        self._tree = tree   # dropped by _forget if the transaction does not commit

    def _stored_tree(self, upto: int) -> Frontier:
        """The tree of seq 1..``upto`` from the ``merkle`` row, completed from the events if behind."""
        row = self.conn.execute("SELECT size, CAST(frontier AS BLOB) FROM merkle WHERE id = 1").fetchone()
        return advanced_tree(row, upto, self._hashes_between)

    def _hashes_between(self, from_seq: int, to_seq: int) -> Iterator[bytes]:
        """Raw event hashes of from_seq..to_seq, on this connection (inside a transaction too)."""
        cursor = self.conn.execute("SELECT hash FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq",
                                   (from_seq, to_seq))
        return (h if isinstance(h, bytes) else bytes.fromhex(h) for (h,) in cursor)

    def _complete_tree(self) -> None:
        """On a writable open: make the ``merkle`` row hold the tree at the head, building it from the
        events for a home made before the tree was kept (and saying so in its ``built`` column)."""
        conn = self.conn
        row = conn.execute("SELECT size FROM merkle WHERE id = 1").fetchone()
        if row is not None and row[0] > self._select_head().seq - TREE_LAG:
            return   # the usual open: nothing to write
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT size FROM merkle WHERE id = 1").fetchone()
            head = self._select_head().seq
            if row is None or row[0] <= head - TREE_LAG:
                tree = self._stored_tree(head)
                conn.execute(UPSERT_TREE, (tree.size, tree.state(),
                                           TREE_KEPT if head == 0 else tree_built_note(head)))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            if is_disk_full(exc):
                raise DiskFull(f"{self.location}: the disk is full ({exc}): the Merkle tree of this home "
                               "cannot be written; free space and run the command again", str(exc)) from None
            raise
        except BaseException:
            self._rollback()
            raise

    def tree_state(self) -> TreeState | None:
        """The ``merkle`` row (None in a home made before it, opened read-only)."""
        with self._thread_lock:
            try:
                row = self.conn.execute("SELECT size, CAST(frontier AS BLOB), CAST(built AS BLOB) FROM merkle "
                                        "WHERE id = 1").fetchone()
            except sqlite3.OperationalError:  # no such table: a home made before it, opened read-only
                return None
        if row is None:
            return None
        size = row[0] if isinstance(row[0], int) else -1   # a damaged row: verify names it
        return TreeState(size, bytes(row[1] or b""), f"{self.path} (table merkle)",
                         bytes(row[2] or b"").decode("utf-8", "replace"))

    def leaf_hashes(self, to_seq: int) -> Iterator[bytes]:
        """The hash column alone, a page at a time."""
        last = 0
        while True:
            with self._thread_lock:
                rows = self.conn.execute("SELECT seq, hash FROM events WHERE seq > ? AND seq <= ? ORDER BY seq "
                                         f"LIMIT {_PAGE * 16}", (last, to_seq)).fetchall()
            yield from (h if isinstance(h, bytes) else bytes.fromhex(h) for _, h in rows)
            if len(rows) < _PAGE * 16:
                return
            last = rows[-1][0]

    def _rollback(self) -> None:
        self._forget()
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def _insert(self, batch: list[Prepared], expected: dict[str, int]) -> _Inserted:
        """Insert the new events of a batch inside the open transaction.

        The head and stream versions come from a cache that is not re-read before each append
        (that would cost as much as the INSERT). It cannot go stale unnoticed: rows are never
        deleted, so another writer's append takes the seq this one would use, and the INSERT
        fails on the seq key; the caller then forgets the cache and runs the transaction again.
        The id's UNIQUE constraint finds events that exist (no SELECT per event). A stale
        expected version is only a conflict when something new would be appended, so retrying a
        batch that was already appended returns the stored events.
        """
        if len(batch) == 1:
            return self._insert_one(batch[0], expected)
        result = self._insert_all_new(batch, expected)
        if result is not None:
            return result
        return self._insert_each(batch, expected)

    def _insert_one(self, p: Prepared, expected: dict[str, int]) -> _Inserted:
        """``_insert_each`` for a batch of one: the commonest append, without the bookkeeping."""
        head = self._head or self._select_head()
        seq, prev_hash = head.seq + 1, head.hash
        current = self._versions.get(p.stream)
        if current is None:
            current = self._select_version(p.stream)
        event, canonical = seal(p, seq, current + 1, prev_hash)
        try:
            self.conn.execute(INSERT, self._packed((seq, p.id, p.stream, current + 1, p.type, p.schema,
                                                    p.data.decode(), p.meta.decode(), prev_hash, event.hash)))
        except sqlite3.IntegrityError as exc:
            if "events.id" not in str(exc):
                raise _StaleCache() from None
            stored = self.conn.execute(f"SELECT {self._columns} FROM events WHERE id = ?", (self._key(p.id),)).fetchone()
            return [self._event(stored)], [], [], {}
        want = expected.get(p.stream) if expected else None
        if want is not None and want != current:
            raise ConflictError(f"stream {p.stream!r} is at version {current}, expected {want}; "
                                "nothing was appended")
        return [event], [event], [line_bytes(canonical, prev_hash, event.hash)], {p.stream: current + 1}

    def _insert_all_new(self, batch: list[Prepared], expected: dict[str, int]) -> _Inserted | None:
        """A batch whose events are all new, in one ``executemany``; None when some id exists."""
        if len({p.id for p in batch}) != len(batch):
            return None
        seq, prev_hash = chain_start(self._head or self._select_head())
        self._look_up_versions(batch)
        base: dict[str, int] = {}
        versions: dict[str, int] = {}
        events: list[Event] = []
        lines: list[bytes] = []
        rows: list[tuple[Any, ...]] = []
        for p in batch:
            current = versions.get(p.stream)
            if current is None:
                current = base[p.stream] = self._cached_version(p.stream)
            versions[p.stream] = current + 1
            event, canonical = seal(p, seq, current + 1, prev_hash)
            rows.append((seq, p.id, p.stream, current + 1, p.type, p.schema, p.data.decode(), p.meta.decode(),
                         prev_hash, event.hash))
            events.append(event)
            lines.append(line_bytes(canonical, prev_hash, event.hash))
            seq, prev_hash = seq + 1, event.hash
        execute = self.conn.execute
        execute("SAVEPOINT batch")
        try:
            self.conn.executemany(INSERT, map(pack_row, rows) if self.compact else rows)
        except sqlite3.IntegrityError as exc:
            execute("ROLLBACK TO batch")
            execute("RELEASE batch")
            if "events.id" in str(exc):
                return None  # some events exist: the event-by-event path returns them
            raise _StaleCache() from None
        execute("RELEASE batch")
        for stream, current in base.items():
            want = expected.get(stream)
            if want is not None and want != current:
                raise ConflictError(f"stream {stream!r} is at version {current}, expected {want}; "
                                    "nothing was appended")
        return events, events, lines, versions

    def _look_up_versions(self, batch: list[Prepared]) -> None:
        """Cache the versions of the batch's streams that are not cached, in one query: a run's
        first output of a case was a ``SELECT MAX(version)`` of its own (3% of a run's ledger CPU)."""
        versions = self._versions
        missing = list({p.stream for p in batch if p.stream not in versions})
        for at in range(0, len(missing), 500):   # well below SQLite's limit of bound parameters
            part = missing[at:at + 500]
            found = dict(self.conn.execute(
                f"SELECT stream, MAX(version) FROM events WHERE stream IN ({', '.join('?' * len(part))}) "
                "GROUP BY stream", part))
            for stream in part:
                versions[stream] = found.get(stream) or 0

    def _cached_version(self, stream: str) -> int:
        current = self._versions.get(stream)
        return self._select_version(stream) if current is None else current

    def _insert_each(self, batch: list[Prepared], expected: dict[str, int]) -> _Inserted:
        """Insert event by event, returning the stored event for each id that exists."""
        execute = self.conn.execute
        seq, prev_hash = chain_start(self._head or self._select_head())
        out: list[Event] = []
        new: list[Event] = []
        lines: list[bytes] = []
        versions: dict[str, int] = {}
        seen: dict[str, Event] = {}
        for p in batch:
            if p.id in seen:
                out.append(seen[p.id])
                continue
            current = versions.get(p.stream)
            if current is None:
                current = self._cached_version(p.stream)
            event, canonical = seal(p, seq, current + 1, prev_hash)
            try:
                execute(INSERT, self._packed((seq, p.id, p.stream, current + 1, p.type, p.schema,
                                              p.data.decode(), p.meta.decode(), prev_hash, event.hash)))
            except sqlite3.IntegrityError as exc:
                if "events.id" not in str(exc):
                    raise _StaleCache() if not new else LedgerError(
                        f"{self.location}: cannot append seq {seq}: {exc}") from None
                stored = execute(f"SELECT {self._columns} FROM events WHERE id = ?", (self._key(p.id),)).fetchone()
                seen[p.id] = self._event(stored)
                out.append(seen[p.id])
                continue
            want = expected.get(p.stream)
            if p.stream not in versions and want is not None and want != current:
                raise ConflictError(f"stream {p.stream!r} is at version {current}, expected {want}; "
                                    "nothing was appended")
            versions[p.stream] = current + 1
            seen[p.id] = event
            out.append(event)
            new.append(event)
            lines.append(line_bytes(canonical, prev_hash, event.hash))
            seq, prev_hash = seq + 1, event.hash
        return out, new, lines, versions

    def _packed(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """A row of ``COLUMNS`` as this store writes it: compact or as given."""
        return pack_row(row) if self.compact else row

    def _key(self, id: str) -> bytes | str:
        """An event id as this store's ``id`` column holds it (raw bytes in a compact store)."""
        return raw_hex(id) if self.compact else id

    def _select_head(self) -> Head:
        row = self.conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return Head(row[0], hex_of(row[1])) if row else Head(0, GENESIS_HASH)

    def _select_version(self, stream: str) -> int:
        row = self.conn.execute("SELECT MAX(version) FROM events WHERE stream = ?", (stream,)).fetchone()
        return row[0] or 0

    # --- reading ----------------------------------------------------------------------------------
    def _pages(self, where: str, params: list[Any], from_seq: int,
               to_seq: int | None) -> Iterator[list[tuple[Any, ...]]]:
        """Pages of rows in seq order, bounded in rows and payload bytes (``paging.row_pages``)."""
        self._check_form()
        bound = " AND seq <= ?" if to_seq is not None else ""
        sql = f"SELECT {self._columns} FROM events WHERE seq > ?{where}{bound} ORDER BY seq LIMIT ?"
        tail = params + ([to_seq] if to_seq is not None else [])

        def fetch(last: int, limit: int) -> list[tuple[Any, ...]]:
            with self._thread_lock:
                return self.conn.execute(sql, [last, *tail, limit]).fetchall()

        pages = row_pages(fetch, from_seq, _PAGE)   # compact rows are sized as stored
        return (list(map(unpack_row, rows)) for rows in pages) if self.compact else pages

    def _rows(self, where: str, params: list[Any], from_seq: int,
              to_seq: int | None) -> Iterator[tuple[Any, ...]]:
        """The rows of ``_pages`` one by one (chained in C: no Python frame per row)."""
        return chain.from_iterable(self._pages(where, params, from_seq, to_seq))

    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        where, params = "", []
        if types is not None:
            types = list(types)
            where += f" AND type IN ({', '.join('?' * len(types))})"
            params += types
        if stream is not None:
            where += " AND stream = ?"
            params.append(stream)
        make = partial(page_events, row_event=(self.blobs or self._no_blobs).row_event)   # pages unpacked
        return chain.from_iterable(map(make, self._pages(where, params, from_seq, to_seq)))

    def _check_form(self) -> None:
        """Refuse to read rows whose form this store cannot tell (``form_problem``)."""
        if self.form_problem is not None:
            raise LedgerError(unreadable(self.form_problem))

    def head(self) -> Head:
        with self._thread_lock:
            return self._select_head()

    def get(self, id: str) -> Event | None:
        self._check_form()
        with self._thread_lock:
            row = self.conn.execute(f"SELECT {self._columns} FROM events WHERE id = ?", (self._key(id),)).fetchone()
        return self._event(row) if row else None

    def get_stored(self, id: str) -> Event | None:
        """The event with this id as stored: blob references in its data are left in place; without
        the blob table an event that refers to a blob is refused, as every read refuses it (and as
        PostgreSQL's ``get_stored`` does): its references name blobs no ``Ledger.join`` can read."""
        self._check_form()
        with self._thread_lock:
            row = self.conn.execute(f"SELECT {self._columns} FROM events WHERE id = ?", (self._key(id),)).fetchone()
        if row is None:
            return None
        if self.compact:
            row = unpack_row(row)
        return Event(*row) if self.blobs is not None else self._no_blobs.row_event(*row)

    def stream_version(self, stream: str) -> int:
        with self._thread_lock:
            return self._select_version(stream)

    def lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[tuple[int, bytes]]:
        for row in self._rows("", [], from_seq, to_seq):
            yield row[0], row_line(row)

    def rows(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[tuple[Any, ...]]:
        """Raw rows (seq, id, stream, version, type, schema, data, meta, prev_hash, hash)."""
        return self._rows("", [], from_seq, to_seq)

    def scan(self, from_seq: int, to_seq: int, types: Collection[str],
             stamped: Collection[str] = (), timed: Collection[str] = (),
             resolve: bool = True, plain: bool = False) -> Iterator[ScanRow]:
        """The fold's rows straight from SQLite: only the columns a fold needs, the payload as
        stored bytes, meta's config_hash extracted by SQLite for the ``stamped`` types and its
        recorded_at for the ``timed`` types. ``plain`` (with ``resolve=False``): SQLite's own
        tuples, no ScanRow made per row (a rebuild's scan of a million rows).

        On a read-only connection of its own, so a long fold holds neither this recorder's
        connection nor its thread lock while a stage appends.
        """
        types = list(types)
        if not types:
            return
        self._check_form()
        conn = connect(self.path, readonly=True)
        try:
            marks = ", ".join("?" * len(types))
            stamp = (f"CASE WHEN type IN ({', '.join('?' * len(stamped))}) "
                     "THEN json_extract(meta, '$.config_hash') END") if stamped else "NULL"
            time = (f"CASE WHEN type IN ({', '.join('?' * len(timed))}) "
                    "THEN json_extract(meta, '$.recorded_at') END") if timed else "NULL"
            # "+type": filter while walking the rowid in order, not via the type index plus a sort
            cursor: Any   # a sqlite3 cursor, or its tuples unpacked (compact rows)
            if self.compact:   # SQLite cannot read a packed meta: the cells are unpacked here
                cursor = _compact_scan(conn, from_seq, to_seq, types, set(stamped), set(timed))
            else:
                cursor = conn.execute(
                    f"SELECT type, id, stream, version, schema, CAST(data AS BLOB), {stamp}, {time} "
                    f"FROM events WHERE seq >= ? AND seq <= ? AND +type IN ({marks}) ORDER BY seq",
                    (*stamped, *timed, from_seq, to_seq, *types))
            if self.blobs is None:   # made before blobs, or its table dropped: a reference is a lost blob
                cursor = self._no_blobs.scan_rows(cursor)
            if self.blobs is None or not resolve:   # not resolve: references stay, for Ledger.join
                yield from cursor if plain else map(ScanRow._make, cursor)
                return
            reader = BlobReader(partial(_select_blob, conn), self.blobs.where)
            for row in map(ScanRow._make, cursor):
                if has_markers(row.data):   # type: ignore[arg-type]  # SQLite gives the stored bytes
                    row = row._replace(data=reader.resolved_bytes(row.data))  # type: ignore[arg-type]
                yield row
        finally:
            conn.close()

    def verify(self, expect_head: Head | None = None) -> VerifyReport:
        """Verify the events table (and the mirror beside it) as of one snapshot taken under the
        lock, so a concurrent writer never looks like damage."""
        if self.form_problem is not None:   # its rows cannot be read: that is the first thing wrong
            return VerifyReport(self.head(), 0, [self.form_problem])
        with self._lock.shared():   # the tree is committed with the events: read both at one instant
            head, mirror_size = self.snapshot()
            kept = self.tree_state()
        tree = kept if kept is not None and kept.size <= head.seq else None   # else Ledger checks it apart
        mirror = self.mirror
        rows = self.rows(1, head.seq)
        blob_problems: list[Problem] = []
        side: BlobFile | None = None
        if self.blobs is not None:
            readers = [BlobReader(self._load_blob, self.blobs.where, keep=0)]
            if isinstance(mirror, Mirror) and mirror_size is not None:   # its blob file must hold them too
                side = BlobFile(mirror.blob_path)
                readers.append(BlobReader(side.load, side.path, keep=0))
            rows = checked_blobs(rows, readers, blob_problems)
        else:   # no blob table: an event that refers to a blob has lost it (the table was dropped)
            rows = checked_blobs(rows, [BlobReader(lambda key: None, f"{self.path} (table blobs, which "
                                                   "this store lacks: dropped?)", keep=0)], blob_problems)
        if isinstance(mirror, GzMirror) and mirror_size is not None:
            report = mirror.verify(rows, self.location, expect_head, mirror_size, tree)
        elif mirror is None or mirror_size is None:
            report = verify_sqlite(rows, self.location, iter(()) if mirror else None,
                                   mirror.path if mirror else "", expect_head, tree=tree)
        else:
            with open(mirror.path, "rb") as fh:  # iterated in C; lines past the snapshot's size are not extra
                report = verify_sqlite(rows, self.location, fh, mirror.path, expect_head,
                                       mirror_size=mirror_size, tree=tree)
        report.problems.extend(blob_problems)
        if side is not None:
            side.close()
        if mirror and mirror.problem and report.ok:
            report.problems.append(Problem(0, mirror.path, mirror.problem))
        missing = self.missing_triggers()
        if missing:
            report.warnings.append(f"{self.location}: the triggers that refuse UPDATE and DELETE are missing "
                                   f"({', '.join(missing)}); opening the home for writing restores them")
        return report

    def own_files(self) -> list[str]:
        """The database and the mirror (``Ledger`` adds what sits beside them, -wal, .lock...)."""
        return [self.path] + ([self.mirror.path] if self.mirror else [])

    def read_models_path(self) -> str:
        """Read models live in the ledger's own database, beside the events (Datasette shows both)."""
        return self.path

    def snapshot(self) -> tuple[Head, int | None]:
        """(head, mirror size in bytes) at one instant: no writer is between commit and mirror write."""
        with self._lock.shared():
            head = self.head()
            size = self.mirror.size() if self.mirror else None
        return head, size

    def missing_triggers(self) -> list[str]:
        """The immutability triggers that are not in the database (someone dropped them)."""
        with self._thread_lock:
            names = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        return [name for name in TRIGGERS if name not in names]

    # --- import and tracking ----------------------------------------------------------------------
    def import_lines(self, lines: Iterable[bytes], source: str = "the input") -> int:
        """Insert verified lines (``ledger.importer`` checks each before it gets here) atomically."""
        from evalledger.ledger.importer import checked_rows
        self._check_writable()
        with self._write_lock():
            if self.head().seq:
                raise LedgerError(f"{self.location} is not empty; import goes into an empty home only")
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            count = 0
            try:
                keep = None
                if self.blobs is not None:
                    def keep(key: str, packed: bytes) -> None:
                        conn.execute(INSERT_BLOB, (bytes.fromhex(key), packed))
                for row in checked_rows(lines, source, keep):
                    try:
                        conn.execute(INSERT, self._packed(row))
                    except sqlite3.IntegrityError as exc:
                        raise LedgerError(f"seq {row[0]}: {exc} (the file repeats an id or a stream "
                                          "version); nothing was imported") from None
                    count += 1
                tree = self._stored_tree(count)
                conn.execute(UPSERT_TREE, (tree.size, tree.state(), TREE_KEPT))
                conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            self._forget()
            if self.mirror:
                self.mirror.recover(self)
        return count

    def tracking_position(self, name: str) -> int:
        """The position in the ``tracking`` table (committed in the same transaction as a batch)."""
        with self._thread_lock:
            try:
                row = self.conn.execute("SELECT position FROM tracking WHERE name = ?", (name,)).fetchone()
            except sqlite3.OperationalError:  # a read-only open of a store made before tracking existed
                return 0
        return row[0] if row else 0

    def tracking_records(self) -> dict[str, int]:
        """Every tracking record, name -> position (the whole ``tracking`` table)."""
        with self._thread_lock:
            try:
                return dict(self.conn.execute("SELECT name, position FROM tracking ORDER BY name"))
            except sqlite3.OperationalError:  # a read-only open of a store made before tracking existed
                return {}

    def set_tracking(self, name: str, position: int) -> None:
        """Upsert a tracking row in a transaction of its own."""
        self._check_writable()
        with self._write_lock():
            try:
                self.conn.execute("INSERT INTO tracking (name, position) VALUES (?, ?) ON CONFLICT(name) "
                                  "DO UPDATE SET position = excluded.position", (name, position))
            except sqlite3.Error as exc:
                if is_disk_full(exc):
                    raise self._full(exc) from None
                raise

    def close(self) -> None:
        with self._thread_lock:
            if self.mirror:
                self.mirror.close()
            self._lock.close()
            self.conn.close()


def _compact_scan(conn: sqlite3.Connection, from_seq: int, to_seq: int, types: list[str],
                  stamped: set[str], timed: set[str]) -> Iterator[tuple[Any, ...]]:
    """``scan``'s tuples from a compact store: the payload inflated to its canonical bytes, the id as
    hex, and meta's config_hash and recorded_at read in Python for the types that want them."""
    cursor = conn.execute(
        f"SELECT type, id, stream, version, schema, data, meta FROM events "
        f"WHERE seq >= ? AND seq <= ? AND +type IN ({', '.join('?' * len(types))}) ORDER BY seq",
        (from_seq, to_seq, *types))
    for type, id, stream, version, schema, data, meta in cursor:
        stamp = time = None
        data, meta = payload_cells(data, meta)
        if type in stamped or type in timed:
            fields = json.loads(meta)
            stamp = fields.get("config_hash") if type in stamped else None
            time = fields.get("recorded_at") if type in timed else None
        yield type, hex_of(id), stream, version, schema, data, stamp, time


def _form_problem(conn: sqlite3.Connection, location: str) -> Problem | None:
    """What verify reports for a store whose rows are packed where no ``event_rows`` table says so."""
    seq = unmarked_packing(conn)
    if seq is None:
        return None
    return Problem(seq, location, "the row is packed (compact rows), but table event_rows, which names the "
                   "rows form, is missing or altered: the rows cannot be read as the form they were written in")


def unreadable(problem: Problem) -> str:
    """The error a read of a damaged store stops with: the place and reason, and what to run."""
    return f"{problem}; the store was damaged ('evalledger verify' checks it)"


def _select_blob(conn: sqlite3.Connection, key: str) -> bytes | None:
    """The stored form of blob ``key`` read on ``conn`` (None when the table lacks it)."""
    row = conn.execute(SELECT_BLOB, (bytes.fromhex(key),)).fetchone()
    return bytes(row[0]) if row else None


def _empty_store(conn: sqlite3.Connection, path: str) -> sqlite3.Connection:
    """Opened read-only, a file without the table ``events``: a store whose making was cut before
    its tables were (an empty file, as a killed ``init`` or ``migrate`` leaves) reads as an empty
    store, from an in-memory one with the tables; any other SQLite file is no store of ours."""
    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    conn.close()
    if tables:
        raise LedgerError(f"{path}: an SQLite file without the table events: not an evalledger store")
    empty = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    empty.executescript(SCHEMA)
    empty.execute(UPSERT_TREE, (0, Frontier().state(), TREE_KEPT))   # the tree of no event, kept
    return empty


def _has_events_table(conn: sqlite3.Connection) -> bool:
    """True when the database already holds the ``events`` table (the store existed before this open)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() is not None
