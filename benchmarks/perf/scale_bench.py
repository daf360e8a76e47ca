"""How do cost and memory scale with the number of cases, and how do they compare with Inspect's?

Run:  python benchmarks/perf/scale_bench.py N [--keep DIR] [--skip-inspect] [--inspect-python PATH]
                                               [--check] [--timeout S]

N cases of the issue's workload (N / 2 arithmetic questions x 2 models, two fields each, deep
judgment, offline judge) are written as a native template benchmark and a responses file into the
inbox of a fresh home. Each step then runs as its own ``python -m evalledger`` process (the python
running this script, so another checkout measures its own code): ingest, run, report, rebuild,
verify, replay. For each step: CPU seconds of the child (user + sys, from ``os.wait4``), its peak
RSS, and CPU per case net of the same command's cost on an empty home (measured in the same run:
the start-up and fixed cost a case does not add). Then bytes and events per case of the home.

Where Inspect is installed (``--inspect-python``, default: the first of /tmp/inspect-venv/bin/python
and this python that imports ``inspect_ai``), the same items go through Inspect: a task file with
the same questions and targets, one task per model, ``mockllm`` answering each question with that
model's same response, scored by ``includes()``; ``inspect eval`` then ``inspect score``. Printed
side by side: CPU, peak RSS and log bytes per item, and our ratios to them.

``--check`` also measures N / 10 first and exits 1 when a step's CPU per case or peak RSS grows by
more than 25% from N / 10 to N, or a size target fails: peak RSS under 300 MB for every step, and
bytes per case at most Inspect's uncompressed log bytes per item (8.2 KB, the issue's figure, when
Inspect is not run). Without ``--check`` the exit code is 0. A step that fails, runs past
``--timeout``, or a run that judges fewer cases than generated ends the script with exit code 2
and the end of that step's log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from replay_bench import benchmark

STEPS = ("ingest", "run", "report", "rebuild", "verify", "replay")
GROWTH_LIMIT = 1.25         # per-case CPU and peak RSS at N over N / 10: "must not grow"
RSS_LIMIT_MB = 300.0        # every step's peak RSS (the flat-memory target, at 100k cases)
INSPECT_KB_PER_ITEM = 8.2   # the measure of Inspect's uncompressed log, when Inspect is not run
INSPECT_VENV_PYTHON = Path("/tmp/inspect-venv/bin/python")


@dataclass(frozen=True)
class Usage:
    """What one child process cost: CPU seconds (user + sys), peak RSS in MB, wall seconds."""

    cpu: float
    rss_mb: float
    wall: float

    def plus(self, other: Usage) -> Usage:
        """Two processes run one after the other: CPU and wall add up, the peak is the larger."""
        return Usage(self.cpu + other.cpu, max(self.rss_mb, other.rss_mb), self.wall + other.wall)


class StepFailed(RuntimeError):
    """A measured command exited with an error (or ran past its time limit)."""


# Runs argv[2:] and writes "exit-code cpu-seconds peak-kb" of it to argv[1]. Linux carries a
# process's peak RSS across exec from the process it was forked from, so a step started straight
# from this script reported at least this script's own peak (which writing a 100,000-case benchmark
# takes to ~200 MB). Started from this small launcher, a step reports its own.
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
"""


