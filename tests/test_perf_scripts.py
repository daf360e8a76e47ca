"""Every script in benchmarks/perf runs end to end at a CI size and prints its figures.

Timings are not asserted (the machine is shared; tiny sizes are dominated by fixed costs): the
scripts compare against their own baselines and exit 1 on a missed target. What is checked is
that each still runs, prints each figure with its target, and does not crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "benchmarks" / "perf"

CASES = {
    "cli_startup_bench.py": (["--rounds", "2"], ["baseline python -c pass", "evalledger --help", "ratio",
                                                "heavy modules imported by --help: 0"]),
    "fuzzy_bench.py": (["--small"], ["speed-up vs difflib", "ExactMatch", "NumericTolerance", "checks/s"]),
    "judge_bench.py": (["--calls", "60", "--concurrency", "8", "--latency", "0.01"],
                       ["ideal", "ratio", "recording", "target < 1.0 ms", "answered 429 and retried",
                        "lowest adaptive concurrency"]),
    "replay_bench.py": (["40"], ["judged in the run", "replay/run", "copying the inputs"]),
    "run_bench.py": (["40"], ["ms a case", "per-case CPU at 40 vs 4 cases", "target <= 1.25", "a case)"]),
    "memory_bench.py": (["20", "60", "--commands", "ingest,report"],   # report folds without a run
                        ["peak RSS, MB: 20 cases -> 60 cases", "ingest", "report", "target < 300 MB", "ratio"]),
    "merkle_bench.py": (["3000"], ["merkle root", "chain verify", "append keeping the tree", "inclusion proof"]),
    "schema_bench.py": (["--repeat", "5"], ["request shapes", "built", "cached", "target < 0.2 ms"]),
    "ledger_bench.py": (["1000"], ["append", "1 event a transaction", "read", "peak RSS", "verify"]),
    "view_bench.py": (["--cases", "300", "--samples", "20"],
                      ["case-table page (50 rows)", "case page", "over HTTP", "server peak RSS", "target <= 3x"]),
    "whatif_bench.py": (["--cases", "30", "--points", "2"],
                        ["baseline: one report rebuild", "ratio sweep / rebuild", "target <= 2.0x",
                         "with no read models yet", "same curves: True",
                         "requests sent to the server: 0 (target 0: met)"]),
    "watch_bench.py": (["--ci", "--trials", "2", "--burst", "5", "--idle-seconds", "1"],
                       ["latency rename -> last case.judged", "burst", "idle daemon CPU"]),
}


if os.environ.get("EVALLEDGER_TEST_PG"):   # needs a server (eval "$(bash .ci/start-postgres)")
    CASES["postgres_bench.py"] = (["--events", "300", "--appender-events", "20", "--cases", "8"],
                                  ["batches of 100", "ratio", "sequencer ceiling", "ev/s", "4 workers vs 1",
                                   "shared judge budget of 8", "(target <= 8: met)"])


@pytest.mark.parametrize("script", sorted(CASES))
def test_perf_script_runs_and_prints_its_figures(script):
    args, figures = CASES[script]
    done = subprocess.run([sys.executable, str(PERF / script), *args], capture_output=True, text=True,
                          timeout=240, cwd=PERF.parents[1])
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for figure in figures:
        assert figure in done.stdout, (figure, done.stdout)


def test_ledger_bench_appends_real_events_at_small_sizes():
    # At a CI size the batched rounds once ran on empty slices and printed billions of events a
    # second; every figure must come from events actually appended.
    done = subprocess.run([sys.executable, str(PERF / "ledger_bench.py"), "1000"], capture_output=True,
                          text=True, timeout=240, cwd=PERF.parents[1])
    line = next(l for l in done.stdout.splitlines() if "append, batches of 1,000 (home" in l)
    rate = float(line.split("ev/s")[0].split()[-1].replace(",", ""))
    assert rate < 10_000_000, line


def test_soak_script_runs_at_a_tiny_size_and_finds_nothing_lost_or_stuck():
    # Every figure, and exit 0: each file ingested once, each case judged once, no case stuck,
    # the chain verifies, after a few random SIGTERMs and SIGKILLs.
    done = subprocess.run([sys.executable, str(PERF / "soak.py"), "--seconds", "6", "--seed", "7"],
                          capture_output=True, text=True, timeout=240, cwd=PERF.parents[1])
    assert "Traceback" not in done.stderr, done.stderr
    for figure in ("files dropped", "ingested exactly once", "cases judged exactly once", "stuck cases: 0",
                   "verify: ok", "after restart"):
        assert figure in done.stdout, (figure, done.stdout)
    assert done.returncode == 0, done.stdout
