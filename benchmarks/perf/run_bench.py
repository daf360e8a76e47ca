"""Does a run's cost per case stay flat as the scan grows? CPU seconds per case at N/10 and N.

Run:  python benchmarks/perf/run_bench.py [CASES]     (default 10000)

The replay benchmark's arithmetic set (two fields a question, deep judgment: three judge calls
a case) is ingested and judged by the offline judge (``run_until_idle``) at CASES / 10 and at
CASES cases, each in a new home. Printed: CPU per case at both sizes and their ratio (target
<= 1.25: flat; a watermark that takes min() over the open cases for every case grows with N),
and the transactions the judging took per case (each case's judge calls and outputs commit
together, and cases finishing together share a transaction).

Then the ledger's share of the run's CPU at CASES (target < 25%), sampled by py-spy when it is
installed (``pip install py-spy``; the run is judged again in a child process under
``py-spy record``: the share of the samples inside ``run_until_idle`` that have a frame of the
ledger package), else by cProfile (the cumulative time of the ledger's functions called from
outside it, over the whole run's). The line names the profiler that measured it. The share is
information.

``--against PYTHON``: issue 15's target, a run using at most 1/3 of the CPU a case of the code it
was filed on, measured in the same minutes (this machine's speed changes twofold from day to day,
so a figure from another day says nothing). PYTHON is the interpreter of another install of
evalledger, e.g. of commit f6c82b2, the last before the issue's work (docs/performance.md says
how to make one). The same benchmark file is ingested and judged at CASES by a fresh process of
each install in turns, ``--rounds`` times (ingest not timed); the medians are compared.

Exit status: 0 when the per-case CPU is flat (and, with ``--against``, at most 1/3 of the other
install's), 1 otherwise.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from replay_bench import benchmark, judged_home

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path

TARGET = 1.25
SHARE_TARGET = 0.25
AGAINST_TARGET = 1 / 3
# What a fresh process of either install runs: only API both have (open_ledger, ingest_path,
# run_until_idle, RunSettings), ingest untimed; prints the cases judged and the run's CPU seconds.
CHILD = """
import sys, time
from pathlib import Path
from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
source, home = Path(sys.argv[1]), Path(sys.argv[2])
with ledger.open_ledger(home) as led:
    ingest_path(led, source)
with ledger.open_ledger(home) as led:
    start = time.process_time()
    summary = run_until_idle(led, RunSettings(judge_backend="offline"))
    print(summary.judged, time.process_time() - start)
"""
LEDGER_DIR = os.path.dirname(os.path.abspath(ledger.__file__)) + os.sep


def measure(cases: int, folder: Path) -> tuple[int, float, int]:
    """(cases judged, run CPU seconds, transactions holding judging events) for a new home."""
    home, summary, cpu = judged_home(cases, folder)
    with ledger.open_ledger(home, readonly=True) as led:
        instants = {e.meta.get("recorded_at") for e in led.read(types=["judge.called", "case.judged"])}
    return summary.judged, cpu, len(instants)


def ingested_home(cases: int, folder: Path) -> Path:
    """A new home in ``folder`` holding ``benchmark(cases)``, ingested, not yet judged."""
    source = folder / "benchmark.json"
    source.write_text(json.dumps(benchmark(cases)))
    with ledger.open_ledger(folder / "run") as led:
        ingest_path(led, source)
    return folder / "run"


def judge(home: Path) -> None:
    """Judge the home's pending cases with the offline judge (what the profilers measure)."""
    with ledger.open_ledger(home) as led:
        run_until_idle(led, RunSettings(judge_backend="offline"))


def py_spy() -> str | None:
    """The py-spy executable (beside this Python, else on PATH), or None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def share_by_py_spy(spy: str, home: Path, folder: Path) -> float | None:
    """The share of py-spy's samples inside run_until_idle that have a ledger frame (None when
    py-spy cannot attach here, e.g. ptrace is not permitted)."""
    out = folder / "samples.txt"
    done = subprocess.run([spy, "record", "--rate", "250", "--format", "raw", "--full-filenames", "--output",
                           str(out), "--", sys.executable, __file__, "--judge", str(home)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        return None
    total = ours = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "run_until_idle" not in stack:
            continue
        total += int(count)
        ours += int(count) if f"({LEDGER_DIR}" in stack else 0
    return ours / total if total else None


def share_by_cprofile(home: Path) -> float:
    """The cumulative time of ledger functions called from outside the ledger, over the run's."""
    profile = cProfile.Profile()
    profile.runcall(judge, home)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(ct for _, _, _, ct, _ in stats.values())
    inside = 0.0
    for func, (_, _, _, _, callers) in stats.items():
        if func[0].startswith(LEDGER_DIR):
            inside += sum(c[3] for caller, c in callers.items() if not caller[0].startswith(LEDGER_DIR))
    return inside / total


