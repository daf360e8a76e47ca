"""Bytes per case of a judged home: compressed mirror, plain mirror, no blob store, against Inspect's log.

Run:  python benchmarks/perf/storage_bench.py [CASES]     (default 1000: 500 questions x 2 models)

The issue's workload (``replay_bench.judged_home``: two fields a question, deep judgment, the
offline judge) is judged three times in the same run: in a home made with ``init --mirror gzip``
(the blob store and the compressed mirror ``events.jsonl.gz``), in a home made as by default (the
blob store, the plain mirror ``events.jsonl`` with its ``.blobs`` file), and in a home made without
the blob store (the store of before, the baseline). Every file of each home is counted (SQLite
with its WAL checkpointed, the mirror, the mirror's blob file). Inspect is not installed here, so
its figure is the constant the issue measured on the same items: 8.2 KB per item uncompressed.
A fourth home adds compact rows (``init --mirror gzip --rows compact``: ledger.db's data and meta
deflated with a fixed dictionary, ids and hashes as raw bytes). The breakdown per event type (data and meta as stored, in SQLite) shows where the bytes still
are. Exit 0 when the compact home's bytes per case are at most Inspect's.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from replay_bench import judged_home  # noqa: E402  (a sibling script, not a package)

from evalledger import ledger  # noqa: E402
from evalledger.ledger.sqlite import SQLiteRecorder  # noqa: E402

INSPECT_BYTES_PER_ITEM = 8.2 * 1024   # the measure of Inspect's uncompressed log per item


def home_bytes(home: Path) -> dict[str, int]:
    """The size of every file of a home (the WAL checkpointed into ledger.db first), by name."""
    with sqlite3.connect(home / "ledger.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {p.name: p.stat().st_size for p in sorted(home.iterdir()) if p.is_file()}


def by_type(home: Path) -> list[tuple[str, int, int, int]]:
    """(type, events, data bytes, meta bytes) as stored in SQLite, largest data first."""
    with sqlite3.connect(home / "ledger.db") as conn:
        return conn.execute("SELECT type, COUNT(*), SUM(LENGTH(CAST(data AS BLOB))), "
                            "SUM(LENGTH(CAST(meta AS BLOB))) FROM events GROUP BY type ORDER BY 3 DESC").fetchall()


def blob_bytes(home: Path) -> tuple[int, int]:
    """(blobs, their stored bytes) in the home's blob table ((0, 0) without one)."""
    with sqlite3.connect(home / "ledger.db") as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blobs'").fetchone():
            return 0, 0
        count, size = conn.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetchone()
    return count, size


def judged(cases: int, folder: Path, blobs: bool, mirror: str = "jsonl", rows: str = "text") -> Path:
    """A judged home of ``cases`` cases in ``folder``, made with or without the blob store, with
    the plain (``jsonl``) or compressed (``gzip``) mirror, and text or ``compact`` rows."""
    folder.mkdir()
    if not blobs:   # a home made before the blob store: its ledger.db created without the table
        (folder / "run").mkdir()
        SQLiteRecorder(str(folder / "run" / "ledger.db"), blobs=False).close()
    else:
        ledger.init_home(folder / "run", mirror=mirror, rows=rows)
    home, _, _ = judged_home(cases, folder)
    return home


def report(name: str, home: Path, cases: int) -> float:
    """Print a home's bytes per case, file by file and event type by type; returns bytes per case."""
    files = home_bytes(home)
    total = sum(files.values())
    with sqlite3.connect(home / "ledger.db") as conn:
        events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    print(f"{name}: {total / cases / 1024:.2f} KB per case, {events / cases:.2f} events per case")
    for file, size in files.items():
        if size:
            print(f"  {file:22} {size / cases:9.0f} B/case")
    count, size = blob_bytes(home)
    if count:
        print(f"  (in ledger.db: {count} blobs, {size / cases:.0f} B/case compressed)")
    print(f"  {'in SQLite, per case:':22} {'events':>7} {'data B':>8} {'meta B':>8}")
    for type, n, data, meta in by_type(home):
        print(f"  {type:22} {n / cases:7.2f} {data / cases:8.0f} {meta / cases:8.0f}")
    return total / cases


def main(argv: list[str]) -> int:
    """Print bytes per case of the four homes; exit 1 when the compact home is above Inspect's."""
    cases = int(argv[0]) if argv else 1000
    with tempfile.TemporaryDirectory() as tmp:
        rows = report("with compact rows and the compressed mirror (init --mirror gzip --rows compact)",
                      judged(cases, Path(tmp) / "rows", True, "gzip", "compact"), cases)
        compact = report("with the compressed mirror (init --mirror gzip)",
                         judged(cases, Path(tmp) / "gzip", True, "gzip"), cases)
        with_blobs = report("with the blob store (plain mirror, the default)",
                            judged(cases, Path(tmp) / "blobs", True), cases)
        without = report("without it (the baseline)", judged(cases, Path(tmp) / "inline", False), cases)
    print(f"blob store / baseline: {with_blobs / without:.2f}; compressed mirror / baseline: "
          f"{compact / without:.2f}; compressed mirror / plain mirror: {compact / with_blobs:.2f}")
    print(f"blob store / Inspect ({INSPECT_BYTES_PER_ITEM / 1024:.1f} KB per item, stated): with the compressed "
          f"mirror {compact / INSPECT_BYTES_PER_ITEM:.2f} ({'ok' if compact <= INSPECT_BYTES_PER_ITEM else 'MISSED'}), "
          f"with the plain mirror {with_blobs / INSPECT_BYTES_PER_ITEM:.2f}")
    print(f"compact rows and the compressed mirror: {rows / 1024:.2f} KB per case, {rows / compact:.2f} of the "
          f"compressed mirror's home, {rows / INSPECT_BYTES_PER_ITEM:.2f} of Inspect's "
          f"({'ok' if rows <= INSPECT_BYTES_PER_ITEM else 'MISSED'})")
    return 0 if rows <= INSPECT_BYTES_PER_ITEM else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
