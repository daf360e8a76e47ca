"""The PostgreSQL backend: table ``events`` in one schema of a database, shared by many processes.

Same envelope, canonical bytes and hash chain as SQLite (the rows have the same ten columns, so
export and verify reuse the SQLite row code). Every append takes a transaction-scoped advisory
lock before it reads the head, so seq and hash are assigned one writer at a time and seq order is
commit order, however many processes on however many machines append. Triggers refuse UPDATE,
DELETE and TRUNCATE on ``events``. Each commit sends a NOTIFY carrying the new head seq.

psycopg 3 is an optional dependency (``pip install 'evalledger[postgres]'``): this module is only
imported when a store URL names PostgreSQL.
"""

from __future__ import annotations

import threading
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

from evalledger.ledger import file_bytes
from evalledger.ledger import postgres_schema as pg
from evalledger.ledger.blob_lines import interleave
from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import escape_batch, pack, remember_blobs, split_batch
from evalledger.ledger.call_slots import CallSlots
from evalledger.ledger.call_slots import table_sql as call_slots_sql
from evalledger.ledger.envelope import GENESIS_HASH, Event
from evalledger.ledger.leases import Leases
from evalledger.ledger.leases import table_sql as claims_sql
from evalledger.ledger.lost_blobs import NoBlobTable
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.paging import PAGE_BYTES, row_pages
from evalledger.ledger.persistence import (
    TREE_KEPT,
    ConflictError,
    EmptyStore,
    Head,
    LedgerError,
    Prepared,
    Recorder,
    TreeState,
    advanced_tree,
    chain_start,
    seal,
    tree_built_note,
)
from evalledger.ledger.postgres_schema import (  # noqa: F401  (is_store_url, redact_url: this backend's API)
    TRIGGERS,
    blob_sql,
    connect,
    is_store_url,
    lock_key,
    notify_channel,
    redact_url,
    schema_sql,
    split_store_url,
)
from evalledger.ledger.sqlite_schema import COLUMNS, row_event, row_line
from evalledger.ledger.verify import VerifyReport, verify_sqlite
from evalledger.ledger.verify_blobs import checked_blobs

_PAGE = 1000  # rows a read fetches at once (one round trip each)
_LOCK_CLASS = 0x45564C  # "EVL": the advisory-lock namespace of evalledger's sequencer


