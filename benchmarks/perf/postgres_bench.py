"""Performance figures for the PostgreSQL store, each against a baseline measured in the same run.

Run:  eval "$(bash .ci/start-postgres)"            # a throwaway server; sets EVALLEDGER_TEST_PG
      python benchmarks/perf/postgres_bench.py      (10,000 events, 8 appenders, 480 cases)
      python benchmarks/perf/postgres_bench.py --events 500 --appender-events 50 --cases 16   (CI)

1. Appends through ``Ledger.append`` (payload validation, advisory lock, head read, id and
   version checks, sealing, COPY) vs raw psycopg inserts (``executemany``, pipelined) of the
   same sealed rows into a copy of the table, one transaction per batch, for batches of 1 and 100. Target: the recorder at least 0.5x raw for batches of 100.
2. The sequencer's ceiling: 8 processes appending one event a transaction at once; events/s in
   total (every append takes the one advisory lock, so this is the store's write ceiling).
3. Workers: 1, 2 and 4 ``evalledger run`` processes (own homes, one store) judging the same
   number of cases against a 50 ms stand-in judge at a fixed concurrency each (``--concurrency``,
   default 1). Target: 4 workers at least 3.5x one worker's cases/s while judging (from the
   first case judged to the last, by the events' ``recorded_at``: the processes' start-up, a
   second or so each on a loaded machine, is printed apart, in the wall-clock rate). The
   concurrency is low enough that the judge's latency, not the CPU, bounds a worker: at
   concurrency 4 the 4 workers' CPU work saturates a 2-core machine and cannot scale.
4. A shared judge budget: 4 workers at concurrency 4 each under ``--shared-concurrency 8`` (half
   their 16 calls): cases/s, and the most requests the judge answered at once. Target: never
   more than 8 at once.

The server's URL comes from EVALLEDGER_TEST_PG (or --url). Exit 0 when every target is met, else 1.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import psycopg

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.postgres import split_store_url
from evalledger.testing.stand_in import StandIn, StandInThread

BATCH_TARGET = 0.5
WORKERS_TARGET = 3.5
SHARED_BUDGET = 8


def fresh(url: str) -> str:
    """A store URL naming a new schema."""
    return f"{url}?schema=bench_{uuid.uuid4().hex[:12]}"


def events(n: int, tag: str) -> list[NewEvent]:
    """``n`` note events over 50 streams, with fixed keys."""
    return [NewEvent(f"case:s{i % 50}", "note.added", {"text": f"{tag} event {i} " + "x" * 200}, key=f"{tag}:{i}")
            for i in range(n)]


def bench_appends(url: str, total: int, batch: int) -> tuple[float, float]:
    """(recorder events/s, raw COPY events/s) for ``total`` events in batches of ``batch``."""
    store = fresh(url)
    led = ledger.open_ledger(store)
    todo = events(total, f"b{batch}")
    started = time.perf_counter()
    for at in range(0, total, batch):
        led.append(todo[at:at + batch])
    ours = total / (time.perf_counter() - started)
    rows = [tuple(r) for r in _rows(led)]
    led.close()
    conn_url, schema = split_store_url(store)
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.raw (LIKE {schema}.events INCLUDING ALL)")
        insert = f"INSERT INTO {schema}.raw VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        started = time.perf_counter()
        for at in range(0, total, batch):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(insert, rows[at:at + batch])   # psycopg pipelines the statements
        raw = total / (time.perf_counter() - started)
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return ours, raw


def _rows(led: ledger.Ledger) -> list[tuple]:
    return [(e.seq, e.id, e.stream, e.version, e.type, e.schema, e.raw_data, e.raw_meta, e.prev_hash, e.hash)
            for e in led.read()]


def _appender(store: str, worker: int, count: int, ready, go) -> None:
    led = ledger.open_ledger(store)
    ready.wait()
    go.wait()
    for i in range(count):
        led.append(NewEvent(f"case:w{worker}", "note.added", {"text": f"{worker}/{i}"}))
    led.close()


def bench_sequencer(url: str, appenders: int, count: int) -> tuple[float, bool]:
    """(events/s in total with ``appenders`` processes appending one event a transaction, chain ok)."""
    store = fresh(url)
    ledger.open_ledger(store).close()
    ready = multiprocessing.Barrier(appenders + 1)
    go = multiprocessing.Event()
    procs = [multiprocessing.Process(target=_appender, args=(store, n, count, ready, go)) for n in range(appenders)]
    for p in procs:
        p.start()
    ready.wait()
    started = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    rate = appenders * count / (time.perf_counter() - started)
    with ledger.open_ledger(store, readonly=True) as led:
        ok = led.verify().ok and led.head().seq == appenders * count
    return rate, ok


def benchmark_file(cases: int) -> bytes:
    """A native benchmark with ``cases`` cases (one model answering each question)."""
    questions = [{"id": f"q{i}", "question": f"What is {i}?",
                  "template": {"fields": [{"name": "value", "type": "int", "description": "the number",
                                           "ground_truth": i, "verify_with": {"type": "NumericExact"}}]}}
                 for i in range(cases)]
    responses = [{"question_id": f"q{i}", "model": "m", "text": f"It is {i}."} for i in range(cases)]
    return json.dumps({"format": "evalledger/benchmark@1", "name": "bench", "questions": questions,
                       "responses": responses}).encode()


def judging_rate(led: ledger.Ledger) -> float:
    """Cases/s from the first ``case.judged`` to the last, by their ``recorded_at``."""
    stamps = sorted(datetime.fromisoformat(e.meta["recorded_at"]) for e in led.read(types=["case.judged"]))
    span = (stamps[-1] - stamps[0]).total_seconds()
    return (len(stamps) - 1) / span if span > 0 else float("inf")


def bench_workers(url: str, workers: int, cases: int, base_url: str, tmp: Path, concurrency: int,
                  *extra: str) -> tuple[float, float]:
    """(cases/s while judging, cases/s by the wall clock with start-up) for ``workers`` run
    processes judging ``cases`` cases from one store (``extra``: run options)."""
    store = fresh(url)
    home = ledger.init_home(tmp / f"ingest-{workers}-{len(extra)}", store=store)
    source = tmp / f"bench-{workers}-{len(extra)}.json"
    source.write_bytes(benchmark_file(cases))
    cli = [sys.executable, "-m", "evalledger"]
    subprocess.run([*cli, "--home", str(home), "ingest", str(source)], check=True, capture_output=True)
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_MODEL": "stand-in", "OPENAI_API_KEY": "bench"}
    started = time.perf_counter()
    procs = [subprocess.Popen([*cli, "--home", str(tmp / f"w{workers}-{len(extra)}-{n}"), "--store", store, "run",
                               "--judge", "openai", "--quiet", "--concurrency", str(concurrency), *extra], env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for n in range(workers)]
    for p in procs:
        p.wait()
    elapsed = time.perf_counter() - started
    with ledger.open_ledger(home, readonly=True) as led:
        judged = sum(1 for _ in led.read(types=["case.judged"]))
        if judged != cases:
            raise SystemExit(f"{workers} worker(s) judged {judged} of {cases} cases")
        return judging_rate(led), cases / elapsed


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements and print each figure with its baseline and target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("EVALLEDGER_TEST_PG"))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--appenders", type=int, default=8)
    parser.add_argument("--appender-events", type=int, default=500)
    parser.add_argument("--cases", type=int, default=480)
    parser.add_argument("--concurrency", type=int, default=1, help="each worker's judge calls in flight (figure 3)")
    args = parser.parse_args(argv)
    if not args.url:
        print("no server: set EVALLEDGER_TEST_PG (eval \"$(bash .ci/start-postgres)\") or give --url", file=sys.stderr)
        return 2
    ok = True
    print(f"1. appends, {args.events:,} events (Ledger.append vs raw psycopg executemany of the same rows)")
    for batch in (1, 100):
        total = min(args.events, 2_000) if batch == 1 else args.events
        ours, raw = bench_appends(args.url, total, batch)
        ratio = ours / raw
        target = f"target >= {BATCH_TARGET}x" if batch > 1 else "for information"
        met = batch == 1 or ratio >= BATCH_TARGET
        ok &= met
        print(f"   batches of {batch:>3}: recorder {ours:>9,.0f} ev/s, raw {raw:>9,.0f} ev/s, "
              f"ratio {ratio:.2f}x ({target}{'' if met else ': MISSED'})")
    rate, chain_ok = bench_sequencer(args.url, args.appenders, args.appender_events)
    ok &= chain_ok
    print(f"2. sequencer ceiling, {args.appenders} appenders x {args.appender_events} single-event "
          f"transactions: {rate:,.0f} ev/s (chain {'valid' if chain_ok else 'BROKEN'})")
    print(f"3. workers, {args.cases} cases, 50 ms judge, concurrency {args.concurrency} each")
    with StandInThread(StandIn(delay=0.05)) as server, tempfile.TemporaryDirectory() as tmp:
        rates = {n: bench_workers(args.url, n, args.cases, server.base_url, Path(tmp), args.concurrency)
                 for n in (1, 2, 4)}
        server.max_in_flight = 0
        shared, _ = bench_workers(args.url, 4, args.cases, server.base_url, Path(tmp), 4,
                                  "--shared-concurrency", str(SHARED_BUDGET))
        most = server.max_in_flight
    for n, (judging, wall) in rates.items():
        print(f"   {n} worker(s): {judging:,.1f} cases/s while judging ({judging / rates[1][0]:.2f}x 1 worker); "
              f"{wall:,.1f} cases/s by the wall clock with start-up ({wall / rates[1][1]:.2f}x)")
    ratio = rates[4][0] / rates[1][0]
    met = ratio >= WORKERS_TARGET
    print(f"   4 workers vs 1 while judging: {ratio:.2f}x (target >= {WORKERS_TARGET}x"
          f"{'' if met else f': MISSED on {os.cpu_count()} cores'})")
    ok &= met
    met = most <= SHARED_BUDGET
    print(f"4. shared judge budget of {SHARED_BUDGET} calls, 4 workers at concurrency 4 each: {shared:,.1f} cases/s "
          f"while judging; most requests at once {most} (target <= {SHARED_BUDGET}: {'met' if met else 'MISSED'})")
    ok &= met
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
