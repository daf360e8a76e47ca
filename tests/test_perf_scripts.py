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
    "concurrency_bench.py": (["--calls", "48", "--latency", "0.01", "--levels", "8,1", "--rounds", "2"],
                             ["ratio", "of ideal", "bare aiohttp POSTs", "in flight at the server at most",
                              "ms a call", "capped at 16", "target: at least 0.9", "run / bare",
                              "the stand-in's CPU a request", "2 rounds, ratio median"]),
    "replay_bench.py": (["40", "--rounds", "2"], ["judged in the run", "main figure (library, least of 2 rounds)",
                                                 "replay/run", "copying the inputs", "replay/(run+report)"]),
    "storage_bench.py": (["20"], ["with the blob store", "without it (the baseline)", "KB per case", "judge.called",
                                  "events.jsonl.blobs", "blob store / Inspect", "events.jsonl.gz",
                                  "with the compressed mirror", "with compact rows", "compact rows and the compressed mirror"]),
    "scale_bench.py": (["20", "--check", "--skip-inspect"],
                       ["ms CPU a case", "peak RSS MB", "KB a case", "events a case", "check, 2 -> 20 cases"]),
    "run_bench.py": (["40", "--against", sys.executable, "--rounds", "1"],
                     ["ms a case", "per-case CPU at 40 vs 4 cases", "target <= 1.25", "a case)",
                      "ledger share of run CPU at 40 cases", "measured by", "this / that (medians)",
                      "target <= 0.33 against the code issue 15 was filed on"]),
    "memory_bench.py": (["20", "60", "--commands", "ingest,report,version,rebind"],   # report folds without a run
                        ["peak RSS, MB: 20 cases -> 60 cases", "ingest", "report", "version", "rebind", "target < 300 MB",
                         "ratio"]),
    "merkle_bench.py": (["3000"], ["merkle root", "chain verify", "append keeping the tree", "inclusion proof"]),
    "schema_bench.py": (["--repeat", "5"], ["request shapes", "built", "cached", "target < 0.2 ms"]),
    "ledger_bench.py": (["1000"], ["append", "1 event a transaction", "read", "peak RSS", "verify", "medians"]),
    "view_bench.py": (["--cases", "300", "--samples", "20"],
                      ["case-table page (50 rows)", "case page", "over HTTP", "server peak RSS", "target <= 3x"]),
    "whatif_bench.py": (["--cases", "30", "--points", "2"],
                        ["baseline: one report rebuild", "ratio sweep / rebuild", "target <= 2.0x",
                         "with no read models yet", "same curves: True",
                         "requests sent to the server: 0 (target 0: met)"]),
    "watch_bench.py": (["--ci", "--trials", "2", "--burst", "5", "--idle-seconds", "1"],
                       ["latency rename -> last case.judged", "burst", "idle daemon CPU",
                        "unchanged since a look found nothing hidden"]),
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


def test_ledger_bench_gives_ours_and_raw_the_same_tries_alternating_and_takes_medians():
    # The read figure once took the best of the in-process rounds and of a child-process run: one
    # more try for the ledger than for the raw scan. Each side now runs as often, first in turn.
    sys.path.insert(0, str(PERF))
    try:
        import ledger_bench
    finally:
        sys.path.remove(str(PERF))
    calls: list[str] = []
    ours_times, raw_times = iter([5.0, 1.0, 9.0]), iter([2.0, 2.0, 3.0])

    def ours():
        calls.append("ours")
        return next(ours_times)

    def raw():
        calls.append("raw")
        return next(raw_times)

    median_ours, median_raw, ratio = ledger_bench.interleaved(3, ours, raw)
    assert calls == ["ours", "raw", "raw", "ours", "ours", "raw"]
    assert (median_ours, median_raw, ratio) == (5.0, 2.0, 2.5)   # ratios 2.5, 0.5, 3.0: median 2.5


def _scale_bench():
    """benchmarks/perf/scale_bench.py as a module (it imports replay_bench from its own folder)."""
    sys.path.insert(0, str(PERF))
    try:
        import scale_bench
    finally:
        sys.path.remove(str(PERF))
    return scale_bench


def _measurement(bench, cases, cpu, rss, kb_a_case=4.0):
    steps = {step: bench.Usage(cpu, rss, cpu) for step in bench.STEPS}
    return bench.Measurement(cases, steps, int(kb_a_case * 1024 * cases), 0, 12 * cases)