class PostgresRecorder(Recorder):
    """Events in table ``<schema>.events`` of a PostgreSQL database; many writers at once."""

    def __init__(self, url: str, read_models_path: str | None = None, readonly: bool = False):
        self.url, self.schema = split_store_url(url)
        self.store_url = url
        self.location = f"{redact_url(url)} (table {self.schema}.events)"
        self.path = read_models_path or ""
        self._read_models = read_models_path
        self.readonly = readonly
        self._key = lock_key(self.schema)
        self._lock = threading.RLock()  # one connection, shared by this process's threads
        self.conn = connect(self.url, readonly)
        self._events = f"{self.schema}.events"
        self._merkle = f"{self.schema}.merkle"
        self._blob_table = f"{self.schema}.blobs"
        if not readonly:
            self._create_schema()
        elif not self._table_exists():
            self.conn.close()
            raise EmptyStore(f"{self.location}: no ledger in this schema yet")
        # The blob store, when this store was made with one: None for an older store.
        self.blobs = BlobReader(self._load_blob, f"{redact_url(url)} (table {self._blob_table})") \
            if self._table_exists(self._blob_table) else None
        # reads without it: a reference there is a blob lost with its table
        self._no_blobs = NoBlobTable(redact_url(url), f"table {self._blob_table}")
        self._known_blobs: set[str] = set()   # keys committed by this object: not packed again

    # --- setup ------------------------------------------------------------------------------------
    def _create_schema(self) -> None:
        """Create tables and triggers once, under the sequencer lock (CREATE IF NOT EXISTS races)."""
        with self._lock, self._guard(), self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._key))
            new = not self._table_exists()
            self.conn.execute(schema_sql(self.schema))
            if new:   # only a store made now: an older one reads and grows as it was written
                self.conn.execute(blob_sql(self.schema))
            self.conn.execute(call_slots_sql(self.schema))
            self.conn.execute(file_bytes.table_sql(self.schema))
            self.conn.execute(claims_sql(self.schema))   # here, under the lock: two workers opening at once raced
            self._complete_tree()

    def _complete_tree(self) -> None:
        """Under the sequencer lock: make the ``merkle`` row hold the tree at the head, building it
        from the events for a store made before the tree was kept (its ``built`` column says so)."""
        row = self.conn.execute(f"SELECT size, frontier FROM {self._merkle} WHERE id = 1").fetchone()
        last = self.conn.execute(f"SELECT seq FROM {self._events} ORDER BY seq DESC LIMIT 1").fetchone()
        head = last[0] if last else 0
        if row is None or row[0] < head:
            tree = advanced_tree(row, head, self._hashes_between)
            self._write_tree(tree, TREE_KEPT if head == 0 else tree_built_note(head))

    def _write_tree(self, tree: Frontier, built: str = TREE_KEPT) -> None:
        """Upsert the ``merkle`` row (inside the caller's transaction)."""
        self.conn.execute(f"INSERT INTO {self._merkle} (id, size, frontier, built) VALUES (1, %s, %s, %s) "
                          "ON CONFLICT (id) DO UPDATE SET size = excluded.size, frontier = excluded.frontier",
                          (tree.size, tree.state(), built))

    def _hashes_between(self, from_seq: int, to_seq: int) -> Iterator[bytes]:
        """Raw event hashes of from_seq..to_seq, on this connection (inside its transaction)."""
        rows = self.conn.execute(f"SELECT hash FROM {self._events} WHERE seq >= %s AND seq <= %s ORDER BY seq",
                                 (from_seq, to_seq)).fetchall()
        return (bytes.fromhex(h) for (h,) in rows)

    def _table_exists(self, table: str | None = None) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (table or self._events,)).fetchone()
        return row is not None and row[0] is not None

    def _load_blob(self, key: str) -> bytes | None:
        """The stored form of blob ``key`` (None when the table lacks it)."""
        with self._lock, self._guard():
            row = self.conn.execute(f"SELECT data FROM {self._blob_table} WHERE key = %s",
                                    (bytes.fromhex(key),)).fetchone()
        return bytes(row[0]) if row else None

    def _event(self, row: tuple[Any, ...]) -> Event:
        """An Event from a row, its blob references resolved (refused when the blob table is gone)."""
        return (self.blobs or self._no_blobs).row_event(*row)

    def _insert_blobs(self, blobs: dict[str, bytes]) -> None:
        """Inside the append's transaction: store the blobs the table lacks."""
        for key, raw in blobs.items():
            self.conn.execute(f"INSERT INTO {self._blob_table} (key, data) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                              (bytes.fromhex(key), pack(raw)))

    def export_lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[bytes]:
        """The lines ``export`` writes: each blob's line before the first event that uses it (without
        the blob table, the first event that refers to a blob stops it)."""
        rows = self._rows("", [], from_seq, to_seq)
        if self.blobs is None:
            return map(row_line, self._no_blobs.rows(rows))
        return interleave(((row[6], row_line(row)) for row in rows), self.blobs, self._load_blob)

    def _guard(self) -> "_Errors":
        return _Errors(self.location)

    # --- appending --------------------------------------------------------------------------------
    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        """Append under the sequencer lock: seq, versions and hashes come from committed state only.

        Statements go out in pipelines, so a batch costs two or three round trips (BEGIN, the
        lock and the reads; a COPY for a batch; the insert, tracking, NOTIFY and COMMIT) rather
        than one a statement: round trips, not the server's work, bound an append's cost.
        """
        self._check_writable()
        conn = self.conn
        blobs: dict[str, bytes] = {}
        batch = split_batch(batch, self._known_blobs, blobs) if self.blobs is not None else escape_batch(batch)
        with self._lock, self._guard():
            try:
                out, new, single, tree = self._insert(batch, expected)
                with conn.pipeline():
                    if blobs:
                        self._insert_blobs(blobs)
                    if single is not None:
                        conn.execute(f"INSERT INTO {self._events} ({COLUMNS}) VALUES "
                                     "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", single)
                    if tree is not None:
                        self._write_tree(tree)
                    if tracking is not None:
                        self._upsert_tracking(*tracking)
                    if new:
                        conn.execute("SELECT pg_notify(%s, %s)", (notify_channel(self.schema), str(new[-1].seq)))
                    conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != pg.psycopg.pq.TransactionStatus.IDLE and not conn.closed:
                    conn.execute("ROLLBACK")
                raise
        if blobs:
            remember_blobs(self._known_blobs, blobs)
        return out

    def append_chunks(self, chunks: Iterable[list[Prepared]],
                      seen: Callable[[list[Event], list[Event]], None]) -> None:
        """One transaction under the sequencer lock for every chunk, one chunk held at a time: each
        chunk reads the head, versions and tree its transaction sees (its own rows included)."""
        self._check_writable()
        conn = self.conn
        added: dict[str, bytes] = {}
        last = 0
        with self._lock, self._guard():
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._key))
                for batch in chunks:
                    blobs: dict[str, bytes] = {}
                    batch = split_batch(batch, self._known_blobs, blobs) if self.blobs is not None \
                        else escape_batch(batch)   # escaped without blobs too: the same stored bytes
                    out, new, single, tree = self._insert(batch, {}, begin=False)
                    with conn.pipeline():
                        self._insert_blobs({k: v for k, v in blobs.items() if k not in added})
                        if single is not None:
                            conn.execute(f"INSERT INTO {self._events} ({COLUMNS}) VALUES "
                                         "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", single)
                        if tree is not None:
                            self._write_tree(tree)
                    added.update(blobs)
                    last = new[-1].seq if new else last
                    seen(out, new)
                with conn.pipeline():
                    if last:
                        conn.execute("SELECT pg_notify(%s, %s)", (notify_channel(self.schema), str(last)))
                    conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != pg.psycopg.pq.TransactionStatus.IDLE and not conn.closed:
                    conn.execute("ROLLBACK")
                raise
        remember_blobs(self._known_blobs, added)

    def _insert(self, batch: list[Prepared], expected: dict[str, int], begin: bool = True
                ) -> tuple[list[Event], list[Event], Any, Frontier | None]:
        """BEGIN, lock the sequencer (``begin``: else the caller's transaction has), find existing
        ids, seal the rest; COPY a batch of several new events in, and return a single new event's
        row for the caller to insert (in its pipeline), with the Merkle tree advanced over the new
        events (None when there are none) to write."""
        execute = self.conn.execute
        ids = list({p.id for p in batch})
        streams = list({p.stream for p in batch})
        # Statements after the lock see every commit made before it (READ COMMITTED: a snapshot a
        # statement), so the head and versions read here are the latest.
        with self.conn.pipeline():
            if begin:
                execute("BEGIN")
                execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._key))
            found = execute(f"SELECT {COLUMNS} FROM {self._events} WHERE id = ANY(%s)", (ids,))
            current = execute(f"SELECT stream, MAX(version) FROM {self._events} WHERE stream = ANY(%s) "
                              "GROUP BY stream", (streams,))
            last = execute(f"SELECT seq, hash FROM {self._events} ORDER BY seq DESC LIMIT 1")
            kept = execute(f"SELECT size, frontier FROM {self._merkle} WHERE id = 1")
        stored = {row[1]: self._event(row) for row in found.fetchall()}
        versions: dict[str, int] = dict.fromkeys(streams, 0)
        versions.update(current.fetchall())
        row = last.fetchone()
        tree_row = kept.fetchone()
        fresh_streams = {p.stream for p in batch if p.id not in stored}
        for stream in fresh_streams:
            want = expected.get(stream)
            if want is not None and want != versions[stream]:
                raise ConflictError(f"stream {stream!r} is at version {versions[stream]}, expected {want}; "
                                    "nothing was appended")
        seq, prev_hash = chain_start(Head(row[0], row[1]) if row else Head(0, GENESIS_HASH))
        out: list[Event] = []
        new: list[Event] = []
        rows: list[tuple[Any, ...]] = []
        for p in batch:
            if p.id in stored:
                out.append(stored[p.id])
                continue
            version = versions[p.stream] + 1
            event, _ = seal(p, seq, version, prev_hash)
            versions[p.stream] = version
            stored[p.id] = event
            rows.append((seq, p.id, p.stream, version, p.type, p.schema, p.data.decode(), p.meta.decode(),
                         prev_hash, event.hash))
            out.append(event)
            new.append(event)
            seq, prev_hash = seq + 1, event.hash
        if len(rows) > 1:
            self._insert_rows(rows)
        tree = None
        if new:
            tree = advanced_tree(tree_row, new[0].seq - 1, self._hashes_between)
            for event in new:
                tree.append(bytes.fromhex(event.hash))
        return out, new, rows[0] if len(rows) == 1 else None, tree

    def _insert_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """COPY sealed rows in: one round trip for a batch."""
        with self.conn.cursor() as cur, cur.copy(f"COPY {self._events} ({COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def _upsert_tracking(self, name: str, position: int) -> None:
        self.conn.execute(f"INSERT INTO {self.schema}.tracking (name, position) VALUES (%s, %s) "
                          "ON CONFLICT (name) DO UPDATE SET position = excluded.position", (name, position))

    def _check_writable(self) -> None:
        if self.readonly:
            raise LedgerError(f"{self.location} is open read-only")

    # --- reading ----------------------------------------------------------------------------------
    def _pages(self, where: str, params: list[Any], from_seq: int,
               to_seq: int | None) -> Iterator[list[tuple[Any, ...]]]:
        """Pages of rows in seq order, bounded in rows and payload bytes (``paging.row_pages``),
        each fetched whole (no transaction stays open between pages)."""
        bound = " AND seq <= %s" if to_seq is not None else ""
        sql = f"SELECT {COLUMNS} FROM {self._events} WHERE seq > %s{where}{bound} ORDER BY seq LIMIT %s"
        tail = params + ([to_seq] if to_seq is not None else [])

        def fetch(last: int, limit: int) -> list[tuple[Any, ...]]:
            with self._lock, self._guard():
                rows: list[tuple[Any, ...]] = self.conn.execute(sql, [last, *tail, limit]).fetchall()
            return rows

        return row_pages(fetch, from_seq, _PAGE)

    def _rows(self, where: str, params: list[Any], from_seq: int, to_seq: int | None) -> Iterator[tuple[Any, ...]]:
        for page in self._pages(where, params, from_seq, to_seq):
            yield from page

    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        """Events in seq order, filtered in SQL, a page at a time."""
        where, params = "", list[Any]()
        if types is not None:
            where += " AND type = ANY(%s)"
            params.append(list(types))
        if stream is not None:
            where += " AND stream = %s"
            params.append(stream)
        return (self._event(row) for row in self._rows(where, params, from_seq, to_seq))

    def head(self) -> Head:
        """The last committed event's seq and hash."""
        with self._lock, self._guard():
            row = self.conn.execute(f"SELECT seq, hash FROM {self._events} ORDER BY seq DESC LIMIT 1").fetchone()
        return Head(row[0], row[1]) if row else Head(0, GENESIS_HASH)

    def get(self, id: str) -> Event | None:
        """The event with this id, or None."""
        row = self._row_of(id)
        return self._event(row) if row else None

    def get_stored(self, id: str) -> Event | None:
        """The event with this id as stored: blob references in its data are left in place (a
        reader of a few small fields, such as a recorded call's reuse check, fetches no blob); without
        the blob table an event that refers to a blob is refused, as every read refuses it."""
        row = self._row_of(id)
        if row is None:
            return None
        return row_event(row) if self.blobs is not None else self._no_blobs.row_event(*row)

    def _row_of(self, id: str) -> tuple[Any, ...] | None:
        """The stored row of the event with this id, or None."""
        with self._lock, self._guard():
            row: tuple[Any, ...] | None = self.conn.execute(f"SELECT {COLUMNS} FROM {self._events} WHERE id = %s",
                                                            (id,)).fetchone()
        return row

    def stream_version(self, stream: str) -> int:
        """The version of the stream's last event (0 when empty)."""
        with self._lock, self._guard():
            row = self.conn.execute(f"SELECT MAX(version) FROM {self._events} WHERE stream = %s",
                                    (stream,)).fetchone()
        return (row[0] or 0) if row else 0

    def lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(seq, JSONL line) pairs rebuilt from the rows: the same bytes SQLite's export gives."""
        for row in self._rows("", [], from_seq, to_seq):
            yield row[0], row_line(row)

    def verify(self, expect_head: Head | None = None) -> VerifyReport:
        """Verify the chain as of one snapshot (a REPEATABLE READ transaction on a connection of
        its own, streamed through a server-side cursor), so concurrent writers never look like damage."""
        conn = connect(self.url, readonly=True)
        try:
            with _Errors(self.location), conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                # the tree as of the same snapshot, recomputed in the chain's pass (when it is kept)
                tree = None
                if conn.execute("SELECT to_regclass(%s)", (self._merkle,)).fetchone()[0] is not None:
                    row = conn.execute(f"SELECT size, frontier, built FROM {self._merkle} WHERE id = 1").fetchone()
                    tree = None if row is None else TreeState(int(row[0]), bytes(row[1]), self._tree_where(),
                                                              str(row[2]))
                sql = f"SELECT {COLUMNS} FROM {self._events} WHERE seq > %s ORDER BY seq LIMIT %s"

                def fetch(last: int, limit: int) -> list[tuple[Any, ...]]:
                    rows: list[tuple[Any, ...]] = conn.execute(sql, (last, limit)).fetchall()
                    return rows

                # pages sized by payload bytes, in the one snapshot: large events a few at a time
                pages = row_pages(fetch, 1, _PAGE)
                blob_problems: list[Any] = []
                reader = self._no_blobs.reader() if self.blobs is None else \
                    BlobReader(self._load_blob, self.blobs.where, keep=0)
                rows = checked_blobs(chain.from_iterable(pages), [reader], blob_problems)
                report = verify_sqlite(rows, self.location, expect_head=expect_head, tree=tree)
                report.problems.extend(blob_problems)
        finally:
            conn.close()
        missing = self.missing_triggers()
        if missing:
            report.warnings.append(f"{self.location}: the triggers that refuse UPDATE, DELETE and TRUNCATE are "
                                   f"missing ({', '.join(missing)}); opening the store for writing restores them")
        return report

    def tree_state(self) -> TreeState | None:
        """The ``merkle`` row (None in a store made before it, opened read-only)."""
        with self._lock, self._guard():
            if self.conn.execute("SELECT to_regclass(%s)", (self._merkle,)).fetchone()[0] is None:
                return None
            row = self.conn.execute(f"SELECT size, frontier, built FROM {self._merkle} WHERE id = 1").fetchone()
        if row is None:
            return None
        return TreeState(int(row[0]), bytes(row[1]), self._tree_where(), str(row[2]))

    def _tree_where(self) -> str:
        """How findings name the ``merkle`` table."""
        return f"{self.location.rsplit(' (', 1)[0]} (table {self._merkle})"

    def leaf_hashes(self, to_seq: int) -> Iterator[bytes]:
        """The hash column alone, a page at a time."""
        last = 0
        while True:
            with self._lock, self._guard():
                rows = self.conn.execute(f"SELECT seq, hash FROM {self._events} WHERE seq > %s AND seq <= %s "
                                         f"ORDER BY seq LIMIT {_PAGE * 10}", (last, to_seq)).fetchall()
            yield from (bytes.fromhex(h) for _, h in rows)
            if len(rows) < _PAGE * 10:
                return
            last = rows[-1][0]

    def missing_triggers(self) -> list[str]:
        """The immutability triggers that are not on the events table (someone dropped them)."""
        with self._lock, self._guard():
            names = {r[0] for r in self.conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgenabled <> 'D'",
                (self._events,))}
        return [name for name in TRIGGERS if name not in names]

    # --- import and tracking ----------------------------------------------------------------------
    def import_lines(self, lines: Iterable[bytes], source: str = "the input") -> int:
        """Insert verified lines into the empty store in one transaction under the sequencer lock."""
        from evalledger.ledger.importer import checked_rows
        self._check_writable()
        count = 0
        with self._lock, self._guard(), self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._key))
            if self.conn.execute(f"SELECT 1 FROM {self._events} LIMIT 1").fetchone():
                raise LedgerError(f"{self.location} is not empty; import goes into an empty store only")
            chunk: list[tuple[Any, ...]] = []
            size = 0
            keep = None
            if self.blobs is not None:
                def keep(key: str, packed: bytes) -> None:
                    self.conn.execute(f"INSERT INTO {self._blob_table} (key, data) VALUES (%s, %s) "
                                      "ON CONFLICT DO NOTHING", (bytes.fromhex(key), packed))
            for row in checked_rows(lines, source, keep):
                chunk.append(row)
                count += 1
                size += len(row[6])
                if len(chunk) >= _PAGE or size >= PAGE_BYTES:   # large events: a few a chunk
                    self._insert_rows(chunk)
                    chunk, size = [], 0
            if chunk:
                self._insert_rows(chunk)
            self._write_tree(advanced_tree(None, count, self._hashes_between))
            if count:
                self.conn.execute("SELECT pg_notify(%s, %s)", (notify_channel(self.schema), str(count)))
        return count

    def tracking_position(self, name: str) -> int:
        """The position in the ``tracking`` table (committed in the same transaction as a batch)."""
        with self._lock, self._guard():
            row = self.conn.execute(f"SELECT position FROM {self.schema}.tracking WHERE name = %s",
                                    (name,)).fetchone()
        return row[0] if row else 0

    def tracking_records(self) -> dict[str, int]:
        """Every tracking record, name -> position (``verify`` checks none is past the head)."""
        with self._lock, self._guard():
            rows = self.conn.execute(f"SELECT name, position FROM {self.schema}.tracking ORDER BY name").fetchall()
        return {str(name): int(position) for name, position in rows}

    def set_tracking(self, name: str, position: int) -> None:
        """Upsert a tracking row on its own."""
        self._check_writable()
        with self._lock, self._guard():
            self._upsert_tracking(name, position)

    def own_files(self) -> list[str]:
        """The local read-model file (the events are on the server: export cannot overwrite them)."""
        return [self._read_models] if self._read_models else []

    def read_models_path(self) -> str:
        """The local SQLite file of this home's read models (the events stay on the server)."""
        if not self._read_models:
            raise LedgerError(f"{self.location}: opened without a home, so there is no local file for "
                              "read models; bind the store to a home (evalledger --home DIR --store URL init)")
        return self._read_models

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """LISTEN on the schema's channel in a thread of its own; ``callback()`` on each NOTIFY.

        A dropped connection is reopened (with a callback, since notifications were lost
        meanwhile). Returns the function that stops listening.
        """
        stop = threading.Event()
        listener = threading.Thread(target=_listen, args=(self.url, notify_channel(self.schema), callback, stop),
                                    name=f"listen-{self.schema}", daemon=True)
        listener.start()

        def unsubscribe() -> None:
            stop.set()
            listener.join(timeout=5)
        return unsubscribe

    def leases(self, owner: str, seconds: float) -> Leases:
        """This worker's leases on the store's pending work (a connection of their own)."""
        return Leases(lambda: connect(self.url), self.schema, owner, seconds)

    def keep_file(self, sha256: str, raw: bytes) -> None:
        """Store an ingested file's bytes in table ``files`` under their sha256 (once)."""
        self._check_writable()
        with self._lock, self._guard():
            file_bytes.put(self.conn, self.schema, sha256, raw)

    def file_bytes(self, sha256: str) -> bytes | None:
        """The bytes of the file ingested with this sha256, from table ``files`` (None if absent)."""
        with self._lock, self._guard():
            if not self._files_table():
                return None
            return file_bytes.get(self.conn, self.schema, sha256, self.location)

    def _files_table(self) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.files",)).fetchone()
        return row is not None and row[0] is not None

    def call_slots(self) -> CallSlots:
        """This process's slots of the judge endpoints' shared concurrency budgets (a connection of their own)."""
        return CallSlots(lambda: connect(self.url), self.schema)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self.conn.close()


def _listen(url: str, channel: str, callback: Callable[[], None], stop: threading.Event) -> None:
    """The listener thread: LISTEN, wait for notifications a second at a time, until ``stop``."""
    while not stop.is_set():
        try:
            conn = connect(url)
        except LedgerError:
            stop.wait(1.0)
            continue
        try:
            conn.execute(f'LISTEN "{channel}"')
            callback()  # whatever was appended while we were not listening
            while not stop.is_set():
                for _ in conn.notifies(timeout=1.0):
                    callback()
        except Exception:  # psycopg.Error: the connection dropped; reconnect
            stop.wait(1.0)
        finally:
            conn.close()


class _Errors:
    """Turn a psycopg error into a LedgerError naming the store (immutability refusals included)."""

    def __init__(self, location: str):
        self.location = location

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if exc is None or pg.psycopg is None or not isinstance(exc, pg.psycopg.Error):
            return False
        if pg.pg_errors is not None and isinstance(exc, pg.pg_errors.UniqueViolation):
            raise LedgerError(f"{self.location}: {str(exc).strip()} (a row the sequencer lock should have "
                              "kept out: was the store written around evalledger?)") from None
        raise LedgerError(f"{self.location}: {str(exc).strip()}") from None
