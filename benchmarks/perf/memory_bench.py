"""Does peak memory stay flat as a home grows? Peak RSS per command at two sizes, and their ratio.

Run:  python benchmarks/perf/memory_bench.py [SMALL] [LARGE] [--commands ingest,run,...]
      (default 10000 100000 cases, every command; a command needs those before it in COMMANDS)

For each size a benchmark of the issue's workload kind (``replay_bench.benchmark``: N/2 template
questions with two fields, answered by two models, under deep judgment) is written, then each
command runs as its own ``evalledger`` process against one home: ``validate`` (of the benchmark,
before it is ingested), ``ingest``, ``run`` (offline
judge), ``report``, ``rebuild``, ``verify``, ``status``, ``replay``, then ``version`` (``ingest`` of the
benchmark's next version: one question's ground truth fixed, no responses), ``rebind`` (its
cases opened again under that version) and ``reject`` (``ingest`` of a responses JSONL file of N
lines, every one bad: rejected, its first 1,000 errors shown and the rest counted). Each process's peak resident set
(``ru_maxrss`` from ``wait4``, in a small launcher process: see ``peak_mb``) is printed; the
baseline is the same command on the smaller home,
measured in the same run. Targets: every command under 300 MB at the larger size, and large/small
at most 1.25 (memory does not grow with the home). Exit 0 when both are met, 1 otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_bench import benchmark  # noqa: E402 (this folder is not a package)

from evalledger.testing.peak_rss import peak_rss_mb  # noqa: E402

LIMIT_MB = 300
RATIO = 1.25
COMMANDS = ("validate", "ingest", "run", "report", "rebuild", "verify", "status", "replay", "version", "rebind", "reject")
BAD_LINES = [   # a wrong type, a missing key and an unknown one, a line that is not JSON
    '{{"question_id": {n}, "model": 1, "text": null}}', '{{"question_id": "q{n}"}}', '{{"question_id": "q{n}", "text": "x']


def peak_mb(argv: list[str], exit_code: int = 0) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one process running ``argv``, which must exit with
    ``exit_code`` (0: succeed). Started from
    a small launcher (``evalledger.testing.peak_rss``): Linux carries a process's peak RSS across
    exec from the memory it was forked from, so a command started straight from this script
    reported at least this script's own peak (~200 MB once it has written a 100,000-case
    benchmark), whatever the command used."""
    start = time.monotonic()
    code, peak, stderr = peak_rss_mb(argv)
    if code != exit_code:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {stderr[-2000:]}")
    return peak, time.monotonic() - start


def command_line(command: str, home: Path, source: Path) -> list[str]:
    """The evalledger command line of one measured command."""
    cli = [sys.executable, "-m", "evalledger", "--home", str(home)]
    if command == "version":
        return cli + ["ingest", str(next_version(source))]
    if command == "reject":
        return cli + ["ingest", str(bad_lines(source))]
    extra = {"validate": [str(source)], "ingest": [str(source)], "run": ["--judge", "offline"], "replay": ["--into", str(home) + "-replay"],
             "rebind": [json.loads(source.read_bytes())["name"]]}
    return cli + [command, *extra.get(command, [])]


def next_version(source: Path) -> Path:
    """The benchmark at ``source`` as its next version, written beside it: the first question's
    ground truth fixed, and no responses (``rebind`` brings the earlier ones over)."""
    doc = json.loads(source.read_bytes())
    doc.pop("responses", None)
    field = doc["questions"][0]["template"]["fields"][0]
    field["ground_truth"] = field["ground_truth"] + 1
    path = source.with_name("benchmark-v2.json")
    path.write_text(json.dumps(doc))
    return path


def bad_lines(source: Path) -> Path:
    """A responses JSONL file of as many lines as the benchmark at ``source`` has responses, every
    line bad (``BAD_LINES`` in turn), written beside it: read whole, its rejection held them all."""
    count = len(json.loads(source.read_bytes())["responses"])
    path = source.with_name("bad.jsonl")
    path.write_text("".join(BAD_LINES[n % 3].format(n=n) + "\n" for n in range(count)))
    return path


def measure(cases: int, folder: Path, commands: tuple[str, ...]) -> dict[str, float]:
    """Peak RSS (MB) of each of ``commands`` on a new home of ``cases`` cases."""
    source = folder / "benchmark.json"
    source.write_text(json.dumps(benchmark(cases)))
    home = folder / "home"
    subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "init"], check=True,
                   stdout=subprocess.DEVNULL)
    peaks = {}
    for command in commands:
        peaks[command], seconds = peak_mb(command_line(command, home, source), int(command == "reject"))
        print(f"  {cases} cases, {command}: {peaks[command]:.0f} MB ({seconds:.1f} s)", flush=True)
    return peaks


def main(argv: list[str]) -> int:
    """Print peak RSS per command at both sizes and their ratio; exit 1 when a target is missed."""
    commands = COMMANDS
    if "--commands" in argv:
        at = argv.index("--commands")
        commands = tuple(c for c in COMMANDS if c in argv[at + 1].split(","))
        argv = argv[:at] + argv[at + 2:]
    small = int(argv[0]) if argv else 10_000
    large = int(argv[1]) if len(argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "small").mkdir()
        (Path(tmp) / "large").mkdir()
        low = measure(small, Path(tmp) / "small", commands)
        high = measure(large, Path(tmp) / "large", commands)
    ok = True
    print(f"peak RSS, MB: {small} cases -> {large} cases (target < {LIMIT_MB} MB, ratio <= {RATIO})")
    for command in commands:
        ratio = high[command] / low[command]
        met = high[command] < LIMIT_MB and ratio <= RATIO
        ok &= met
        print(f"{command:8} {low[command]:7.0f} {high[command]:7.0f}   ratio {ratio:.2f} {'ok' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
