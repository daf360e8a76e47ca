"""Where the read models live: ``proj_*`` tables in the ledger's SQLite file, with their position.

A home's read models sit beside the events in ``ledger.db`` (Datasette shows both); a ``.jsonl``
ledger gets a sibling ``<name>.projections.db``. The store uses its own connection, so a fold
never interleaves with a stage's append transaction on the ledger's connection.

Tables: ``proj_position`` (name, seq, hash: the ledger event the models were folded up to),
``proj_cases`` (one row per case: ids for querying plus the JSON state), ``proj_benchmarks``,
``proj_runs``, ``proj_checkpoints`` (the latest signed checkpoint, which reports name). States are stored as canonical JSON (sorted keys), so the tables themselves are
the same bytes after an incremental update and after a rebuild. ``proj_digest`` holds the XOR of
the sha256 of every row, kept up to date row by row as they are written; ``check_digest`` refuses
tables changed since (an ``update proj_cases set verdict = 'pass'`` from a shell), so reports are
never rendered from them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

import orjson

from evalledger.ledger.envelope import decode_json
from evalledger.ledger.persistence import LedgerError
from evalledger.projections.appliers import restore_case, sparse_case

# Bump when the shape of a stored state changes: tables folded by another version are dropped and
# refolded from seq 1 on first use, so an update never mixes states of two fold versions.
FOLD_VERSION = 9   # 5: verdict.confirmed folded (confirmations); 6: abstention, judged_at; 7: repeats; 8: checkpoints, responses;
# 9: row_hash frames the state column as its own bytes (the stored digests of version 8 differ)
POSITION_NAME = f"projections/v{FOLD_VERSION}"
TABLES = ("proj_position", "proj_cases", "proj_benchmarks", "proj_runs", "proj_checkpoints", "proj_digest")
# Each table and the column it is keyed by, in the order the digest (and a comparison) reads them.
KEYED_TABLES = (("proj_position", "name"), ("proj_cases", "case_id"), ("proj_benchmarks", "key"),
                ("proj_runs", "run"), ("proj_checkpoints", "key"))

SCHEMA = """
CREATE TABLE IF NOT EXISTS proj_position (name TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_cases (
    case_id TEXT PRIMARY KEY, benchmark TEXT, model TEXT, kind TEXT, question_id TEXT, status TEXT,
    verdict TEXT, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_benchmarks (key TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_runs (run TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_checkpoints (key TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_digest (name TEXT PRIMARY KEY, digest TEXT NOT NULL);
"""


def rollback_if_open(conn: sqlite3.Connection) -> None:
    """Roll back the connection's transaction if SQLite has not ended it already: a COMMIT that
    fails with SQLITE_FULL (a full disk) rolls the transaction back itself, and a ROLLBACK then
    raises "no transaction is active" over the disk-full error the CLI knows how to report."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class StaleFold(Exception):
    """Another fold committed since this one read its position; its result must not be saved."""


class ReadModelsBusy(LedgerError):
    """Another process kept rebuilding the read models while a reader waited for a whole state."""


class ReadModelsAltered(Exception):
    """The read-model tables do not match the digest stored when evalledger last wrote them."""


def row_hash(table: str, row: tuple) -> int:
    """sha256 of one row (with its table's name) as an integer; the digest XORs them, so it can be
    updated row by row and does not depend on the order rows were written in.

    The last column (a state's JSON text, or the position's hash) is hashed as its own UTF-8 bytes
    after a newline, the others as a JSON array: encoding a state again as a JSON string (escaping
    every quote in it) cost a rebuild more than hashing it. Canonical JSON holds no raw newline, so
    the framing is unambiguous; a row whose last column is not text (changed from a shell) is
    hashed as one JSON array, with no newline after the table's line.
    """
    last = row[-1]
    if last.__class__ is str:
        body = json_bytes(list(row[:-1])) + b"\n" + last.encode("utf-8")
    else:
        body = json_bytes(list(row))
    return int.from_bytes(hashlib.sha256(table.encode() + b"\n" + body).digest(), "big")


def json_bytes(value: Any, indent: bool = False) -> bytes:
    """JSON with sorted keys (indented when asked); integers beyond 64 bits are written exactly."""
    option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:           # orjson refuses integers beyond 64 bits
        return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False,
                          indent=2 if indent else None,
                          separators=(",", ": ") if indent else (",", ":")).encode("utf-8")


def dumps(value: Any) -> str:
    """Canonical JSON text (sorted keys) of a state."""
    return json_bytes(value).decode("utf-8")


def store_path(led) -> str:
    """The SQLite file holding ``led``'s read models (where the ledger says they may live)."""
    return str(led.read_models_path())


def reports_dir(led) -> Path:
    """Where reports go: ``<home>/reports``, else ``<name>-reports`` beside a bare ledger file."""
    if led.home is not None:
        return Path(led.home) / "reports"
    path = led.path
    return path.with_name(path.stem + "-reports")


class ReadModelStore:
    """The read-model tables of one ledger, on a connection of their own."""

    def __init__(self, led, path: str | None = None, any_thread: bool = False):
        self.path = path or store_path(led)   # another file: a fold made aside (verify --projections)
        # any_thread: the viewer's, kept open for its life, may be closed by another thread at exit
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=60, check_same_thread=not any_thread)
        self.conn.execute("PRAGMA busy_timeout = 60000")
        self.conn.execute("PRAGMA journal_mode = WAL")
        # Read models are derived data (a rebuild recreates them): commit without waiting for fsync.
        self.conn.execute("PRAGMA synchronous = NORMAL")
        # Nor zero the pages a rebuild frees (on in some SQLite builds): they held states the events
        # in the same file give again, and zeroing them wrote every page of the dropped tables.
        self.conn.execute("PRAGMA secure_delete = OFF")
        self.conn.executescript(SCHEMA)
        names = [row[0] for row in self.conn.execute("SELECT name FROM proj_position")]
        if any(name != POSITION_NAME for name in names) or (names and self.stored_digest() is None):
            self.drop()   # another fold version, or folded before digests: fold again from seq 1

    def close(self) -> None:
        self.conn.close()

    # --- position ------------------------------------------------------------------------------
    def position(self) -> tuple[int, str]:
        """(seq, hash) of the last ledger event folded; (0, 64 zeros) before the first fold."""
        row = self.conn.execute("SELECT seq, hash FROM proj_position WHERE name = ?",
                                (POSITION_NAME,)).fetchone()
        return (row[0], row[1]) if row else (0, "0" * 64)

    # --- writing -------------------------------------------------------------------------------
    def drop(self) -> None:
        """Drop every read model (a rebuild then folds from seq 1), in one transaction: another
        process reading or folding meanwhile sees the tables as they were or empty, never a table
        missing ("no such table: proj_cases")."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table in TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            rollback_if_open(conn)
            raise

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees the tables as of one commit (a read transaction: WAL keeps that
        state for it), so a render never mixes two folds, nor meets a case another process's
        rebuild dropped after the first pass listed it."""
        self.conn.execute("BEGIN")
        try:
            self.conn.execute("SELECT 1 FROM proj_position LIMIT 1").fetchall()   # the snapshot starts here
            yield
        finally:
            self.conn.execute("ROLLBACK")   # nothing was written: ending the read is all

    def save(self, cases: Iterable[dict], benchmarks: dict[str, dict], runs: dict[str, dict],
             position: tuple[int, str] | None, folded_from: int | None = None,
             checkpoints: dict[str, dict] | None = None, stored_cases: Collection[str] | None = None) -> None:
        """Upsert states and (when given) the new position, in one transaction, with the digest.

        ``folded_from``: the position the fold started at; when another fold (a daemon's and a
        user's ``report`` at once) has moved it since, nothing is written and StaleFold is raised.
        ``stored_cases``: every case id written since the tables were dropped (a rebuild knows
        them): only these are looked up, unless ``proj_cases`` holds another number of rows (another
        process folded meanwhile), when every case is; None: every case is looked up.
        """
        from evalledger.projections.results import case_status, effective_verdict
        rows = {"proj_cases": [(c["case_id"], c["benchmark"], c["model"], c["kind"], c["question_id"],
                                case_status(c), effective_verdict(c), dumps(sparse_case(c))) for c in cases],
                "proj_benchmarks": [(k, dumps(v)) for k, v in benchmarks.items()],
                "proj_runs": [(k, dumps(v)) for k, v in runs.items()],
                "proj_checkpoints": [(k, dumps(v)) for k, v in (checkpoints or {}).items()],
                "proj_position": [] if position is None else [(POSITION_NAME, position[0], position[1])]}
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if folded_from is not None and self.position()[0] != folded_from:
                raise StaleFold(f"the read models moved past seq {folded_from} during this fold")
            digest = int(self.stored_digest() or "0", 16)
            if stored_cases is not None and self.case_count() != len(stored_cases):
                stored_cases = None   # rows this fold did not write: look every case up
            for table, key in KEYED_TABLES:
                new = rows[table]
                if not new:
                    continue
                # The digest moves by the rows replaced and the rows written: the cost of an update
                # stays that of the rows it touches. A row changed behind our back was never in
                # the digest, so replacing it leaves the digest wrong, and the change is still found.
                keys = [row[0] for row in new]
                if table == "proj_cases" and stored_cases is not None:
                    keys = [k for k in keys if k in stored_cases]   # the others were never written
                for old in self._stored_rows(table, key, keys):
                    digest ^= row_hash(table, old)
                for row in new:
                    digest ^= row_hash(table, row)
                marks = ", ".join("?" * len(new[0]))
                conn.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", new)
            conn.execute("INSERT OR REPLACE INTO proj_digest VALUES (?, ?)", (POSITION_NAME, f"{digest:064x}"))
            conn.execute("COMMIT")
        except BaseException:
            rollback_if_open(conn)
            raise

    def _stored_rows(self, table: str, key: str, keys: list) -> Iterator[tuple]:
        """The stored rows of ``table`` with these keys (a few queries of 500 keys)."""
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            yield from self.conn.execute(f"SELECT * FROM {table} WHERE {key} IN ({', '.join('?' * len(chunk))})",
                                         chunk)

    # --- integrity -----------------------------------------------------------------------------
    def rows(self, table: str, key: str) -> Iterator[tuple]:
        """Every row of one read-model table, ordered by its key (``KEYED_TABLES``)."""
        return self.conn.execute(f"SELECT * FROM {table} ORDER BY {key}")

    def contents_digest(self) -> str:
        """The digest of every row of every read-model table: the XOR of their ``row_hash``."""
        digest = 0
        for table, key in KEYED_TABLES:
            for row in self.rows(table, key):
                digest ^= row_hash(table, row)
        return f"{digest:064x}"

    def stored_digest(self) -> str | None:
        """The digest written with the position (None before the first fold)."""
        row = self.conn.execute("SELECT digest FROM proj_digest WHERE name = ?", (POSITION_NAME,)).fetchone()
        return row[0] if row else None

    def check_digest(self) -> None:
        """Raise ReadModelsAltered when the tables are not what evalledger last wrote."""
        stored = self.stored_digest()
        if stored is not None and stored != self.contents_digest():
            raise ReadModelsAltered(
                f"{self.path}: the read models (proj_* tables) do not match the digest stored when they "
                "were written: they were changed outside evalledger; no report is rendered from them. "
                "'evalledger verify --projections' names the first row that differs; 'evalledger rebuild' "
                "folds them afresh from the events")

    # --- reading -------------------------------------------------------------------------------
    def load_cases(self, case_ids: Iterable[str]) -> dict[str, dict]:
        """The stored states of these cases (missing ids are simply absent)."""
        ids = list(case_ids)
        out: dict[str, dict] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for case_id, state in self.conn.execute(
                    f"SELECT case_id, state FROM proj_cases WHERE case_id IN ({marks})", chunk):
                out[case_id] = restore_case(decode_json(state))
        return out

    def load_keyed(self, table: str) -> dict[str, dict]:
        """Every state of ``proj_benchmarks``, ``proj_runs`` or ``proj_checkpoints``, by key."""
        key = "run" if table == "proj_runs" else "key"
        return {k: decode_json(s) for k, s in self.conn.execute(f"SELECT {key}, state FROM {table}")}

    def iter_cases(self) -> Iterator[dict]:
        """Every case state, sorted by case id."""
        for (state,) in self.conn.execute("SELECT state FROM proj_cases ORDER BY case_id"):
            yield restore_case(decode_json(state))

    def case_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM proj_cases").fetchone()[0]
