"""Ledger speed against raw sqlite3 with the same schema and durability (WAL, synchronous NORMAL).

    python benchmarks/perf/ledger_bench.py [SIZE]      # SIZE events for read and verify (default 1,000,000)

Every figure is measured in this run against a baseline measured in this run on this machine,
and printed with its target and ratio. Exit status 1 when a target is missed.

What is compared (stated again in the output):
- append: the product path, ``Ledger.append`` into a home (validation of the payload against its
  pydantic model, canonical JSON, hash chain, SQLite insert, then the events.jsonl mirror write),
  against raw ``sqlite3`` inserting ready-made rows of the same bytes into the same schema.
  Append into a bare ``.db`` ledger (no mirror) is printed for information, and so is the home
  against raw sqlite3 that checkpoints its write-ahead log as seldom as the ledger does (every
  10,000 pages, SQLite's default being 1,000): the target's baseline is sqlite3 as it comes.
- read: ``for e in led.read(): e.data, e.meta`` against a raw ``SELECT`` scan of the same table with
  ``orjson.loads`` of data and meta; peak RSS of the read measured in a child process.
- verify: ``Ledger.verify()`` of the home (SQLite chain recomputed, mirror compared line by line)
  against the least work that reads every stored byte verify reads (the SQLite rows and the
  mirror file) and sha256-hashes each event once; and of a standalone ``.jsonl`` ledger against
  reading its lines and hashing each.

Rounds of ledger and raw work alternate, the order swapped every round, and each side gets the
same number of tries: every figure is the median of the per-round ratios (and the times printed
are the medians of each side), so other load on the machine skews both sides alike and neither
side is given an extra try. The child process that measures the read's peak RSS is not timed.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.sqlite import SCHEMA
from evalledger.ledger.sqlite_schema import WAL_AUTOCHECKPOINT

TEXT = "The judge found the excerpt verbatim in the response; similarity 1.00, attempt 1, no retry needed."
META = {"run": "run:bench", "stage": "bench", "stage_version": "1"}
TARGETS = {"append_batch": 0.5, "append_single": 0.7, "read": 1.5, "verify": 2.0}


def new_event(i: int) -> NewEvent:
    """One realistic event: a note on one of 1,000 case streams."""
    return NewEvent(f"case:{i % 1000:04d}", "note.added", {"text": f"{TEXT} #{i}", "author": "bench"},
                    key=f"bench:{i}", meta=META)


def raw_connection(path: Path, checkpoint: int | None = None) -> sqlite3.Connection:
    """Raw sqlite3 with the ledger's schema and durability; ``checkpoint``: its WAL's auto-checkpoint
    interval in pages (None: SQLite's default, 1,000)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if checkpoint is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint = {checkpoint}")
    conn.executescript(SCHEMA)
    return conn


def rows_like(led: ledger.Ledger, count: int) -> list[tuple]:
    """Ready-made rows (the bytes the ledger stores) for the raw baseline to insert."""
    return [(e.seq, e.id, e.stream, e.version, e.type, e.schema, e.raw_data, e.raw_meta, e.prev_hash, e.hash)
            for e in led.read(to_seq=count)]


INSERT = ("INSERT INTO events (seq, id, stream, version, type, schema, data, meta, prev_hash, hash) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def bench_append(work: Path, count: int, batch: int,
                 rounds: int = 10) -> tuple[float, float, float, float, float, float]:
    """Append ``count`` events to a home, a bare .db and raw sqlite3, in ``rounds`` interleaved slices.

    Returns (home ev/s, .db ev/s, raw ev/s, home/raw ratio, .db/raw ratio, home/raw ratio where
    the raw side checkpoints its WAL as seldom as the ledger does): the median over the rounds
    of each, so load from other processes on the machine hits all of them alike. The target is
    against raw sqlite3 as it comes (SQLite's default checkpoint interval); the last ratio says
    how much of the figure is the ledger's longer interval.
    """
    source = ledger.open_ledger(work / "source")
    source.append([new_event(i) for i in range(count)])
    rows = rows_like(source, count)
    source.close()
    events = [new_event(i) for i in range(count)]
    (work / "raw").mkdir()
    raws = {"raw": raw_connection(work / "raw" / "raw.db"),
            "raw-same": raw_connection(work / "raw" / "same.db", WAL_AUTOCHECKPOINT)}
    home = ledger.open_ledger(work / "home-append")
    bare = ledger.open_ledger(work / "bare.db")
    rounds = max(1, min(rounds, count // batch))  # every round must append a full share of the events
    per_round = count // rounds // batch * batch
    kinds = ["raw", "home", "db", "raw-same"]
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for r in range(rounds):
        part = slice(r * per_round, (r + 1) * per_round)
        for kind in kinds[r % 4:] + kinds[:r % 4]:
            start = time.perf_counter()
            if kind in raws:
                _raw_append(raws[kind], rows[part], batch)
            else:
                _ledger_append(home if kind == "home" else bare, events[part], batch)
            times[kind].append(time.perf_counter() - start)
    for conn in raws.values():
        conn.close()
    home.close()
    bare.close()
    for name in ("home-append", "bare.db", "raw", "source"):
        target = work / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    rate = {kind: per_round / statistics.median(t) for kind, t in times.items()}
    ratio = {kind: statistics.median(r / o for r, o in zip(times["raw"], times[kind])) for kind in ("home", "db")}
    same = statistics.median(r / o for r, o in zip(times["raw-same"], times["home"]))
    return rate["home"], rate["db"], rate["raw"], ratio["home"], ratio["db"], same


def _raw_append(conn: sqlite3.Connection, rows: list[tuple], batch: int) -> None:
    for at in range(0, len(rows), batch):
        conn.execute("BEGIN IMMEDIATE")
        if batch == 1:
            conn.execute(INSERT, rows[at])
        else:
            conn.executemany(INSERT, rows[at:at + batch])
        conn.execute("COMMIT")


def _ledger_append(led: ledger.Ledger, events: list[NewEvent], batch: int) -> None:
    for at in range(0, len(events), batch):
        led.append(events[at] if batch == 1 else events[at:at + batch])


def build_home(home: Path, size: int) -> None:
    """A home holding ``size`` events, appended in batches of 1,000."""
    led = ledger.open_ledger(home)
    for at in range(0, size, 1000):
        led.append([new_event(i) for i in range(at, min(size, at + 1000))])
    led.close()


def raw_read(db: Path) -> float:
    """Seconds to read every row of the SQLite file directly (the read baseline)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    start = time.perf_counter()
    for row in conn.execute("SELECT seq, id, stream, version, type, schema, data, meta, prev_hash, hash "
                            "FROM events ORDER BY seq"):
        orjson.loads(row[6])
        orjson.loads(row[7])
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def ledger_read(home: Path) -> float:
    """Seconds to read every event through the Ledger API, decoding data and meta."""
    led = ledger.open_ledger(home, readonly=True)
    start = time.perf_counter()
    for event in led.read():
        _ = (event.data, event.meta)   # decode both, as a reader would
    elapsed = time.perf_counter() - start
    led.close()
    return elapsed


def raw_verify_home(home: Path) -> float:
    """Read the SQLite rows and the mirror file, sha256 each event's stored bytes once."""
    conn = sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True)
    start = time.perf_counter()
    with open(home / "events.jsonl", "rb") as mirror:
        for _row, line in zip(conn.execute("SELECT seq, id, stream, version, type, schema, data, meta, "
                                          "prev_hash, hash FROM events ORDER BY seq"), mirror):
            hashlib.sha256(line).hexdigest()
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def raw_verify_file(path: Path) -> float:
    """Seconds to sha256 every line of a JSONL file (the verify baseline)."""
    start = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            hashlib.sha256(line).hexdigest()
    return time.perf_counter() - start


def ledger_verify(path: Path) -> float:
    """Seconds for ``led.verify()`` over a ledger file or home."""
    led = ledger.open_ledger(path, readonly=True)
    start = time.perf_counter()
    report = led.verify()
    elapsed = time.perf_counter() - start
    led.close()
    if not report.ok:
        raise SystemExit(f"verify failed on the benchmark ledger: {report.problems}")
    return elapsed


def child_read(home: str) -> None:
    """Run in a child process so its peak RSS is the read's alone: prints peak MB.

    VmHWM (this process image's high-water mark) rather than ru_maxrss, which would count the
    memory of the parent the child was forked from. Its time is not a figure: the raw scan has no
    child-process run to match it, and counting it would give the ledger one more try.
    """
    ledger_read(Path(home))
    with open("/proc/self/status") as fh:
        hwm_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    print(hwm_kb / 1024)


def interleaved(rounds: int, ours, raw) -> tuple[float, float, float]:
    """(median seconds of ``ours``, of ``raw``, median of the per-round ratios ours / raw).

    Both run ``rounds`` times, alternating, the first of each round swapped every round (a warm
    cache or a burst of load favours neither side), so each side gets exactly the same tries.
    """
    times: dict[str, list[float]] = {"ours": [], "raw": []}
    for r in range(rounds):
        for name, fn in ((("ours", ours), ("raw", raw)) if r % 2 == 0 else (("raw", raw), ("ours", ours))):
            times[name].append(fn())
    ratios = [o / w for o, w in zip(times["ours"], times["raw"])]
    return statistics.median(times["ours"]), statistics.median(times["raw"]), statistics.median(ratios)


class Figures:
    """Collects printed figures and whether each met its target."""

    def __init__(self):
        self.missed: list[str] = []

    def ratio(self, name: str, ours: float, raw: float, unit: str, ratio: float, target: float) -> None:
        """A throughput figure whose ratio (ours / raw, at least ``target``) was measured per round."""
        self._print(name, f"{ours:,.0f} {unit} vs raw {raw:,.0f} {unit}", ratio, f">= {target}", ratio >= target)

    def lower(self, name: str, timed: tuple[float, float, float], target: float) -> None:
        """A time figure (median seconds of ours and raw, median ratio), at most ``target`` x raw."""
        ours, raw, ratio = timed
        self._print(name, f"median {ours:.2f} s vs raw {raw:.2f} s", ratio, f"<= {target}", ratio <= target)

    def limit(self, name: str, value: float, unit: str, target: float) -> None:
        self._print(name, f"{value:,.0f} {unit}", value / target, f"<= {target:,.0f} {unit}", value <= target)

    def info(self, name: str, text: str) -> None:
        print(f"  {name:<42} {text}")

    def _print(self, name: str, text: str, ratio: float, target: str, ok: bool) -> None:
        print(f"{'ok  ' if ok else 'MISS'} {name:<42} {text}  ratio {ratio:.2f} (target {target})")
        if not ok:
            self.missed.append(name)


def main(argv: list[str] | None = None) -> int:
    """Run the ledger benchmark and print its ratios; 0 when the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("size", nargs="?", type=int, default=1_000_000, help="events for read and verify")
    parser.add_argument("--child-read", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_read:
        child_read(args.child_read)
        return 0
    size = args.size
    single, batched = min(size, 20_000), min(size, 100_000)
    # small CI sizes time in milliseconds: more rounds; an odd count, so the median is one round
    repeats = min(21, max(3, 200_000 // size)) | 1
    figures = Figures()
    print(f"evalledger ledger benchmark: {size:,} events for read/verify, sqlite {sqlite3.sqlite_version}, "
          f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        work = Path(tmp)
        same_note = f"ratio vs raw sqlite3 checkpointing every {WAL_AUTOCHECKPOINT:,} pages as the ledger does"
        home, db, raw, home_ratio, db_ratio, same = bench_append(work, batched, 1000)
        figures.ratio("append, batches of 1,000 (home + mirror)", home, raw, "ev/s", home_ratio,
                      TARGETS["append_batch"])
        figures.info("append, batches of 1,000 (bare .db)", f"{db:,.0f} ev/s, ratio {db_ratio:.2f}")
        figures.info("append, batches of 1,000 (home + mirror)", f"{same_note}: {same:.2f}")
        home, db, raw, home_ratio, db_ratio, same = bench_append(work, single, 1)
        figures.ratio("append, 1 event a transaction (home+mirror)", home, raw, "ev/s", home_ratio,
                      TARGETS["append_single"])
        figures.info("append, 1 event a transaction (bare .db)", f"{db:,.0f} ev/s, ratio {db_ratio:.2f}")
        figures.info("append, 1 event a transaction (home+mirror)", f"{same_note}: {same:.2f}")

        built = work / "home"
        start = time.perf_counter()
        build_home(built, size)
        figures.info("built the read/verify home", f"{size:,} events in {time.perf_counter() - start:.1f} s")
        child = subprocess.run([sys.executable, __file__, "--child-read", str(built)], check=True,
                               capture_output=True, text=True)
        rss_mb = float(child.stdout.split()[0])
        figures.info("rounds of each (ours and raw, alternating)", f"{repeats}, medians")
        figures.lower(f"read + decode {size:,} events",
                      interleaved(repeats, lambda: ledger_read(built), lambda: raw_read(built / "ledger.db")),
                      TARGETS["read"])
        figures.limit("read, peak RSS of the reading process", rss_mb, "MB", 200)

        figures.lower(f"verify {size:,} events (home: SQLite + mirror)",
                      interleaved(repeats, lambda: ledger_verify(built), lambda: raw_verify_home(built)),
                      TARGETS["verify"])
        exported = work / "export.jsonl"
        shutil.copyfile(built / "events.jsonl", exported)
        figures.lower(f"verify {size:,} events (standalone .jsonl)",
                      interleaved(repeats, lambda: ledger_verify(exported), lambda: raw_verify_file(exported)),
                      TARGETS["verify"])
    if figures.missed:
        print(f"missed: {', '.join(figures.missed)}")
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
