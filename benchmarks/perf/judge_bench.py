"""Judge port throughput and recording overhead against the stand-in server.

    python benchmarks/perf/judge_bench.py [--calls 2000] [--concurrency 16] [--latency 0.05] [--callers N]

The stand-in runs in its own process (127.0.0.1, every reply delayed by --latency); the
openai backend makes --calls distinct calls through the judge port at --concurrency, each
recorded as a judge.called event in a fresh SQLite home. The calls are made by --callers
coroutines one after another (twice the concurrency by default), as the dispatcher's cases do. Printed figures:

- wall time of the recorded run against the ideal (calls x latency / concurrency);
  target: at most 1.25 x the ideal;
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

WALL_TARGET = 1.25
RECORD_TARGET_MS = 1.0


def start_stand_in(latency: float) -> tuple[subprocess.Popen, str]:
    """The stand-in in its own process; returns it and its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "evalledger.testing.stand_in", "--port", "0", "--delay", str(latency)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
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
                    callers: int) -> float:
    """Wall seconds for ``calls`` distinct check_facts calls through one judge port.

    ``callers`` coroutines take the calls one after another, as the dispatcher's cases in flight
    do; with more callers than the port's concurrency, the port's own limit is what holds them.
    """
    settings = JudgeSettings(backend="openai", model="bench", base_url=url, concurrency=concurrency,
                             timeout_s=30, record=record)
    todo = iter(range(calls))

    async def caller(judge) -> None:
        for i in todo:
            await judge.call("check_facts", request(i, tag), case_id=f"bench{i // 10}")

    with ledger.open_ledger(home) as led:
        judge = make_judge(settings, led)
        start = time.perf_counter()
        await asyncio.gather(*(caller(judge) for _ in range(callers)))
        wall = time.perf_counter() - start
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
    args = parser.parse_args(argv)
    callers = args.callers or 2 * args.concurrency
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    proc, url = start_stand_in(args.latency)
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
                                         callers))
            with ledger.open_ledger(Path(tmp) / "home") as led:
                recorded = sum(1 for _ in led.read(types=["judge.called"]))
    finally:
        proc.terminate()
        proc.wait(10)
    ideal = args.calls * args.latency / args.concurrency
    per_call_ms = 1000 * sum(durations) / max(1, sum(counts))
    batch = sum(counts) / max(1, len(counts))
    print(f"judge port, {args.calls} calls at concurrency {args.concurrency} ({callers} callers), "
          f"{args.latency * 1000:.0f} ms per reply")
    print(f"  recorded run     : {wall:7.3f} s   ideal {ideal:.3f} s   ratio {wall / ideal:.3f}   "
          f"target <= {WALL_TARGET}")
    print(f"  unrecorded run   : {baseline:7.3f} s   ratio {baseline / ideal:.3f}   (baseline, same run)")
    print(f"  recording        : {per_call_ms:7.3f} ms a call ({recorded} events, {batch:.1f} a commit)   "
          f"target < {RECORD_TARGET_MS} ms   "
          f"wall cost vs baseline {(wall - baseline) * 1000 / args.calls:+.3f} ms a call")
    failed = []
    if wall > WALL_TARGET * ideal:
        failed.append(f"wall time {wall:.3f} s is over {WALL_TARGET} x the ideal {ideal:.3f} s")
    if per_call_ms >= RECORD_TARGET_MS:
        failed.append(f"recording costs {per_call_ms:.3f} ms a call")
    if recorded != args.calls:
        failed.append(f"{recorded} events recorded for {args.calls} calls")
    for reason in failed:
        print(f"MISSED: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
