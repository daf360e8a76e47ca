"""Is a replay slower than the run it replays? Both measured in one run, CPU seconds.

Run:  python benchmarks/perf/replay_bench.py [CASES]     (default 640: 320 questions x 2 models)

A template benchmark with two fields per question, under deep judgment (three judge calls a case),
is ingested and judged by the offline judge
(``run_until_idle``), then replayed into a new home from the recorded calls (``replay_into``,
no judge). Target: the replay costs at most the run (ratio <= 1.0): a replay makes no judge
call, so it has no reason to cost more. Exit 0 when met, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.replaying import replay_into, seed_replay

TARGET = 1.0


def benchmark(cases: int) -> dict:
    """``cases`` / 2 arithmetic questions answered by two models, one right and one wrong."""
    questions, responses = [], []
    for i in range(max(1, cases // 2)):
        a, b = 12 + i % 80, 3 + i % 17
        questions.append({"id": f"q{i}", "question": f"What is {a} times {b}, and is it even?", "template": {"fields": [
            {"name": "result", "type": "int", "description": "The product", "ground_truth": a * b,
             "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}},
            {"name": "even", "type": "bool", "description": "Whether the product is even",
             "ground_truth": a * b % 2 == 0, "verify_with": {"type": "BooleanMatch"}}]}})
        for model, value in (("right", a * b), ("wrong", a * b + 1)):
            responses.append({"question_id": f"q{i}", "model": model,
                              "text": f"{a} x {b} = {value}. It is {'even' if value % 2 == 0 else 'odd'}."})
    return {"format": "evalledger/benchmark@1", "name": "replay-bench", "questions": questions, "responses": responses,
            "config": {"deep_judgment_enabled": True}}


def judged_home(cases: int, folder: Path) -> tuple[Path, Any, float]:
    """(the home, the run's summary, its CPU seconds): ``benchmark(cases)`` ingested into a new home
    in ``folder`` and judged there by the offline judge (``run_until_idle``; ingest not timed)."""
    source = folder / "benchmark.json"
    source.write_text(json.dumps(benchmark(cases)))
    with ledger.open_ledger(folder / "run") as led:
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


def main(argv: list[str]) -> int:
    """Print run and replay CPU seconds and their ratio; exit 1 when the replay costs more."""
    cases = int(argv[0]) if argv else 640
    with tempfile.TemporaryDirectory() as tmp:
        _, summary, run_s = judged_home(cases, Path(tmp))
        start = time.process_time()
        result = replay_into(Path(tmp) / "run", Path(tmp) / "replayed")
        replay_s = time.process_time() - start
        copy_s = copy_cost(Path(tmp) / "run", Path(tmp) / "copy")
    ratio = replay_s / run_s
    print(f"cases: {summary.cases} judged in the run, {result.summary.judged} in the replay, "
          f"{len(result.missing)} unrecorded")
    print(f"run {run_s:.2f} s CPU, replay {replay_s:.2f} s CPU: replay/run {ratio:.2f} "
          f"(target <= {TARGET}) {'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"of the replay, copying the inputs into the new home: {copy_s:.2f} s CPU "
          f"(the rest vs the run: {(replay_s - copy_s) / run_s:.2f})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
