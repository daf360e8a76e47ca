"""The viewer's case index: a side SQLite file with one row per case, for paging, sorting and search.

The read models (``proj_cases``) belong to the fold and hold neither the response text nor which
run made each judge call; the viewer keeps its own tables (cases, and judge usage per run) in ``<home>/view-index.db`` (beside a bare ledger file:
``<name>.view-index.db``), never altering the projection tables. It is derived data: deleting
the file only costs a rebuild. ``sync`` brings it up to the read models' position, touching only
the cases whose streams got events since the last sync, and adding the judge calls recorded
since then to their runs' sums.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterator

from evalledger.ledger.envelope import decode_json
from evalledger.projections.appliers import _call_cost, _usage_tokens, restore_case
from evalledger.projections.case_result import case_result
from evalledger.projections.results import (
    effective_verdict,
    is_auto_failed,
    original_verdict,
    override_of,
)
from evalledger.projections.store import json_bytes, rollback_if_open

INDEX_VERSION = 4   # 4: "overridden" is an override in force (one a confirmation undid is not)
PAGE_SIZE = 50
PAGE_RESULT_KEYS = ("status", "verdict", "original_verdict", "fields", "risk", "reasoning", "traits",
                    "traits_auto_failed", "claims", "audit", "failures")
SORTS = {"case": "case_id", "benchmark": "benchmark_name", "model": "model", "question": "question_id",
         "status": "status", "verdict": "verdict", "seq": "opened_seq"}
VERDICT_FILTERS = {
    "pass": "verdict = 'pass'", "fail": "verdict = 'fail'", "auto-failed": "auto_failed = 1",
    "failed-stage": "failed_stage = 1", "overridden": "overridden = 1", "pending": "status = 'pending'",
}

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS view_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS view_cases (
    case_id TEXT PRIMARY KEY, benchmark TEXT, benchmark_name TEXT, model TEXT, kind TEXT,
    question_id TEXT, status TEXT, verdict TEXT, original_verdict TEXT, overridden INTEGER NOT NULL,
    auto_failed INTEGER NOT NULL, failed_stage INTEGER NOT NULL, opened_seq INTEGER,
    question TEXT NOT NULL, response TEXT NOT NULL, result TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS view_cases_verdict ON view_cases (verdict, case_id);
CREATE INDEX IF NOT EXISTS view_cases_bench ON view_cases (benchmark_name, model, case_id);
CREATE INDEX IF NOT EXISTS view_cases_model ON view_cases (model, case_id);
CREATE INDEX IF NOT EXISTS view_cases_name ON view_cases (benchmark_name, case_id);
CREATE INDEX IF NOT EXISTS view_cases_status ON view_cases (status, case_id);
CREATE INDEX IF NOT EXISTS view_cases_question ON view_cases (question_id, case_id);
CREATE INDEX IF NOT EXISTS view_cases_seq ON view_cases (opened_seq);
CREATE TABLE IF NOT EXISTS view_changed (case_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS view_runs (
    run TEXT PRIMARY KEY, calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    tokens INTEGER NOT NULL, cost_nano INTEGER NOT NULL, unpriced INTEGER NOT NULL);
INSERT OR IGNORE INTO view_meta VALUES ('version', '{INDEX_VERSION}');
"""


