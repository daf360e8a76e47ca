"""Performance of ``evalledger view`` on a large home: table pages, case pages, server memory.

Run:  python benchmarks/perf/view_bench.py                 (100,000 cases)
      python benchmarks/perf/view_bench.py --cases 2000    (CI size)

A fresh home is filled through the ledger API with synthetic template cases (opened with a
question and a response, one judge call, one excerpt, one field check, a verdict; every tenth
case failed) and folded (``projections.update``). Then ``evalledger view`` runs as a subprocess
and, in the same run:

1. Case-table page (50 rows, pages sampled over the whole range), fetched whole over HTTP on a
   kept-alive connection (routing, the data, rendering, the socket), against the raw SQLite
   queries that fetch the same rows from the read models (the count and one page of
   ``proj_cases`` with its states). Target: at most 3x.
2. Case page over HTTP against the raw queries that fetch the same rows (the case's events by
   stream and its state). Target: at most 3x.
3. For information: the same pages from the viewer's data layer alone (``HomeView.cases``,
   ``HomeView.case_document``, no HTTP), and an empty aiohttp answer over the same kind of
   connection (the floor any page pays: two Python processes exchanging a request and a reply),
   fetched between the case pages so that both meet the same load; and what a case page costs
   beyond that floor, against the raw queries.
4. Peak RSS of the server (VmHWM) after paging through every table page. Target: under 200 MB.

The client is a minimal HTTP/1.1 reader on a raw socket (send the request, read the headers and
Content-Length bytes), so what is timed is the server, not ``http.client``'s header parsing.
Medians are compared; the baselines run in this process, interleaved with what they are compared to.
The measurements are taken in ``--runs`` rounds (3 by default); each figure is the median over all
rounds, and the ratio of each round is printed beside it, so a round disturbed by other processes
on the machine shows as such.
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalledger import ledger, projections
from evalledger.testing import synthetic as syn

RATIO_TARGET = 3.0
RSS_TARGET_MB = 200
PAGE_SIZE = 50


def fill(home: Path, cases: int) -> list[str]:
    """Append ``cases`` synthetic template cases and fold them; returns their ids."""
    ids = []
    with ledger.open_ledger(home) as led:
        led.append([syn.benchmark("bench", "template", name="view-bench", questions=cases)])
        batch: list = []
        for i in range(cases):
            response = f"Case {i}: the answer is {i % 97} units, measured twice. " * 3
            case_id, first = syn.opened("bench", "template", f"q{i:06d}", f"model-{i % 3}",
                                        {"id": f"q{i:06d}", "question": f"What is the value of item {i}?"},
                                        response=response)
            verdict = "fail" if i % 10 == 0 else "pass"
            batch += [first, syn.judge_call(case_id, "parse"),
                      syn.excerpt(case_id, "value", f"the answer is {i % 97} units", 0.98),
                      syn.field(case_id, "value", verdict == "pass", extracted=i % 97, expected=i % 97),
                      syn.judged(case_id, verdict)]
            ids.append(case_id)
            if len(batch) >= 5000:
                led.append(batch)
                batch = []
        if batch:
            led.append(batch)
        projections.update(led)
    return ids


def start_viewer(home: Path) -> tuple[subprocess.Popen, int, float]:
    """The viewer as a subprocess; its port and how long it took to start (index build included)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "view", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not found:
        proc.kill()
        raise SystemExit(f"the viewer did not start: {line} {proc.stderr.read()}")
    return proc, int(found.group(1)), time.perf_counter() - started


class Client:
    """A kept-alive HTTP/1.1 connection that sends GETs and reads each whole answer."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"127.0.0.1:{port}"
        self.buffer = b""

    def get(self, path: str) -> tuple[int, bytes]:
        """(status, body) of ``GET path``."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(head[9:12]), body

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise SystemExit("the viewer closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        """Close the connection."""
        self.sock.close()


def timed_get(client: Client, path: str) -> float:
    """Seconds for one GET (body read whole); a non-200 answer stops the benchmark."""
    started = time.perf_counter()
    status, body = client.get(path)
    elapsed = time.perf_counter() - started
    if status != 200:
        raise SystemExit(f"GET {path}: {status} {body[:200]!r}")
    return elapsed


FLOOR_APP = ("import sys\nfrom aiohttp import web\nasync def h(r): return web.Response(text='')\n"
             "app = web.Application(); app.router.add_get('/', h)\n"
             "web.run_app(app, host='127.0.0.1', port=int(sys.argv[1]), print=None, access_log=None)\n")


def start_floor() -> tuple[subprocess.Popen, Client]:
    """An aiohttp server answering ``GET /`` with an empty reply, in another process, and a
    kept-alive connection to it: the floor any page pays."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", FLOOR_APP, str(port)])
    deadline = time.monotonic() + 30
    while True:
        try:
            client = Client(port)
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("the floor server did not start") from None
            time.sleep(0.05)
    timed_get(client, "/")
    return proc, client


def timed_raw(db: sqlite3.Connection, queries: list[tuple[str, tuple]]) -> float:
    """Seconds to run these queries and fetch every row."""
    started = time.perf_counter()
    for sql, params in queries:
        db.execute(sql, params).fetchall()
    return time.perf_counter() - started


