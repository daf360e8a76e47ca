"""Does a run's cost per case stay flat as the scan grows? CPU seconds per case at N/10 and N.

Run:  python benchmarks/perf/run_bench.py [CASES]     (default 10000)

The replay benchmark's arithmetic set (two fields a question, deep judgment: three judge calls
a case) is ingested and judged by the offline judge (``run_until_idle``) at CASES / 10 and at
CASES cases, each in a new home. Printed: CPU per case at both sizes and their ratio (target
<= 1.25: flat; a watermark that takes min() over the open cases for every case grows with N),
and the transactions the judging took per case (each case's judge calls and outputs commit
together, and cases finishing together share a transaction). Exit 0 when flat, 1 otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from replay_bench import judged_home

from evalledger import ledger

TARGET = 1.25


def measure(cases: int, folder: Path) -> tuple[int, float, int]:
    """(cases judged, run CPU seconds, transactions holding judging events) for a new home."""
    home, summary, cpu = judged_home(cases, folder)
    with ledger.open_ledger(home, readonly=True) as led:
        instants = {e.meta.get("recorded_at") for e in led.read(types=["judge.called", "case.judged"])}
    return summary.judged, cpu, len(instants)


def main(argv: list[str]) -> int:
    """Print run CPU per case at CASES / 10 and CASES, their ratio, and transactions per case."""
    cases = int(argv[0]) if argv else 10_000
    small = max(2, cases // 10)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "small").mkdir()
        (Path(tmp) / "large").mkdir()
        small_judged, small_cpu, _ = measure(small, Path(tmp) / "small")
        judged, cpu, commits = measure(cases, Path(tmp) / "large")
    per_small, per_large = small_cpu / small_judged, cpu / judged
    ratio = per_large / per_small
    print(f"run {small_judged} cases: {small_cpu:.2f} s CPU, {per_small * 1000:.2f} ms a case")
    print(f"run {judged} cases: {cpu:.2f} s CPU, {per_large * 1000:.2f} ms a case")
    print(f"per-case CPU at {judged} vs {small_judged} cases: ratio {ratio:.2f} (target <= {TARGET}: flat) "
          f"{'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"transactions holding judge calls and verdicts: {commits} for {judged} cases "
          f"({commits / judged:.2f} a case)")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
