"""Does ``--concurrency N`` keep N judge calls in flight? A whole run against a 50 ms server.

    python benchmarks/perf/concurrency_bench.py [--calls 2000] [--latency 0.05] [--levels 64,16,1]

The stand-in chat-completions server runs in its own process (127.0.0.1, every reply delayed by
--latency, keeping no request bodies: one holding every prompt grew slower round after round). Audit cases (three judge calls each: decompose, then the fact and the logic check
at once) are ingested into a fresh home and judged by ``run_until_idle`` with the openai
backend at each concurrency of --levels. At the first (highest) level the run makes --calls
calls; at lower levels the calls are scaled down with the concurrency, so every level has the
same ideal wall time. Printed per level:

- the run's wall time against the ideal (calls x latency / concurrency): the ratio ideal / wall,
  target at least 0.9 at the highest level;
- the run's CPU a call: to keep N calls of L seconds busy, the process may spend at most L / N
  a call (0.78 ms at 64 x 50 ms), whatever else the machine runs;
- the most requests the server answered at once (the calls really in flight; the stand-in
  gives it at ``GET /stand-in/stats``);
- the baseline measured in the same run: the same number of bare aiohttp POSTs to the same
  server at the same concurrency, no evalledger at all (what this machine allows now), and the
  run's ratio to it (run / bare: how close the run comes to what the machine allowed then);
- the stand-in's own CPU a request, for the run and for the bare POSTs (read from /proc: is the
  server process, one plain aiohttp process, keeping up or starved?);
- at the highest level, the run with cases in flight capped at 16 (as before ``--concurrency``
  set the number of cases), to show what the change buys.

``--rounds R`` measures the highest level R times (fresh cases each time) and judges the target
on the median ratio, as the figures move a lot on a loaded machine.

Exits 1 when the target is missed at the highest level. Use a small --calls for CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from judge_bench import start_stand_in

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path

TARGET = 0.9
CALLS_PER_CASE = 3   # an audit case: decompose, then check_facts and check_logic together


def audit_rows(cases: int, tag: str) -> list[dict]:
    """``cases`` distinct audit cases (tagged so the levels do not share recorded answers)."""
    return [{"id": i, "tag": "clean", "difficulty": "easy", "description": f"case {i}", "context_input": f"Revenue rose {i % 97}% in quarter {i} ({tag}).",
             "model_output": f"Revenue rose {i % 97}% in quarter {i}.", "expected_credit_score": 5}
            for i in range(cases)]


def home_with_cases(folder: Path, cases: int, tag: str) -> Path:
    """A new home in ``folder`` with ``cases`` audit cases ingested."""
    source = folder / f"{tag}.audit.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in audit_rows(cases, tag)))
    home = folder / tag
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        result = ingest_path(led, source)
    if result.status != "accepted":
        raise SystemExit(f"the audit file was not accepted: {result}")
    return home


def timed_run(home: Path, url: str, concurrency: int,
              cases_in_flight: int | None = None) -> tuple[float, int, float]:
    """(wall seconds, judge calls made, CPU seconds of this process) of one run of ``home``."""
    settings = RunSettings(judge_backend="openai", judge_model="bench", max_cases_in_flight=cases_in_flight,
                           judge_options={"base_url": url, "concurrency": concurrency, "timeout_s": 30})
    with ledger.open_ledger(home) as led:
        start, cpu = time.perf_counter(), time.process_time()
        summary = run_until_idle(led, settings)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    if summary.failed or summary.stopped:
        raise SystemExit(f"the run did not judge every case: {summary}")
    return wall, summary.model_calls, cpu


async def bare_posts(url: str, calls: int, concurrency: int) -> float:
    """Wall seconds for ``calls`` bare chat-completion POSTs at ``concurrency`` (the baseline)."""
    body = {"model": "bench", "messages": [{"role": "user", "content": "baseline"}]}
    todo = iter(range(calls))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def caller() -> None:
            for _ in todo:
                async with session.post(f"{url}/chat/completions", json=body) as response:
                    await response.read()

        start = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        return time.perf_counter() - start


def server_peak(url: str, reset: bool = False) -> int:
    """The most requests the stand-in (another process) answered at once since its last reset."""
    async def ask() -> int:
        async with aiohttp.ClientSession() as session:
            base = url.rsplit("/v1", 1)[0]
            async with session.get(f"{base}/stand-in/stats", params={"reset": "1"} if reset else {}) as response:
                return int((await response.json())["max_in_flight"])
    return asyncio.run(ask())


def level_line(concurrency: int, calls: int, latency: float, wall: float, baseline: float) -> tuple[str, float]:
    """The printed line of one level and its ratio ideal / wall."""
    ideal = calls * latency / concurrency
    ratio = ideal / wall
    return (f"concurrency {concurrency:>3}: {calls} calls in {wall:.2f} s, ideal {ideal:.2f} s, ratio {ratio:.2f} "
            f"of ideal; bare aiohttp POSTs {ideal / baseline:.2f} of ideal (baseline, same run); "
            f"run / bare {baseline / wall:.2f}"), ratio


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used so far; None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def per_request_ms(before: float | None, after: float | None, requests: int) -> str:
    """The server's CPU a request between two readings of ``process_cpu``, as printed."""
    if before is None or after is None or not requests:
        return "n/a"
    return f"{1000 * (after - before) / requests:.2f} ms"