def index_path(led) -> Path:
    """Where the viewer's index of ``led`` lives (inside the home, or beside a bare ledger file)."""
    if led.home is not None:
        return Path(led.home) / "view-index.db"
    path = Path(led.recorder.path)
    return path.with_name(path.stem + ".view-index.db")


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating when missing) the index file; one of another version is emptied first."""
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    row = None
    try:
        row = conn.execute("SELECT value FROM view_meta WHERE key = 'version'").fetchone()
    except sqlite3.OperationalError:
        pass
    if row is not None and row[0] != str(INDEX_VERSION):
        conn.executescript("DROP TABLE IF EXISTS view_meta; DROP TABLE IF EXISTS view_cases; "
                           "DROP TABLE IF EXISTS view_changed; DROP TABLE IF EXISTS view_runs;")
    conn.executescript(SCHEMA)
    return conn


def indexed_position(conn: sqlite3.Connection) -> tuple[int, str | None]:
    """The ledger seq the index was synced up to and the hash of the event there ((0, None)
    before the first sync; the hash is None in an index written before it was kept)."""
    meta = dict(conn.execute("SELECT key, value FROM view_meta WHERE key IN ('seq', 'hash')"))
    return int(meta.get("seq", 0)), meta.get("hash")


def _same_ledger(led, done: int, done_hash: str | None) -> bool:
    """True when ``led``'s event at seq ``done`` still has the hash the index was synced to
    (``Ledger.holds``). The index file stays in the home when its ``ledger.db`` is replaced (a
    backup restored, another home's copied in), and a seq alone cannot tell: the index would keep
    the old ledger's rows and add the new one's events after ``done`` to them."""
    return done == 0 or (done_hash is not None and led.holds(done, done_hash))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


# A judge call's cost is summed in whole nano-USD: integer sums are the same whatever the batches
# and syncs they were added in, so the figure is a function of the ledger alone.
NANO = 1_000_000_000
NO_RUN = ""                     # judge calls recorded outside any run (meta without ``run``)


def _add_usage(usage: dict[str, list[int]], event) -> None:
    """Add one ``judge.called`` to its run's sums: calls, input/output/total tokens, cost, unpriced."""
    data = event.data if isinstance(event.data, dict) else {}
    meta = event.meta if isinstance(event.meta, dict) else {}
    run = meta.get("run")
    sums = usage.setdefault(run if isinstance(run, str) else NO_RUN, [0, 0, 0, 0, 0, 0])
    inp, out, total = _usage_tokens(data.get("usage"))
    cost = _call_cost(data)
    sums[0] += 1
    sums[1] += inp
    sums[2] += out
    sums[3] += total
    if cost is None:
        sums[5] += 1
    else:
        sums[4] += round(cost * NANO)


# Question and response characters an index batch holds at most, about (46 cases with 1 MB
# responses were one batch, all held at once).
BATCH_CHARS = 8_000_000


def _event_batches(led, from_seq: int, to_seq: int, size: int = 2000) -> Iterator[tuple[dict, set[str], dict]]:
    """Per ``size`` events of the range: case id -> its case.opened facts, the case ids touched,
    and run -> the judge usage sums of the batch's calls (``_add_usage``).

    Batches (ended early by long texts, ``BATCH_CHARS``) keep a first build of 100,000 cases in
    bounded memory.
    """
    opened: dict[str, dict] = {}
    touched: set[str] = set()
    usage: dict[str, list[int]] = {}
    held = 0   # characters of the batch's texts: a batch of long responses ends early
    # a first build needs the openings and the judge calls only
    types = ["case.opened", "judge.called"] if from_seq == 1 else None
    for count, event in enumerate(led.read(from_seq=from_seq, to_seq=to_seq, types=types), 1):
        if event.type == "judge.called":
            _add_usage(usage, event)
        if event.stream.startswith("case:"):
            case_id = event.stream[5:]
            touched.add(case_id)
            if event.type == "case.opened":
                data = event.data if isinstance(event.data, dict) else {}
                question = data.get("question") if isinstance(data.get("question"), dict) else {}
                opened[case_id] = {"benchmark_name": _text(data.get("benchmark_name") or data.get("benchmark")),
                                   "question": _text(question.get("question") or question.get("text")),
                                   "response": _text(data.get("response")), "seq": event.seq}
                held += len(opened[case_id]["question"]) + len(opened[case_id]["response"])
        if count % size == 0 or held > BATCH_CHARS:
            yield opened, touched, usage
            opened, touched, usage, held = {}, set(), {}, 0
    yield opened, touched, usage


def benchmark_names(store_conn: sqlite3.Connection) -> dict[str, str]:
    """Benchmark id -> the name it was registered under."""
    names = {}
    for key, state in store_conn.execute("SELECT key, state FROM proj_benchmarks"):
        name = decode_json(state).get("name")
        if isinstance(name, str) and name:
            names[key] = name
    return names


def page_result(case: dict) -> str:
    """What a case page shows of the case's result (``case_result``: status, verdicts, fields,
    risk, reasoning, traits, claims, audit, failed stages), as JSON text: computed once when the
    case is indexed, so a case page sends it as stored instead of folding the case per request."""
    result = case_result(case)
    return json_bytes({k: result[k] for k in PAGE_RESULT_KEYS if k in result}).decode("utf-8")


def case_result_json(conn: sqlite3.Connection, case_id: str) -> str | None:
    """The indexed ``page_result`` of a case, or None when the case is not indexed."""
    row = conn.execute("SELECT result FROM view_cases WHERE case_id = ?", (case_id,)).fetchone()
    return row[0] if row else None


def _case_row(case_id: str, stored: tuple, opened: dict | None, old: tuple | None, names: dict) -> tuple:
    """One ``view_cases`` row from a proj_cases row and the case's opening (or the row it had)."""
    benchmark, model, kind, question_id, status, verdict, state = stored
    case = restore_case(decode_json(state))
    if opened is None and old is not None:
        opened = {"benchmark_name": old[0], "question": old[1], "response": old[2], "seq": old[3]}
    opened = opened or {"benchmark_name": benchmark, "question": "", "response": "", "seq": None}
    name = names.get(benchmark) or opened["benchmark_name"] or benchmark
    return (case_id, benchmark, name, model, kind, question_id, status,
            effective_verdict(case), original_verdict(case), int(override_of(case) is not None),
            int(is_auto_failed(case)), int(bool(case["failures"]) and status != "judged"), opened["seq"],
            opened["question"], opened["response"], page_result(case))


RUN_UPSERT = """INSERT INTO view_runs VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run) DO UPDATE SET
    calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens, tokens = tokens + excluded.tokens,
    cost_nano = cost_nano + excluded.cost_nano, unpriced = unpriced + excluded.unpriced"""


def sync(led, conn: sqlite3.Connection, store_conn: sqlite3.Connection) -> int:
    """Bring the index up to the read models' position; returns the number of cases (re)indexed.

    ``store_conn`` reads the read models (``projections.store``); only cases whose streams got
    events after the last sync are rewritten, so a sync after a few appends costs a few rows.
    """
    row = store_conn.execute("SELECT seq, hash FROM proj_position").fetchone()
    target, target_hash = row if row else (0, None)
    done, done_hash = indexed_position(conn)
    if target == done and done_hash == target_hash:
        return 0
    names = benchmark_names(store_conn)
    written = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        # read models rebuilt, or another ledger under the same name: index from scratch (in the
        # transaction, so an index emptied is never left behind marked as synced)
        if target <= done or not _same_ledger(led, done, done_hash):
            conn.execute("DELETE FROM view_cases")
            conn.execute("DELETE FROM view_runs")
            done = 0
        for opened, touched, usage in _event_batches(led, done + 1, target):
            rows = _rows_for(conn, store_conn, sorted(touched), opened, names)
            conn.executemany("INSERT OR REPLACE INTO view_cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             rows)
            conn.executemany(RUN_UPSERT, [(run, *sums) for run, sums in usage.items()])
            written += len(rows)
        conn.execute("INSERT OR REPLACE INTO view_meta VALUES ('seq', ?)", (str(target),))
        conn.execute("DELETE FROM view_meta WHERE key = 'hash'")
        if target_hash is not None:
            conn.execute("INSERT INTO view_meta VALUES ('hash', ?)", (target_hash,))
        conn.execute("COMMIT")
    except BaseException:
        rollback_if_open(conn)
        raise
    return written


def _rows_for(conn, store_conn, ids: list[str], opened: dict, names: dict) -> list[tuple]:
    """The new index rows of these cases (their read-model rows, with what the index had of them)."""
    rows = []
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        old = {r[0]: r[1:] for r in conn.execute(
            f"SELECT case_id, benchmark_name, question, response, opened_seq FROM view_cases "
            f"WHERE case_id IN ({marks})", chunk)}
        for case_id, *stored in store_conn.execute(
                f"SELECT case_id, benchmark, model, kind, question_id, status, verdict, state FROM proj_cases "
                f"WHERE case_id IN ({marks})", chunk):
            rows.append(_case_row(case_id, tuple(stored), opened.get(case_id), old.get(case_id), names))
    return rows


def run_usage(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Run id -> its judge calls, tokens (input, output, total) and cost in USD; the cost is None
    (unknown) when one of its calls was unpriced. Calls made outside any run are under ``NO_RUN``."""
    out = {}
    for run, calls, inp, outp, tokens, cost_nano, unpriced in conn.execute(
            "SELECT run, calls, input_tokens, output_tokens, tokens, cost_nano, unpriced FROM view_runs ORDER BY run"):
        out[run] = {"calls": calls, "input_tokens": inp, "output_tokens": outp, "tokens": tokens,
                    "cost": None if unpriced else cost_nano / NANO, "unpriced_calls": unpriced}
    return out


def set_queue(conn: sqlite3.Connection, case_ids: list[str]) -> None:
    """Hold a review queue (``view --queue``) for the table's "review queue" filter: a temporary
    table of this connection, so viewers of one home with other queues never share it."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS view_queue (case_id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.view_queue")
    conn.executemany("INSERT OR IGNORE INTO temp.view_queue VALUES (?)", [(c,) for c in case_ids])
    conn.commit()


def set_changed(conn: sqlite3.Connection, case_ids: list[str]) -> None:
    """Record the cases that differ from the compared home (the table's "changed" filter)."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM view_changed")
    conn.executemany("INSERT OR IGNORE INTO view_changed VALUES (?)", [(c,) for c in case_ids])
    conn.execute("COMMIT")


def _where(filters: dict[str, str]) -> tuple[str, list]:
    clauses, params = [], []
    verdict = filters.get("verdict") or ""
    if verdict in VERDICT_FILTERS:
        clauses.append(VERDICT_FILTERS[verdict])
    if filters.get("benchmark"):                           # by name or by id
        clauses.append("(benchmark_name = ? OR benchmark = ?)")
        params += [filters["benchmark"], filters["benchmark"]]
    if filters.get("model"):
        clauses.append("model = ?")
        params.append(filters["model"])
    if filters.get("q"):
        needle = "%" + filters["q"].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        clauses.append("(question LIKE ? ESCAPE '\\' OR response LIKE ? ESCAPE '\\' OR case_id LIKE ? ESCAPE '\\')")
        params += [needle, needle, needle]
    if filters.get("changed"):
        clauses.append("case_id IN (SELECT case_id FROM view_changed)")
    if filters.get("queue"):                               # the --queue file (a temporary table)
        clauses.append("case_id IN (SELECT case_id FROM temp.view_queue)")
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def count_cases(conn: sqlite3.Connection, filters: dict[str, str]) -> int:
    """How many cases match ``filters``."""
    where, params = _where(filters)
    return conn.execute(f"SELECT COUNT(*) FROM view_cases{where}", params).fetchone()[0]


def query_cases(conn: sqlite3.Connection, filters: dict[str, str], sort: str = "case", descending: bool = False,
                page: int = 1, page_size: int = PAGE_SIZE, total: int | None = None) -> dict[str, Any]:
    """One page of cases matching ``filters`` (verdict, benchmark, model, q, changed), and the total
    (counted here unless the caller knows it: ``count_cases`` at the same index position)."""
    where, params = _where(filters)
    column = SORTS.get(sort, "case_id")
    order = "DESC" if descending else "ASC"
    tie = "" if column == "case_id" else f", case_id {order}"   # a repeated key would make SQLite sort
    if total is None:
        total = count_cases(conn, filters)
    pages = max(1, -(-total // page_size))
    page = min(max(1, page), pages)
    # Two steps: the page's ids from the sort column's index alone (skipping OFFSET entries of a
    # narrow index, not of the table with its response texts), then those rows by primary key.
    ids = [r[0] for r in conn.execute(
        f"SELECT case_id FROM view_cases{where} ORDER BY {column} {order}{tie} LIMIT ? OFFSET ?",
        [*params, page_size, (page - 1) * page_size])]
    marks = ", ".join("?" * len(ids))
    found = {r[0]: r for r in conn.execute(
        f"SELECT case_id, benchmark_name, model, kind, question_id, status, verdict, original_verdict, "
        f"overridden, auto_failed, failed_stage, substr(question, 1, 160) FROM view_cases "
        f"WHERE case_id IN ({marks})", ids)} if ids else {}
    rows = [found[i] for i in ids if i in found]
    keys = ("case_id", "benchmark", "model", "kind", "question_id", "status", "verdict", "original_verdict",
            "overridden", "auto_failed", "failed_stage", "question")
    return {"rows": [dict(zip(keys, r, strict=True)) for r in rows], "total": total, "page": page, "pages": pages}


def choices(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """The benchmark names and models present, for the filter form."""
    return {"benchmarks": [r[0] for r in conn.execute(
                "SELECT DISTINCT benchmark_name FROM view_cases ORDER BY 1") if r[0] is not None],
            "models": [r[0] for r in conn.execute(
                "SELECT DISTINCT model FROM view_cases ORDER BY 1") if r[0] is not None]}
