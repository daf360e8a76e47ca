"""Cost of a what-if sweep against one report rebuild, and proof that it sends no request.

Run:  python benchmarks/perf/whatif_bench.py                 (50,000 cases, 20 points)
      python benchmarks/perf/whatif_bench.py --cases 40 --points 3   (CI size)

A fresh home gets one native benchmark of N questions (deep judgment on, one response each, half
quoting the answer exactly and half paraphrasing it), judged by the offline judge through the
real dispatcher, so every judge call is recorded as a run records it. Then, in the same run:

1. Baseline: one report rebuild (``projections.rebuild``: drop the read models, fold from seq 1,
   render and write every report).
2. The what-if: ``--points`` points of ``deep_judgment_fuzzy_match_threshold`` from 0.50 by 0.025,
   answered as ``evalledger whatif`` answers them (``cli.whatif_sweep.sweep``): the read models
   read once, the recorded extraction replies scored once, every point decided from those facts,
   and only the cases whose excerpts change side replayed. A chat-completions stand-in on
   127.0.0.1 is named in ``OPENAI_BASE_URL`` the whole time; it must receive no request.

Target: the sweep costs at most 2 x the rebuild (CPU time of this process; wall clock beside it),
with the read models current (as after any ``report``). Printed beside it: the same sweep after the
read models were dropped, which folds them first. The offline judge quotes verbatim, so no excerpt
changes side here and no case needs a replay; a case that does is replayed at that point.
Exit status 0 when the target is met and no request was sent, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from evalledger import ledger, projections
from evalledger.cli.whatif_sweep import sweep
from evalledger.projections.store import ReadModelStore
from evalledger.projections.whatif import curves
from evalledger.stages.dispatcher import run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.testing.stand_in import StandIn, StandInThread

TARGET = 2.0
KEY = "deep_judgment_fuzzy_match_threshold"


def benchmark_file(path: Path, cases: int) -> Path:
    """A native benchmark of ``cases`` numeric questions with one response each."""
    questions, responses = [], []
    for i in range(cases):
        questions.append({"id": f"q{i}", "question": f"How many items are in batch {i}?",
                          "template": {"fields": [{"name": "count", "type": "int", "description": "the count",
                                                   "ground_truth": i % 97, "verify_with": {"type": "NumericExact"}}]}})
        text = (f"Batch {i} holds {i % 97} items." if i % 2 else f"There are {i % 97} items, as batch {i} shows.")
        responses.append({"question_id": f"q{i}", "model": "model-a" if i % 3 else "model-b", "text": text})
    path.write_text(json.dumps({"format": "evalledger/benchmark@1", "name": "whatif-bench",
                                "config": {"deep_judgment_enabled": True}, "questions": questions,
                                "responses": responses}))
    return path


def timed(fn):
    """(result, CPU seconds, wall seconds) of ``fn()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def drop_read_models(led) -> None:
    """Drop the home's read models, as if it had never been reported."""
    store = ReadModelStore(led)
    try:
        store.drop()
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    """Build the home, time one rebuild and the sweep, print the ratio against the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--points", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="whatif-bench-") as tmp:
        home = ledger.init_home(Path(tmp) / "home")
        with ledger.open_ledger(home) as led:
            ingest_path(led, benchmark_file(Path(tmp) / "bench.json", args.cases))
            _, build_cpu, _ = timed(lambda: run_until_idle(led))
            print(f"home: {args.cases:,} cases judged offline in {build_cpu:.1f} s CPU; "
                  f"{led.head().seq:,} events")
            _, rebuild_cpu, rebuild_wall = timed(lambda: projections.rebuild(led))
            print(f"baseline: one report rebuild {rebuild_cpu:.3f} s CPU ({rebuild_wall:.3f} s wall)")
            values = [round(0.5 + 0.025 * i, 3) for i in range(args.points)]
            with StandInThread(StandIn()) as watcher:
                os.environ["OPENAI_BASE_URL"] = watcher.base_url

                doc, sweep_cpu, sweep_wall = timed(lambda: curves(KEY, sweep(led, KEY, values)))
                drop_read_models(led)    # the same sweep on a home never reported: it folds first
                cold, cold_cpu, _ = timed(lambda: curves(KEY, sweep(led, KEY, values)))
                sent = len(watcher.requests)
    ratio = sweep_cpu / rebuild_cpu if rebuild_cpu else float("inf")
    print(f"what-if: {args.points} points over {KEY} {sweep_cpu:.3f} s CPU ({sweep_wall:.3f} s wall), "
          f"{sweep_cpu / max(args.points, 1):.3f} s a point")
    print(f"ratio sweep / rebuild: {ratio:.2f}x (target <= {TARGET:.1f}x: {'met' if ratio <= TARGET else 'NOT met'})")
    print(f"the same sweep with no read models yet (it folds them first): {cold_cpu:.3f} s CPU, "
          f"{cold_cpu / rebuild_cpu if rebuild_cpu else float('inf'):.2f}x the rebuild; same curves: {cold == doc}")
    print(f"requests sent to the server: {sent} (target 0: {'met' if sent == 0 else 'NOT met'})")
    print(f"series: {', '.join(doc['series'])}")
    return 0 if ratio <= TARGET and sent == 0 and cold == doc else 1


if __name__ == "__main__":
    sys.exit(main())