def measure_level(folder: Path, url: str, proc: subprocess.Popen, concurrency: int, cases: int, tag: str,
                  latency: float) -> float:
    """Run one level (``cases`` new audit cases) and its bare baseline; print them; the ratio ideal / wall."""
    home = home_with_cases(folder, cases, tag)
    server_peak(url, reset=True)
    served = process_cpu(proc.pid)
    wall, calls, cpu = timed_run(home, url, concurrency)
    peak = server_peak(url, reset=True)
    served_run = process_cpu(proc.pid)
    baseline = asyncio.run(bare_posts(url, calls, concurrency))
    served_bare = process_cpu(proc.pid)
    line, ratio = level_line(concurrency, calls, latency, wall, baseline)
    print(f"{line}; requests in flight at the server at most {peak}", flush=True)
    print(f"  run CPU {1000 * cpu / calls:.2f} ms a call (to keep up it must stay under "
          f"latency / concurrency = {1000 * latency / concurrency:.2f} ms); the stand-in's CPU a request: "
          f"{per_request_ms(served, served_run, calls)} in the run, "
          f"{per_request_ms(served_run, served_bare, calls)} for the bare POSTs", flush=True)
    return ratio


def main(argv: list[str] | None = None) -> int:
    """Run the concurrency benchmark and print its ratios; 0 when the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--levels", default="64,16,1", help="concurrencies, highest first (default 64,16,1)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of the highest level; the target is judged "
                                                             "on their median ratio (default 1)")
    args = parser.parse_args(argv)
    levels = sorted({int(x) for x in args.levels.split(",")}, reverse=True)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    proc, url = start_stand_in(args.latency, 0, None, forget_requests=True)
    ratios: dict[int, float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            timed_run(home_with_cases(folder, 8, "warm"), url, levels[0])   # connections, imports
            for concurrency in levels:
                cases = max(1, math.ceil(args.calls * concurrency / levels[0] / CALLS_PER_CASE))
                rounds = max(1, args.rounds) if concurrency == levels[0] else 1
                measured = [measure_level(folder, url, proc, concurrency, cases, f"c{concurrency}r{r}", args.latency)
                            for r in range(rounds)]
                ratios[concurrency] = statistics.median(measured)
                if rounds > 1:
                    print(f"concurrency {concurrency}: {rounds} rounds, ratio median {ratios[concurrency]:.2f} "
                          f"(least {min(measured):.2f}, most {max(measured):.2f})", flush=True)
            top = levels[0]
            cases = max(1, math.ceil(args.calls / CALLS_PER_CASE))
            home = home_with_cases(folder, cases, "capped")
            wall, calls, _ = timed_run(home, url, top, cases_in_flight=16)
            ideal = calls * args.latency / top
            print(f"concurrency {top} with cases in flight capped at 16 (as before): ratio {ideal / wall:.2f} of ideal")
    finally:
        proc.terminate()
        proc.wait(10)
    met = ratios[levels[0]] >= TARGET
    print(f"target: at least {TARGET} of ideal at concurrency {levels[0]}: "
          f"{ratios[levels[0]]:.2f} {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