def test_scale_bench_check_flags_growth_memory_and_size_and_passes_flat_figures():
    # The --check verdicts on figures: per-case CPU is net of the empty home's (0.5 s a step), so
    # 1.5 s at 1,000 and 10.5 s at 10,000 cases is flat (1 ms a case at both).
    bench = _scale_bench()
    empty = _measurement(bench, 0, 0.5, 45.0)
    small = _measurement(bench, 1000, 1.5, 60.0)
    assert bench.check_failures(small, _measurement(bench, 10_000, 10.5, 70.0), empty, 8.2) == []

    grown = bench.check_failures(small, _measurement(bench, 10_000, 20.5, 70.0), empty, 8.2)
    assert len(grown) == len(bench.STEPS) and all("CPU a case grew 2.00x" in m for m in grown), grown

    heavy = bench.check_failures(small, _measurement(bench, 10_000, 10.5, 310.0), empty, 8.2)
    assert sum("peak RSS grew" in m for m in heavy) == len(bench.STEPS)
    assert sum("peak RSS 310.0 MB" in m and "target < 300 MB" in m for m in heavy) == len(bench.STEPS)

    large = bench.check_failures(small, _measurement(bench, 10_000, 10.5, 70.0, kb_a_case=9.0), empty, 8.2)
    assert large == ["home: 9.0 KB a case, Inspect's log 8.2 KB an item uncompressed (target: at most Inspect's)"]


def test_scale_bench_refuses_a_size_below_two_and_an_existing_keep_folder(tmp_path):
    one = subprocess.run([sys.executable, str(PERF / "scale_bench.py"), "1"], capture_output=True, text=True,
                         timeout=60)
    assert one.returncode == 2 and "N must be at least 2" in one.stderr, one.stderr
    kept = subprocess.run([sys.executable, str(PERF / "scale_bench.py"), "4", "--keep", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert kept.returncode != 0 and "already exists" in kept.stderr, kept.stderr


def test_scale_bench_gives_inspect_the_same_items_as_the_ledger():
    # Inspect's side of the comparison judges the same work: every case once, its question, its
    # model's response, and the product as includes()'s target (found in the right answers only).
    bench = _scale_bench()
    whole = bench.benchmark(40)
    items = bench.inspect_items(40)
    assert sorted((i["id"].rsplit("-", 1)[0], i["model"], i["text"]) for i in items) == sorted(
        (r["question_id"], r["model"], r["text"]) for r in whole["responses"])
    questions = {q["id"]: q["question"] for q in whole["questions"]}
    assert all(i["question"] == questions[i["id"].rsplit("-", 1)[0]] for i in items)
    assert [i["target"] in i["text"] for i in items if i["model"] == "right"] == [True] * 20
    assert [i["target"] in i["text"] for i in items if i["model"] == "wrong"] == [False] * 20


def test_scale_bench_prints_inspect_beside_the_ledger_with_our_ratios(capsys):
    bench = _scale_bench()
    ours = _measurement(bench, 1000, 2.0, 80.0, kb_a_case=4.0)
    theirs = bench.InspectMeasurement(1000, bench.Usage(10.0, 320.0, 10.0), bench.Usage(8.0, 400.0, 8.0),
                                      2 * 1024 * 1000, 8 * 1024 * 1000, "right: 1.00 of 500, wrong: 0.00 of 500")
    bench.print_inspect(ours, theirs)
    out = " ".join(capsys.readouterr().out.split())   # the columns' widths are not the point
    assert "the same 1,000 items" in out and "right: 1.00 of 500" in out
    # ingest + run is 4 s against eval's 10 s; replay 2 s against score's 8 s; 4 KB against 8 and 2 KB.
    assert "evaluate: eval vs ingest+run, CPU s 10.00 4.00 0.40x" in out, out
    assert "evaluate: peak RSS MB 320.00 80.00 0.25x" in out, out
    assert "re-score: score vs replay, CPU s 8.00 2.00 0.25x" in out, out
    assert "KB an item: log uncompressed / home 8.00 4.00 0.50x" in out, out
    assert "KB an item: log as stored / home 2.00 4.00 2.00x" in out, out
    assert "ms CPU an item: Inspect eval 10.00, score 8.00; evalledger ingest+run 4.00" in out, out
