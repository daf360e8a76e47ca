"""Crash safety: `evalledger run` against a slow stand-in judge, killed with SIGKILL at random
moments again and again, then run to completion. The ledger verifies, no stage output appears
twice, no judge request recorded as answered is paid again, and every output (verdicts, claim
scores, credit scores) equals that of an uninterrupted run."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time

from evalledger import ledger
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import every_path_judge
from stages_support import AUDIT_LINES, RESPONSE, events, home_with, outputs, reconstruction_file, template_benchmark

KILLS = 12
SEED = int(os.environ.get("EVALLEDGER_CRASH_SEED", "20261122"))


def inputs():
    responses = [{"question_id": "q1", "model": f"model-{i}", "text": RESPONSE.replace("23 pairs", f"{21 + i} pairs")}
                 for i in range(5)]
    return [("b.json", template_benchmark(config={"deep_judgment_enabled": True}, responses=responses,
                                          rubric={"traits": [{"name": "clarity", "kind": "llm", "description": "Clear",
                                                              "min_score": 1, "max_score": 5}]})),
            ("r.json", reconstruction_file()), ("a.jsonl", AUDIT_LINES)]


def run_cli(home, base_url, concurrency: int) -> subprocess.Popen:
    """`evalledger run` in its own process; its progress lines (stderr) say when work has begun."""
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test"}
    return subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "run",
                             "--judge", "openai", "--model", "stand-in", "--concurrency", str(concurrency)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def paid(home) -> collections.Counter:
    """Request hashes answered by the server (successful, not reused from the record)."""
    return collections.Counter(e.data["request_hash"] for e in events(home, "judge.called")
                               if e.data["error"] is None and not e.data.get("source_event"))


def test_sigkill_at_random_moments_then_completion_equals_an_uninterrupted_run(tmp_path):
    rng = random.Random(SEED)
    reference = home_with(tmp_path / "reference", *inputs())
    crashed = home_with(tmp_path / "crashed", *inputs())
    with StandInThread(StandIn(delay=0.25, reply_fn=every_path_judge())) as stand_in:
        done = run_cli(reference, stand_in.base_url, 8)
        assert done.wait(60) == 0, done.stderr.read().decode()
        kills, progress = 0, []
        for _ in range(KILLS):
            process = run_cli(crashed, stand_in.base_url, 1)
            process.stderr.readline()                   # "cases 0/N ...": the run has found its work
            time.sleep(rng.uniform(0.0, 0.9))            # then a random moment inside it
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                kills += 1
            process.wait(30)
            progress.append(len(events(crashed, "judge.called")))
        final = run_cli(crashed, stand_in.base_url, 1)
        assert final.wait(60) == 0, final.stderr.read().decode()
    assert kills >= 10, f"only {kills} runs were still working when killed (seed {SEED})"
    assert progress[-1] > progress[0] > 0, progress  # the killed runs did work (and kept it)
    with ledger.open_ledger(crashed) as led:
        report = led.verify()
        assert report.ok, report.problems
    got, want = outputs(crashed), outputs(reference)
    assert len(got) == len(set(got)), [o for o, n in collections.Counter(got).items() if n > 1]
    assert sorted(got) == sorted(want)
    assert [n for n in paid(crashed).values() if n > 1] == []
    judged = {e.stream: e.data["verdict"] for e in events(crashed, "case.judged")}
    assert len(judged) == 5 and sorted(judged.values()) == ["fail"] * 4 + ["pass"]
    assert len(events(crashed, "credit.scored")) == 2 and len(events(crashed, "claim.scored")) == 3
    assert events(crashed, "stage.failed") == []