def peak_rss_mb(pid: int) -> float:
    """The peak resident set size of process ``pid`` (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    """Build the home, measure, print each figure with its target; exit 1 on a missed target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200, help="pages and cases timed (each, per round)")
    parser.add_argument("--runs", type=int, default=3, help="rounds of measurements")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="view-bench-") as tmp:
        home = ledger.init_home(Path(tmp) / "home")
        started = time.perf_counter()
        ids = fill(home, args.cases)
        print(f"home of {args.cases:,} cases built and folded in {time.perf_counter() - started:.1f} s")
        proc, port, startup = start_viewer(home)
        print(f"viewer started in {startup:.1f} s (case index built)")
        try:
            return measure(home, port, proc.pid, ids, args.samples, rng, args.runs)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def timed(fn) -> float:
    """Seconds for one call of ``fn``."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def compare(label: str, pairs: dict[str, list[float]], target: float | None, runs: int = 1) -> bool:
    """Print the medians and their ratio (and each of ``runs`` equal rounds' ratio); True when
    within ``target`` (or no target)."""
    (view_label, view), (raw_label, raw) = pairs.items()
    size = len(view) // runs
    rounds = [statistics.median(view[i * size:(i + 1) * size]) / statistics.median(raw[i * size:(i + 1) * size])
              for i in range(runs)]
    ratio = statistics.median(view) / statistics.median(raw)
    ok = target is None or ratio <= target
    goal = f"target <= {target:.0f}x" if target else "for information"
    # The fastest tenth of each side: what the page costs when no other process takes the CPU
    # (on a loaded machine the median mostly measures how long the server waits to be scheduled).
    quiet = tenth(view) / tenth(raw)
    print(f"{label}: {view_label} {statistics.median(view) * 1000:.3f} ms, {raw_label} "
          f"{statistics.median(raw) * 1000:.3f} ms, ratio {ratio:.2f}x ({goal}){'' if ok else '  MISSED'}; "
          f"fastest tenth {quiet:.2f}x; rounds {', '.join(f'{r:.2f}x' for r in rounds)}")
    return ok


def tenth(times: list[float]) -> float:
    """The 10th percentile of ``times``."""
    return sorted(times)[len(times) // 10]


def measure(home: Path, port: int, pid: int, ids: list[str], samples: int, rng: random.Random,
            runs: int = 1) -> int:
    """The measurements; returns the exit status."""
    client = Client(port)
    floor_proc, floor_client = start_floor()
    try:
        return _measure(home, port, pid, ids, samples, rng, runs, client, floor_client)
    finally:
        floor_client.close()
        floor_proc.terminate()
        floor_proc.wait(timeout=10)


def _measure(home: Path, port: int, pid: int, ids: list[str], samples: int, rng: random.Random, runs: int,
             client: Client, floor_client: Client) -> int:
    """The measurements, the HTTP floor interleaved with the case pages (same load, same moments)."""
    from evalledger.cli.viewer.state import HomeView
    db = sqlite3.connect(home / "ledger.db")
    view = HomeView(home)
    pages = -(-len(ids) // PAGE_SIZE)
    timed_get(client, "/cases")                                 # warm both sides once
    table = {"http page": [], "viewer": [], "raw SQLite": []}
    for page in [rng.randint(1, pages) for _ in range(samples * runs)]:
        table["viewer"].append(timed(lambda page=page: view.cases({}, "case", False, page)))
        table["http page"].append(timed_get(client, f"/cases?page={page}"))
        table["raw SQLite"].append(timed_raw(db, [
            ("SELECT COUNT(*) FROM proj_cases", ()),
            ("SELECT case_id, benchmark, model, kind, question_id, status, verdict, state FROM proj_cases "
             "ORDER BY case_id LIMIT ? OFFSET ?", (PAGE_SIZE, (page - 1) * PAGE_SIZE))]))
    case: dict[str, list[float]] = {"http page": [], "viewer": [], "raw SQLite": [], "floor": []}
    for case_id in [rng.choice(ids) for _ in range(samples * runs)]:
        case["viewer"].append(timed(lambda case_id=case_id: view.case_document(case_id)))
        case["http page"].append(timed_get(client, f"/case/{case_id}"))
        case["floor"].append(timed_get(floor_client, "/"))
        case["raw SQLite"].append(timed_raw(db, [
            ("SELECT seq, id, stream, version, type, schema, data, meta, prev_hash, hash FROM events "
             "WHERE stream = ? ORDER BY version", (f"case:{case_id}",)),
            ("SELECT state FROM proj_cases WHERE case_id = ?", (case_id,))]))
    view.close()
    ok = True
    for label, figures in (("case-table page (50 rows)", table), ("case page", case)):
        ok &= compare(f"{label} over HTTP", {"whole page": figures["http page"], "raw SQLite": figures["raw SQLite"]},
                      RATIO_TARGET, runs)
        compare(f"{label}, data layer only", {"viewer": figures["viewer"], "raw SQLite": figures["raw SQLite"]},
                None, runs)
    compare("empty aiohttp answer (the HTTP floor)", {"GET": case["floor"], "raw case SQLite": case["raw SQLite"]},
            None, runs)
    beyond = statistics.median(case["http page"]) - statistics.median(case["floor"])
    print(f"case page over HTTP beyond the floor: {beyond * 1000:.3f} ms, "
          f"{beyond / statistics.median(case['raw SQLite']):.2f}x the raw queries (for information)")
    started = time.perf_counter()
    for page in range(1, pages + 1):
        timed_get(client, f"/cases?page={page}")
    print(f"paged through all {pages:,} table pages over HTTP in {time.perf_counter() - started:.1f} s")
    client.close()
    rss = peak_rss_mb(pid)
    ok &= rss < RSS_TARGET_MB
    print(f"server peak RSS {rss:.0f} MB (target < {RSS_TARGET_MB} MB){'' if rss < RSS_TARGET_MB else '  MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
