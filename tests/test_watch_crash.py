"""Crash and restart: the daemon as a real process, SIGKILLed at random moments, restarted.

Files are dropped while it runs and while it is dead, some by rename, some written slowly in
place. Afterwards: every file ingested exactly once, every case judged exactly once, the chain
verifies, nothing is left in the inbox, and the reports equal those of a home that was never
interrupted (apart from the lines naming the ledger head).
"""

from __future__ import annotations

import collections
import os
import random
import signal
import threading
import time
from pathlib import Path

from evalledger import ledger
from watch_support import (
    BAD_FILE,
    benchmark_file,
    drop_by_rename,
    drop_slowly,
    evalledger,
    events,
    report_texts,
    responses_file,
    start_watch,
    wait_for,
)

KILLS = 12
SEED = 20261122
BENCHMARKS, QUESTIONS = 8, 12
CASES = BENCHMARKS * QUESTIONS * 2 + 4 * QUESTIONS   # two models each, plus four responses files


def inputs() -> list[tuple[str, bytes]]:
    """The files of the run, in drop order: benchmarks, responses (some before their benchmark), one bad file."""
    files = [(f"bench-{i}.json", benchmark_file(i, questions=QUESTIONS)) for i in range(BENCHMARKS)]
    files.insert(2, ("late-responses-7.jsonl", responses_file(7, questions=QUESTIONS)))  # before bench-7
    files += [(f"responses-{i}.jsonl", responses_file(i, questions=QUESTIONS)) for i in range(3)]
    files.insert(5, ("broken.json", BAD_FILE))
    return files


def uninterrupted_reports(tmp_path: Path) -> dict[str, str]:
    """The reports of a home given every file at once and processed without interruption."""
    home = ledger.init_home(tmp_path / "reference")
    for name, content in inputs():
        drop_by_rename(home / "inbox", name, content)
    evalledger(home, "watch", "--once", check=False)
    return report_texts(home)


def dropper(inbox: Path, rng: random.Random, done: threading.Event) -> None:
    """Drop every input with random pauses: odd ones by rename, even ones slowly in place."""
    for n, (name, content) in enumerate(inputs()):
        time.sleep(rng.uniform(0.2, 1.2))
        if n % 2:
            drop_by_rename(inbox, name, content)
        else:
            drop_slowly(inbox, name, content, chunks=4, pause=rng.uniform(0.02, 0.08))
    done.set()


def test_sigkill_at_random_moments_loses_nothing_and_repeats_nothing(tmp_path):
    rng = random.Random(SEED)
    home = ledger.init_home(tmp_path / "home")
    log_path = tmp_path / "watch.log"
    done = threading.Event()
    thread = threading.Thread(target=dropper, args=(home / "inbox", rng, done), daemon=True)
    thread.start()
    for n in range(KILLS):
        logged = log_path.stat().st_size if log_path.exists() else 0
        proc = start_watch(home, "--rescan-seconds", "1", "--log-format", "json", log_path=log_path)
        if n % 2:
            time.sleep(rng.uniform(0.3, 1.5))   # any moment: starting, idle, ingesting, judging
        else:
            # Up to 10 s while files still arrive: a loaded machine (a second test process beside
            # this one) starts a daemon slowly, and kills that all land before any pass test little.
            # It waits for a dispatcher pass to start ("judging" is logged after run.started): under
            # load, a kill soon after an "ingested" line landed before the pass began, every time.
            wait_for(lambda logged=logged: _pass_started_since(log_path, logged),
                     3.0 if done.is_set() else 10.0, step=0.005)
            time.sleep(rng.uniform(0.0, 0.05))  # in the middle of a dispatcher pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    assert done.wait(30)
    # A last daemon, left to finish and stopped politely.
    proc = start_watch(home, "--rescan-seconds", "1", "--log-format", "json", log_path=log_path)
    try:
        names = {name for name, _ in inputs()}
        assert wait_for(lambda: not any(p.name in names for p in (home / "inbox").iterdir()), 30)
        assert wait_for(lambda: _all_cases_finished(home), 30)
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0

    expected_files = len(inputs())
    received = events(home, "file.received", "benchmark.rejected")
    by_file = collections.Counter(e["data"]["file"] for e in received)
    assert by_file == {name: 1 for name, _ in inputs()}, "every file ingested exactly once"
    assert len(received) == expected_files

    opened = events(home, "case.opened")
    judged = collections.Counter(e["data"]["case_id"] for e in events(home, "case.judged"))
    assert len(opened) == CASES
    assert judged == {e["data"]["case_id"]: 1 for e in opened}, "every case judged exactly once"

    assert evalledger(home, "verify").returncode == 0
    assert sorted(p.name for p in (home / "rejected").iterdir()) == ["broken.json", "broken.json.error.txt"]
    assert len(list((home / "processed").iterdir())) == expected_files - 1
    started = {e["data"]["run"] for e in events(home, "run.started")}
    completed = {e["data"]["run"] for e in events(home, "run.completed")}
    assert started - completed, "some kill landed in the middle of a dispatcher pass"
    assert report_texts(home) == uninterrupted_reports(tmp_path)


def _all_cases_finished(home: Path) -> bool:
    opened = {e["data"]["case_id"] for e in events(home, "case.opened")}
    judged = {e["data"]["case_id"] for e in events(home, "case.judged")}
    return len(opened) == CASES and opened == judged


def _pass_started_since(log_path: Path, offset: int) -> bool:
    """True once the daemon logged, after ``offset``, that a dispatcher pass started judging."""
    if not log_path.exists():
        return False
    with open(log_path, "rb") as fh:
        fh.seek(offset)
        return b'"event":"judging"' in fh.read()