"""Judge port throughput and recording overhead against the stand-in server.

    python benchmarks/perf/judge_bench.py [--calls 2000] [--concurrency 16] [--latency 0.05] [--callers N]
                                          [--rate-limit-every 10] [--retry-after S]

The stand-in runs in its own process (127.0.0.1, every answer delayed by --latency, every
--rate-limit-every-th request answered 429 at once with a Retry-After of --retry-after, a
tenth by default, as a provider's rate limiter answers); the openai backend makes
--calls distinct calls through the judge port at --concurrency, each attempt recorded as a
judge.called event in a fresh SQLite home. The calls are made by --callers coroutines one after
another (twice the concurrency by default), as the dispatcher's cases do. Printed figures:

- wall time of the recorded run against the ideal (calls x latency / concurrency, as if no
  request were refused); target: at most 1.3 x the ideal, 429 retries and backoff included
  (the adaptive concurrency must not collapse on a steady tenth of 429s);
- the same calls unrecorded (``record=False``), the baseline measured in the same run;
- recording cost per call: the time spent appending judge.called events, per event (they are
  appended off the event loop by a recording thread, calls that end together in one commit);
  target: under 1 ms a call.

Exits non-zero when a target is missed. Use a small --calls for CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from evalledger import ledger
from evalledger.stages.judge import JudgeSettings, make_judge, recording

WALL_TARGET = 1.3
RECORD_TARGET_MS = 1.0


def start_stand_in(latency: float, rate_limit_every: int, retry_after: float | None,
                   forget_requests: bool = False) -> tuple[subprocess.Popen, str]:
    """The stand-in in its own process; returns it and its base URL. ``forget_requests``: it keeps
    no request bodies (a server answering thousands of calls stays as fast as it began)."""
    command = [sys.executable, "-m", "evalledger.testing.stand_in", "--port", "0", "--delay", str(latency)]
    if forget_requests:
        command.append("--forget-requests")
    if rate_limit_every:
        command += ["--rate-limit-every", str(rate_limit_every)]
    if retry_after is not None:
        command += ["--retry-after", str(retry_after)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
    if not match:
        proc.kill()
        raise SystemExit(f"the stand-in did not start: {line!r}")
    return proc, match.group(1)


def request(i: int, tag: str) -> dict:
    """The i-th synthetic check_facts request (tagged so runs do not share answers)."""
    return {"context_input": f"Revenue rose {i % 97}% in {tag} {i}.", "model_output": f"Revenue rose {i % 97}%.",
            "facts": [f"Revenue rose {i % 97}% ({tag} {i})."]}


async def run_calls(home: Path, url: str, calls: int, concurrency: int, record: bool, tag: str,
                    callers: int, lowest: list[int] | None = None) -> float:
    """Wall seconds for ``calls`` distinct check_facts calls through one judge port.

    ``callers`` coroutines take the calls one after another, as the dispatcher's cases in flight
    do; with more callers than the port's concurrency, the port's own limit is what holds them.
    """
    settings = JudgeSettings(backend="openai", model="bench", base_url=url, concurrency=concurrency,
                             timeout_s=30, record=record, max_attempts=8)
    todo = iter(range(calls))

    async def caller(judge) -> None:
        for i in todo:
            await judge.call("check_facts", request(i, tag), case_id=f"bench{i // 10}")

    with ledger.open_ledger(home) as led:
        judge = make_judge(settings, led)
        start = time.perf_counter()
        await asyncio.gather(*(caller(judge) for _ in range(callers)))
        wall = time.perf_counter() - start
        limit = judge.backend.limit
        if lowest is not None and limit is not None:
            lowest.append(min([concurrency] + [after for _, after in limit.changes]))
        await judge.aclose()
    return wall


def timed_recording():
    """Time every append of judge.called events; returns (seconds, events) lists the timings go to."""
    durations: list[float] = []
    counts: list[int] = []
    original = recording.record_events

    def timed(led, index, events):
        start = time.perf_counter()
        try:
            return original(led, index, events)
        finally:
            durations.append(time.perf_counter() - start)
            counts.append(len(events))

    import evalledger.stages.judge.group_commit as group_commit
    group_commit.record_events = timed
    return durations, counts


def main(argv: list[str] | None = None) -> int:
    """Run the judge benchmark and print its ratios; 0 when the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--callers", type=int, default=None,
                        help="coroutines making the calls (default: twice the concurrency)")
    parser.add_argument("--rate-limit-every", type=int, default=10, metavar="N",
                        help="the server answers every Nth request 429 (default 10; 0: never)")
    parser.add_argument("--retry-after", type=float, default=0.1, metavar="S",
                        help="the Retry-After of those 429s, in seconds (default 0.1; -1: none, the "
                             "backoff decides)")
    args = parser.parse_args(argv)
    callers = args.callers or 2 * args.concurrency
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    retry_after = None if args.retry_after < 0 else args.retry_after
    proc, url = start_stand_in(args.latency, args.rate_limit_every, retry_after)
    lowest: list[int] = []
    try:
        durations, counts = timed_recording()
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(run_calls(Path(tmp) / "warmup", url, min(64, args.calls), args.concurrency, True, "warm",
                                  callers))
            durations.clear()
            counts.clear()
            baseline = asyncio.run(run_calls(Path(tmp) / "base", url, args.calls, args.concurrency, False, "base",
                                             callers))
            wall = asyncio.run(run_calls(Path(tmp) / "home", url, args.calls, args.concurrency, True, "run",
                                         callers, lowest))
            with ledger.open_ledger(Path(tmp) / "home") as led:
                attempts = [e.data for e in led.read(types=["judge.called"])]
            recorded = sum(1 for a in attempts if a.get("error") is None)
            limited = sum(1 for a in attempts if a.get("http_status") == 429)
    finally:
        proc.terminate()
        proc.wait(10)
    ideal = args.calls * args.latency / args.concurrency
    per_call_ms = 1000 * sum(durations) / max(1, sum(counts))
    batch = sum(counts) / max(1, len(counts))
    print(f"judge port, {args.calls} calls at concurrency {args.concurrency} ({callers} callers), "
          f"{args.latency * 1000:.0f} ms per reply, every {args.rate_limit_every or 'no'}th request 429")
    print(f"  recorded run     : {wall:7.3f} s   ideal {ideal:.3f} s   ratio {wall / ideal:.3f}   "
          f"target <= {WALL_TARGET}")
    print(f"  unrecorded run   : {baseline:7.3f} s   ratio {baseline / ideal:.3f}   (baseline, same run)")
    print(f"  recording        : {per_call_ms:7.3f} ms a call ({len(attempts)} events, {batch:.1f} a commit)   "
          f"target < {RECORD_TARGET_MS} ms   "
          f"wall cost vs baseline {(wall - baseline) * 1000 / args.calls:+.3f} ms a call")
    print(f"  429s             : {limited} answered 429 and retried; lowest adaptive concurrency "
          f"{lowest[0] if lowest else args.concurrency} of {args.concurrency}")
    failed = []
    if wall > WALL_TARGET * ideal:
        failed.append(f"wall time {wall:.3f} s is over {WALL_TARGET} x the ideal {ideal:.3f} s")
    if per_call_ms >= RECORD_TARGET_MS:
        failed.append(f"recording costs {per_call_ms:.3f} ms a call")
    if recorded != args.calls:
        failed.append(f"{recorded} successes recorded for {args.calls} calls")
    for reason in failed:
        print(f"MISSED: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