def ledger_share(cases: int, folder: Path) -> tuple[float, str]:
    """(the ledger's share of run CPU at ``cases``, the profiler that measured it)."""
    home = ingested_home(cases, folder)
    spy = py_spy()
    if spy is not None:
        share = share_by_py_spy(spy, home, folder)
        if share is not None:
            return share, "py-spy"
        shutil.rmtree(folder)
        folder.mkdir()
        home = ingested_home(cases, folder)
    return share_by_cprofile(home), "cProfile"


def child_run(python: str, source: Path, home: Path) -> float:
    """CPU seconds a case of a fresh ``python`` process ingesting ``source`` into the new ``home`` and
    judging it (``CHILD``), run outside this checkout so the install ``python`` has is the one used."""
    done = subprocess.run([python, "-c", CHILD, str(source), str(home)], capture_output=True, text=True,
                          cwd=home.parent)
    if done.returncode != 0:
        raise SystemExit(f"{python}: the run failed:\n{done.stderr[-2000:]}")
    judged, cpu = done.stdout.split()[-2:]
    return float(cpu) / max(1, int(judged))


def install_of(python: str) -> str:
    """Where ``python`` imports evalledger from, with the commit checked out there when it is a git tree."""
    where = subprocess.run([python, "-c", "import evalledger, os; print(os.path.dirname(evalledger.__file__))"],
                           capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", where or ".", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return f"{where} ({commit})" if commit else where or python


def against(cases: int, other: str, rounds: int) -> bool:
    """Print this install's run CPU a case against ``other``'s, in turns; True when at most 1/3."""
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "benchmark.json"
        source.write_text(json.dumps(benchmark(cases)))
        for _ in range(rounds):
            for python, figures in ((other, theirs), (sys.executable, ours)):
                home = Path(tmp) / f"home-{len(ours) + len(theirs)}"
                figures.append(child_run(python, source, home))
                shutil.rmtree(home)
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"run CPU a case at {cases} cases, {rounds} rounds in turns (fresh processes): this install "
          f"{', '.join(f'{x * 1000:.2f}' for x in ours)} ms; {install_of(other)} "
          f"{', '.join(f'{x * 1000:.2f}' for x in theirs)} ms")
    met = ratio <= AGAINST_TARGET
    print(f"this / that (medians): {ratio:.2f} (target <= 0.33 against the code issue 15 was filed on) "
          f"{'ok' if met else 'MISSED'}")
    return met


def main(argv: list[str]) -> int:
    """Print run CPU per case at CASES / 10 and CASES, their ratio, transactions per case and the
    ledger's share of the run's CPU (and, with ``--against``, the run's CPU against another install's)."""
    if argv[:1] == ["--judge"]:   # the child py-spy samples
        judge(Path(argv[1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=int, nargs="?", default=10_000)
    parser.add_argument("--against", metavar="PYTHON", help="interpreter of another install to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each install with --against (default 3)")
    args = parser.parse_args(argv)
    cases = args.cases
    small = max(2, cases // 10)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "small").mkdir()
        (Path(tmp) / "large").mkdir()
        small_judged, small_cpu, _ = measure(small, Path(tmp) / "small")
        judged, cpu, commits = measure(cases, Path(tmp) / "large")
        (Path(tmp) / "profiled").mkdir()
        share, profiler = ledger_share(cases, Path(tmp) / "profiled")
    per_small, per_large = small_cpu / small_judged, cpu / judged
    ratio = per_large / per_small
    print(f"run {small_judged} cases: {small_cpu:.2f} s CPU, {per_small * 1000:.2f} ms a case")
    print(f"run {judged} cases: {cpu:.2f} s CPU, {per_large * 1000:.2f} ms a case")
    print(f"per-case CPU at {judged} vs {small_judged} cases: ratio {ratio:.2f} (target <= {TARGET}: flat) "
          f"{'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"transactions holding judge calls and verdicts: {commits} for {judged} cases "
          f"({commits / judged:.2f} a case)")
    print(f"ledger share of run CPU at {judged} cases: {share:.0%} (target < {SHARE_TARGET:.0%}; measured by "
          f"{profiler}) {'ok' if share < SHARE_TARGET else 'MISSED'}")
    met = against(cases, args.against, args.rounds) if args.against else True
    return 0 if ratio <= TARGET and met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