def measured(cmd: list[str], log: Path, timeout: float, cwd: Path | None = None,
             env: dict | None = None) -> Usage:
    """Run ``cmd`` as a child, its output appended to ``log``, and return its own resource usage.

    The child is started from a small launcher (``LAUNCHER``) whose ``os.wait4`` gives the rusage
    of exactly that child (and the children it waited for), so other work of this script or the
    machine is not counted. A child past ``timeout`` seconds is killed with its launcher and
    reported, never waited on forever.
    """
    usage_file = log.with_name(log.name + ".usage")
    usage_file.unlink(missing_ok=True)
    with log.open("ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(usage_file), *cmd], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                start_new_session=True)
        timer = threading.Timer(timeout, lambda: _kill_group(proc.pid))
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    fields = usage_file.read_text().split() if usage_file.exists() else []
    usage_file.unlink(missing_ok=True)
    code = int(fields[0]) if fields else proc.returncode or -9
    if code != 0:
        reason = f"killed after {timeout:.0f} s" if wall >= timeout else f"exit code {code}"
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise StepFailed(f"{' '.join(cmd)}: {reason}; the end of {log}:\n" + "\n".join(tail))
    # Linux reports ru_maxrss in KB.
    return Usage(float(fields[1]), int(fields[2]) / 1024, wall)


def _kill_group(pid: int) -> None:
    """Kill the launcher and the step it started (one session)."""
    try:
        os.killpg(pid, 9)
    except ProcessLookupError:
        pass


def write_inputs(cases: int, inbox: Path) -> int:
    """Write the workload into ``inbox``: a benchmark without responses, and the responses as JSONL.

    Returns the number of cases (responses). The questions and responses are replay_bench's
    arithmetic set, so every perf script measures the same work.
    """
    whole = benchmark(cases)
    responses = whole.pop("responses")
    whole["name"] = "scale-bench"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / "scale.benchmark.json").write_text(json.dumps(whole))
    with (inbox / "scale.responses.jsonl").open("w") as out:
        for r in responses:
            out.write(json.dumps({"benchmark": whole["name"], **r}) + "\n")
    return len(responses)


def step_command(step: str, home: Path) -> list[str]:
    """The ``python -m evalledger`` command line that performs ``step`` on ``home``."""
    tail = {"ingest": ["ingest"], "run": ["run", "--judge", "offline", "--quiet"], "report": ["report"],
            "rebuild": ["rebuild"], "verify": ["verify"],
            "replay": ["replay", "--into", str(home.parent / "replayed"), "--quiet"]}[step]
    return [sys.executable, "-m", "evalledger", "--home", str(home), *tail]


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def entry_bytes(folder: Path) -> dict[str, int]:
    """Bytes of each top-level file or folder of ``folder``, by name: where a home's bytes are."""
    return {p.name: folder_bytes(p) if p.is_dir() else p.stat().st_size for p in folder.iterdir()}


