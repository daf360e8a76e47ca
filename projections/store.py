"""Where the read models live: ``proj_*`` tables in the ledger's SQLite file, with their position.

A home's read models sit beside the events in ``ledger.db`` (Datasette shows both); a ``.jsonl``
ledger gets a sibling ``<name>.projections.db``. The store uses its own connection, so a fold
never interleaves with a stage's append transaction on the ledger's connection.

Tables: ``proj_position`` (name, seq, hash: the ledger event the models were folded up to),
``proj_cases`` (one row per case: ids for querying plus the JSON state), ``proj_benchmarks``,
``proj_runs``. States are stored as canonical JSON (sorted keys), so the tables themselves are
the same bytes after an incremental update and after a rebuild.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from evalledger.ledger.envelope import decode_json
from evalledger.projections.appliers import restore_case, sparse_case

# Bump when the shape of a stored state changes: tables folded by another version are dropped and
# refolded from seq 1 on first use, so an update never mixes states of two fold versions.
FOLD_VERSION = 4
POSITION_NAME = f"projections/v{FOLD_VERSION}"
TABLES = ("proj_position", "proj_cases", "proj_benchmarks", "proj_runs")

SCHEMA = """
CREATE TABLE IF NOT EXISTS proj_position (name TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_cases (
    case_id TEXT PRIMARY KEY, benchmark TEXT, model TEXT, kind TEXT, question_id TEXT, status TEXT,
    verdict TEXT, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_benchmarks (key TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS proj_runs (run TEXT PRIMARY KEY, state TEXT NOT NULL);
"""


class StaleFold(Exception):
    """Another fold committed since this one read its position; its result must not be saved."""


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

    def __init__(self, led):
        self.conn = sqlite3.connect(store_path(led), isolation_level=None, timeout=60)
        self.conn.execute("PRAGMA busy_timeout = 60000")
        self.conn.execute("PRAGMA journal_mode = WAL")
        # Read models are derived data (a rebuild recreates them): commit without waiting for fsync.
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.executescript(SCHEMA)
        names = [row[0] for row in self.conn.execute("SELECT name FROM proj_position")]
        if any(name != POSITION_NAME for name in names):
            self.drop()

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
        """Drop every read model (a rebuild then folds from seq 1)."""
        self.conn.executescript("".join(f"DROP TABLE IF EXISTS {t};" for t in TABLES))
        self.conn.executescript(SCHEMA)

    def save(self, cases: Iterable[dict], benchmarks: dict[str, dict], runs: dict[str, dict],
             position: tuple[int, str] | None, folded_from: int | None = None) -> None:
        """Upsert states and (when given) the new position, in one transaction.

        ``folded_from``: the position the fold started at; when another fold (a daemon's and a
        user's ``report`` at once) has moved it since, nothing is written and StaleFold is raised.
        """
        from evalledger.projections.results import case_status, effective_verdict
        rows = [(c["case_id"], c["benchmark"], c["model"], c["kind"], c["question_id"],
                 case_status(c), effective_verdict(c), dumps(sparse_case(c))) for c in cases]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if folded_from is not None and self.position()[0] != folded_from:
                raise StaleFold(f"the read models moved past seq {folded_from} during this fold")
            conn.executemany("INSERT OR REPLACE INTO proj_cases VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("INSERT OR REPLACE INTO proj_benchmarks VALUES (?, ?)",
                             [(k, dumps(v)) for k, v in benchmarks.items()])
            conn.executemany("INSERT OR REPLACE INTO proj_runs VALUES (?, ?)",
                             [(k, dumps(v)) for k, v in runs.items()])
            if position is not None:
                conn.execute("INSERT OR REPLACE INTO proj_position VALUES (?, ?, ?)",
                             (POSITION_NAME, position[0], position[1]))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

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
        """Every state of ``proj_benchmarks`` or ``proj_runs``, by key."""
        key = "run" if table == "proj_runs" else "key"
        return {k: decode_json(s) for k, s in self.conn.execute(f"SELECT {key}, state FROM {table}")}

    def iter_cases(self) -> Iterator[dict]:
        """Every case state, sorted by case id."""
        for (state,) in self.conn.execute("SELECT state FROM proj_cases ORDER BY case_id"):
            yield restore_case(decode_json(state))

    def case_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM proj_cases").fetchone()[0]
