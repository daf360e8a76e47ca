"""Is a replay slower than the run it replays? Both measured in one run, CPU seconds.

Run:  python benchmarks/perf/replay_bench.py [CASES] [--rounds N] [--no-cli]
      (default 640 cases: 320 questions x 2 models; 5 rounds)

A template benchmark with two fields per question, under deep judgment (three judge calls a case),
is ingested and judged by the offline judge (``run_until_idle``; the ingest is not timed), then
replayed into a new home from the recorded calls (``replay_into``, no judge), each round on new
homes. The MAIN figure, the one the target applies to, is this library-level one: the replay's
CPU seconds against the run's, the least of each over the rounds (other processes on a shared
machine only ever add time; each round's ratio is printed too). Target: the replay costs at most
the run (ratio <= 1.0): a replay makes no judge call, so it has no reason to cost more. Exit 0
when met, 1 otherwise.

Also printed (no target): the same by the command line, end to end in subprocesses, CPU seconds
of the child processes: ``evalledger replay --into`` (which writes the new home's reports) against
``evalledger run`` followed by ``evalledger report`` (the run writes none), so both include the
reports; and what the replay spends copying the source's inputs into the new home.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.replaying import replay_into, seed_replay
from evalledger.testing.arithmetic import arithmetic_benchmark

TARGET = 1.0


def benchmark(cases: int) -> dict:
    """``cases`` / 2 arithmetic questions answered by two models, one right and one wrong."""
    return arithmetic_benchmark(max(1, cases // 2), "replay-bench")


def judged_home(cases: int, folder: Path, rows: str = "text") -> tuple[Path, Any, float]:
    """(the home, the run's summary, its CPU seconds): ``benchmark(cases)`` ingested into a new home
    in ``folder`` (its rows form ``rows``) and judged there by the offline judge (``run_until_idle``;
    ingest not timed)."""
    source = folder / "benchmark.json"
    source.write_text(json.dumps(benchmark(cases)))
    with ledger.open_ledger(folder / "run", rows=rows) as led:
        ingest_path(led, source)
        start = time.process_time()
        summary = run_until_idle(led, RunSettings(judge_backend="offline"))
        return folder / "run", summary, time.process_time() - start


def copy_cost(source: Path, target: Path) -> float:
    """CPU seconds a replay spends copying the source's inputs (``seed_replay``) into a new home."""
    with ledger.open_ledger(source, readonly=True) as src, ledger.open_ledger(target) as led:
        start = time.process_time()
        seed_replay(src, led, str(source), {}, None)
        return time.process_time() - start


def library_round(cases: int, folder: Path) -> tuple[float, float, str]:
    """(run CPU s, replay CPU s, counts line) of one round: a new home judged, then replayed."""
    _, summary, run_s = judged_home(cases, folder)
    start = time.process_time()
    result = replay_into(folder / "run", folder / "replayed")
    replay_s = time.process_time() - start
    counts = (f"cases: {summary.cases} judged in the run, {result.summary.judged} in the replay, "
              f"{len(result.missing)} unrecorded")
    return run_s, replay_s, counts


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_cpu(folder: Path, *commands: list[str]) -> float:
    """CPU seconds of ``evalledger`` run with each of ``commands`` in turn (each must succeed)."""
    start = children_cpu()
    for command in commands:
        done = subprocess.run([sys.executable, "-m", "evalledger", *command], cwd=folder,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"evalledger {' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return children_cpu() - start


def cli_figures(cases: int, folder: Path) -> tuple[float, float, float]:
    """(run, report, replay) CPU seconds by the command line: a new home ingested (not timed),
    ``run`` then ``report`` timed, then ``replay --into`` (which writes its reports) timed."""
    folder.mkdir()
    (folder / "benchmark.json").write_text(json.dumps(benchmark(cases)))
    cli_cpu(folder, ["--home", "home", "init"], ["--home", "home", "ingest", "benchmark.json"])
    run_s = cli_cpu(folder, ["--home", "home", "run", "--quiet"])
    report_s = cli_cpu(folder, ["--home", "home", "report"])
    replay_s = cli_cpu(folder, ["--home", "home", "replay", "--into", "replayed", "--quiet"])
    return run_s, report_s, replay_s


def main(argv: list[str]) -> int:
    """Print run and replay CPU seconds and their ratios; exit 1 when the replay costs more (main figure)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="?", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-cli", action="store_true", help="skip the command-line figure")
    args = parser.parse_args(argv)
    runs, replays = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(max(1, args.rounds)):
            folder = Path(tmp) / f"round{number}"
            folder.mkdir()
            run_s, replay_s, counts = library_round(args.cases, folder)
            runs.append(run_s)
            replays.append(replay_s)
            print(f"round {number + 1}: run {run_s:.3f} s CPU, replay {replay_s:.3f} s CPU: "
                  f"replay/run {replay_s / run_s:.2f}")
        copy_s = copy_cost(Path(tmp) / "round0" / "run", Path(tmp) / "copy")
        cli = None if args.no_cli else cli_figures(args.cases, Path(tmp) / "cli")
    ratio = min(replays) / min(runs)
    print(counts)
    print(f"main figure (library, least of {len(runs)} rounds): run {min(runs):.3f} s CPU, replay "
          f"{min(replays):.3f} s CPU: replay/run {ratio:.2f} (target <= {TARGET}) "
          f"{'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"of the replay, copying the inputs into the new home: {copy_s:.3f} s CPU")
    if cli is not None:
        run_s, report_s, replay_s = cli
        print(f"command line (no target): replay (writes its reports) {replay_s:.2f} s CPU vs run {run_s:.2f} s "
              f"+ report {report_s:.2f} s = {run_s + report_s:.2f} s: replay/(run+report) "
              f"{replay_s / (run_s + report_s):.2f} (replay/run alone {replay_s / run_s:.2f})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