def judged_and_events(home: Path, log: Path, timeout: float) -> tuple[int, int]:
    """(cases judged, events in the ledger) of ``home``, from ``evalledger status --json``."""
    cmd = [sys.executable, "-m", "evalledger", "--home", str(home), "status", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        with log.open("a") as out:
            out.write(done.stdout + done.stderr)
        raise StepFailed(f"status --json: exit code {done.returncode}; see {log}")
    status = json.loads(done.stdout)
    return int(status["cases"].get("judged", 0)), int(status["head"]["seq"])


@dataclass
class Measurement:
    """Every step's usage for one size, and the home's size afterwards."""

    cases: int
    steps: dict[str, Usage]
    home_bytes: int
    replay_bytes: int
    events: int
    home_parts: dict[str, int] = field(default_factory=dict)


def measure_size(cases: int, folder: Path, timeout: float) -> Measurement:
    """Generate ``cases`` cases in a fresh home under ``folder`` and time each step on it."""
    home = folder / "home"
    log = folder / "steps.log"
    folder.mkdir(parents=True, exist_ok=True)
    measured([sys.executable, "-m", "evalledger", "--home", str(home), "init"], log, timeout)   # not timed
    if cases:
        cases = write_inputs(cases, home / "inbox")
    else:
        (home / "inbox").mkdir(parents=True, exist_ok=True)
    steps = {}
    for step in STEPS:
        steps[step] = measured(step_command(step, home), log, timeout)
        print(f"  [{cases:,} cases] {step}: {steps[step].cpu:.2f} s CPU, {steps[step].rss_mb:.1f} MB",
              file=sys.stderr, flush=True)
    judged, events = judged_and_events(home, log, timeout) if cases else (0, 0)   # empty: nothing to count
    if judged != cases:   # timing a run that judged less would flatter it
        raise StepFailed(f"{judged:,} of {cases:,} cases judged in {home}; see {log}")
    return Measurement(cases, steps, folder_bytes(home), folder_bytes(folder / "replayed"), events,
                       entry_bytes(home))


def per_case_cpu(m: Measurement, empty: Measurement, step: str) -> float:
    """CPU seconds a case adds to ``step``: its CPU less the same command's on an empty home."""
    return max(0.0, m.steps[step].cpu - empty.steps[step].cpu) / max(1, m.cases)


def print_size(m: Measurement, empty: Measurement) -> None:
    """The per-step table and the home's bytes and events per case for one size."""
    print(f"\n{m.cases:,} cases ({m.cases // 2:,} questions x 2 models, 2 fields each, deep judgment, "
          f"offline judge); each step a separate `python -m evalledger` process")
    print(f"  {'step':<8} {'CPU s':>9} {'wall s':>9} {'peak RSS MB':>12} {'ms CPU a case':>14} "
          f"{'(empty home: CPU s, RSS MB)':>29}")
    for step in STEPS:
        u, e = m.steps[step], empty.steps[step]
        print(f"  {step:<8} {u.cpu:>9.2f} {u.wall:>9.2f} {u.rss_mb:>12.1f} "
              f"{per_case_cpu(m, empty, step) * 1000:>14.3f} {f'{e.cpu:.2f}, {e.rss_mb:.1f}':>29}")
    total = sum(u.cpu for u in m.steps.values())
    print(f"  all steps: {total:.2f} s CPU; highest peak RSS {max(u.rss_mb for u in m.steps.values()):.1f} MB")
    print(f"  home: {m.home_bytes / max(1, m.cases) / 1024:.1f} KB a case ({m.home_bytes / 1e6:.1f} MB), "
          f"{m.events / max(1, m.cases):.1f} events a case ({m.events:,} events); "
          f"replayed home {m.replay_bytes / max(1, m.cases) / 1024:.1f} KB a case")
    parts = sorted(m.home_parts.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    print("  where the home's bytes are: " + ", ".join(
        f"{name} {size / max(1, m.cases) / 1024:.1f} KB a case ({size / max(1, m.home_bytes):.0%})"
        for name, size in parts if size))


# ---------------------------------------------------------------------------------------------
# Inspect, side by side

INSPECT_TASK = '''"""The scale benchmark's items for Inspect: one task per model, mockllm answering each question
with that model's recorded response, scored by includes() against the ground-truth product."""

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

ITEMS = json.loads(Path(__file__).with_name("items.json").read_text())


def items_task(model: str) -> Task:
    """The questions as samples; mockllm/<model> replies with that model's response to each."""
    replies = {i["question"]: i["text"] for i in ITEMS if i["model"] == model}

    def answer(messages, tools, tool_choice, config):
        reply = ModelOutput.from_content(model=f"mockllm/{model}", content=replies[messages[-1].text])
        # With usage given, mockllm does not count tokens with tiktoken (whose tables it would
        # download): words stand in for tokens.
        words_in, words_out = len(messages[-1].text.split()), len(reply.completion.split())
        reply.usage = ModelUsage(input_tokens=words_in, output_tokens=words_out, total_tokens=words_in + words_out)
        return reply

    samples = [Sample(id=i["id"], input=i["question"], target=i["target"]) for i in ITEMS if i["model"] == model]
    return Task(dataset=samples, solver=generate(), scorer=includes(),
                model=get_model(f"mockllm/{model}", custom_outputs=answer, memoize=False))


@task
def right():
    return items_task("right")


@task
def wrong():
    return items_task("wrong")
'''


def find_inspect_python(given: str | None) -> Path | None:
    """The python whose environment has inspect_ai: ``given``, else the Inspect venv, else this one."""
    candidates = [Path(given)] if given else [INSPECT_VENV_PYTHON, Path(sys.executable)]
    for python in candidates:
        if python.exists() and subprocess.run([str(python), "-c", "import inspect_ai"], capture_output=True,
                                              stdin=subprocess.DEVNULL, timeout=120).returncode == 0:
            return python
    if given:
        raise SystemExit(f"--inspect-python {given}: cannot import inspect_ai there")
    return None


def inspect_items(cases: int) -> list[dict]:
    """Our workload as Inspect items: question, target (the product), the model and its response."""
    whole = benchmark(cases)
    questions = {q["id"]: q for q in whole["questions"]}
    items = []
    for r in whole["responses"]:
        q = questions[r["question_id"]]
        truth = next(f["ground_truth"] for f in q["template"]["fields"] if f["name"] == "result")
        items.append({"id": f"{r['question_id']}-{r['model']}", "question": q["question"], "target": str(truth),
                      "model": r["model"], "text": r["text"]})
    return items


@dataclass
class InspectMeasurement:
    """Inspect's eval and score usage, and its logs' bytes (as stored, and uncompressed)."""

    items: int
    eval: Usage
    score: Usage
    log_bytes: int
    log_bytes_uncompressed: int
    accuracy: str


def inspect_command(python: Path, *args: str) -> list[str]:
    """An ``inspect`` command line run with ``python`` (its console script, else ``-m inspect_ai``)."""
    script = python.parent / "inspect"
    return [str(script), *args] if script.exists() else [str(python), "-m", "inspect_ai", *args]


def log_sizes(logs: list[Path]) -> tuple[int, int]:
    """(bytes stored, bytes uncompressed) of Inspect's ``.eval`` logs (zip archives; the sizes are
    in the central directory, so nothing needs decompressing)."""
    stored = sum(p.stat().st_size for p in logs)
    with_zip = 0
    for p in logs:
        with zipfile.ZipFile(p) as z:
            with_zip += sum(i.file_size for i in z.infolist())
    return stored, with_zip


ACCURACY = """import sys
from inspect_ai.log import read_eval_log
for path in sys.argv[1:]:
    log = read_eval_log(path, header_only=True)
    if log.status != "success" or log.results is None:
        sys.exit(f"{path}: status {log.status}: {log.error.message if log.error else ''}")
    print(log.eval.task, log.results.total_samples, log.results.scores[0].metrics["accuracy"].value)
"""


def accuracies(python: Path, logs: list[Path], timeout: float) -> str:
    """Each scored log's task, samples and includes() accuracy, read by Inspect itself (its logs
    are zstd-compressed zip archives that this python may not decompress): a check that the items
    were judged alike (half the answers are right)."""
    done = subprocess.run([str(python), "-c", ACCURACY, *map(str, logs)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise StepFailed(f"Inspect's logs: {done.stderr.strip()[-1000:]}")
    return ", ".join(f"{task}: {float(acc):.2f} of {n}" for task, n, acc in
                     (line.split() for line in done.stdout.splitlines()))


def measure_inspect(python: Path, cases: int, folder: Path, timeout: float) -> InspectMeasurement:
    """``inspect eval`` (both tasks, one process) then ``inspect score`` of each log, in ``folder``."""
    folder.mkdir(parents=True)
    items = inspect_items(cases)
    (folder / "items.json").write_text(json.dumps(items))
    (folder / "scale_task.py").write_text(INSPECT_TASK)
    logs_dir, log = folder / "logs", folder / "inspect.log"
    env = {**os.environ, "INSPECT_LOG_DIR": str(logs_dir), "INSPECT_DISPLAY": "none"}
    run = measured(inspect_command(python, "eval", "scale_task.py", "--log-dir", str(logs_dir), "--display",
                                   "none", "--log-format", "eval"), log, timeout, cwd=folder, env=env)
    logs = sorted(logs_dir.glob("*.eval"))
    if len(logs) != 2:
        raise StepFailed(f"inspect eval wrote {len(logs)} logs, expected 2; see {log}")
    accuracies(python, logs, timeout)   # fails unless every sample was evaluated
    stored, uncompressed = log_sizes(logs)
    rescored = folder / "rescored"
    rescored.mkdir()
    score = Usage(0.0, 0.0, 0.0)
    for p in logs:
        score = score.plus(measured(inspect_command(python, "score", str(p), "--display", "none", "--action", "overwrite",
                                                    "--output-file", str(rescored / p.name)),
                                    log, timeout, cwd=folder, env=env))
    return InspectMeasurement(len(items), run, score, stored, uncompressed,
                              accuracies(python, sorted(rescored.glob("*.eval")), timeout))


def print_inspect(ours: Measurement, theirs: InspectMeasurement) -> None:
    """Inspect's figures per item beside ours per case, and our ratios to them."""
    n = max(1, theirs.items)
    ingest_run = ours.steps["ingest"].plus(ours.steps["run"])
    print(f"\nInspect, the same {theirs.items:,} items (mockllm, includes(); accuracy after re-scoring: "
          f"{theirs.accuracy})")
    print(f"  {'':<34} {'Inspect':>12} {'evalledger':>12} {'ratio':>7}")
    rows = [
        ("evaluate: eval vs ingest+run, CPU s", theirs.eval.cpu, ingest_run.cpu),
        ("evaluate: peak RSS MB", theirs.eval.rss_mb, ingest_run.rss_mb),
        ("re-score: score vs replay, CPU s", theirs.score.cpu, ours.steps["replay"].cpu),
        ("re-score: score vs rebuild, CPU s", theirs.score.cpu, ours.steps["rebuild"].cpu),
        ("re-score: peak RSS MB (replay)", theirs.score.rss_mb, ours.steps["replay"].rss_mb),
        ("KB an item: log uncompressed / home", theirs.log_bytes_uncompressed / n / 1024,
         ours.home_bytes / max(1, ours.cases) / 1024),
        ("KB an item: log as stored / home", theirs.log_bytes / n / 1024, ours.home_bytes / max(1, ours.cases) / 1024),
    ]
    for name, inspect_value, our_value in rows:
        print(f"  {name:<34} {inspect_value:>12.2f} {our_value:>12.2f} {our_value / inspect_value:>6.2f}x")
    print(f"  ms CPU an item: Inspect eval {theirs.eval.cpu / n * 1000:.2f}, score {theirs.score.cpu / n * 1000:.2f}; "
          f"evalledger ingest+run {ingest_run.cpu / max(1, ours.cases) * 1000:.2f}, "
          f"replay {ours.steps['replay'].cpu / max(1, ours.cases) * 1000:.2f}, "
          f"rebuild {ours.steps['rebuild'].cpu / max(1, ours.cases) * 1000:.2f} (start-up included)")


# ---------------------------------------------------------------------------------------------
# --check


def check_failures(small: Measurement, large: Measurement, empty: Measurement,
                   inspect_kb_per_item: float) -> list[str]:
    """Every target missed: growth of CPU per case or peak RSS from ``small`` to ``large`` above
    GROWTH_LIMIT, a peak RSS at or above RSS_LIMIT_MB, bytes per case above Inspect's."""
    missed = []
    for step in STEPS:
        before, after = per_case_cpu(small, empty, step), per_case_cpu(large, empty, step)
        if after > before * GROWTH_LIMIT:
            missed.append(f"{step}: CPU a case grew {after / before if before else float('inf'):.2f}x "
                          f"from {small.cases:,} to {large.cases:,} cases ({before * 1000:.3f} -> "
                          f"{after * 1000:.3f} ms; limit {GROWTH_LIMIT}x)")
        rss_before, rss_after = small.steps[step].rss_mb, large.steps[step].rss_mb
        if rss_after > rss_before * GROWTH_LIMIT:
            missed.append(f"{step}: peak RSS grew {rss_after / rss_before:.2f}x from {small.cases:,} to "
                          f"{large.cases:,} cases ({rss_before:.1f} -> {rss_after:.1f} MB; limit {GROWTH_LIMIT}x)")
        if rss_after >= RSS_LIMIT_MB:
            missed.append(f"{step}: peak RSS {rss_after:.1f} MB at {large.cases:,} cases (target < {RSS_LIMIT_MB:.0f} MB)")
    kb = large.home_bytes / max(1, large.cases) / 1024
    if kb > inspect_kb_per_item:
        missed.append(f"home: {kb:.1f} KB a case, Inspect's log {inspect_kb_per_item:.1f} KB an item "
                      f"uncompressed (target: at most Inspect's)")
    return missed


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line: N and the options in the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", type=int, nargs="?", default=10_000, help="cases to generate (default 10,000)")
    p.add_argument("--keep", default=None, metavar="DIR", help="work in DIR (must not exist) and keep the homes")
    p.add_argument("--skip-inspect", action="store_true", help="do not run Inspect")
    p.add_argument("--inspect-python", default=None, metavar="PATH",
                   help=f"a python that imports inspect_ai (default: {INSPECT_VENV_PYTHON}, else this python)")
    p.add_argument("--check", action="store_true",
                   help="also measure N / 10; exit 1 when per-case CPU or peak RSS grows by more than 25%%, "
                        "a peak RSS reaches 300 MB, or bytes a case exceed Inspect's")
    p.add_argument("--timeout", type=float, default=4 * 3600, metavar="S",
                   help="kill a step that runs longer than this (default 4 h)")
    args = p.parse_args(argv)
    if args.cases < 2:
        p.error(f"N must be at least 2 (two models answer each question), got {args.cases}")
    return args


def run(args: argparse.Namespace, work: Path) -> int:
    """Measure every size (and Inspect) in ``work``, print the tables; the exit code."""
    empty = measure_size(0, work / "empty", args.timeout)
    small = None
    if args.check:
        small = measure_size(max(2, args.cases // 10), work / "small", args.timeout)
        print_size(small, empty)
    large = measure_size(args.cases, work / "large", args.timeout)
    print_size(large, empty)
    inspect_kb = INSPECT_KB_PER_ITEM
    python = None if args.skip_inspect else find_inspect_python(args.inspect_python)
    if python is not None:
        theirs = measure_inspect(python, args.cases, work / "inspect", args.timeout)
        print_inspect(large, theirs)
        inspect_kb = theirs.log_bytes_uncompressed / max(1, theirs.items) / 1024
    elif not args.skip_inspect:
        print(f"\nInspect: not installed (no --inspect-python, {INSPECT_VENV_PYTHON} missing, and this python "
              f"cannot import inspect_ai); the issue's figure {INSPECT_KB_PER_ITEM} KB an item stands in")
    if small is None:
        return 0
    missed = check_failures(small, large, empty, inspect_kb)
    print(f"\ncheck, {small.cases:,} -> {large.cases:,} cases: " + ("all targets met" if not missed else
                                                                     f"{len(missed)} missed"))
    for line in missed:
        print(f"  MISSED {line}")
    return 1 if missed else 0


def main(argv: list[str]) -> int:
    """Parse the options, measure in a temporary (or ``--keep``) folder, print; exit code 1 on a miss."""
    args = parse_args(argv)
    if args.keep:
        work = Path(args.keep)
        if work.exists():
            raise SystemExit(f"--keep {work}: already exists; give a new folder")
        work.mkdir(parents=True)
        return run(args, work)
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except StepFailed as failed:
        print(f"scale_bench: {failed}", file=sys.stderr)
        sys.exit(2)
