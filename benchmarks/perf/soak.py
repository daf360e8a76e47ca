"""Soak: the watch daemon under random SIGTERM and SIGKILL while files, hostile ones among them, drop in.

Run:  python benchmarks/perf/soak.py --minutes 10          (a long soak)
      python benchmarks/perf/soak.py --seconds 8           (a CI-sized run)

For the given time a real ``evalledger watch`` runs on a fresh home, and is stopped again and
again at random moments: SIGTERM (with a random ``--grace-seconds``, often 0: in-flight work is
abandoned) or SIGKILL. A dropper thread keeps dropping files into the inbox meanwhile: native
benchmarks, responses files (some before their benchmark), and hostile files (cut JSON, binary
bytes, invalid UTF-8, deep nesting, duplicate keys, an empty file, a name with a newline). After
each restart it prints the home's ``status`` line. At the end one ``watch --once`` drains what is
left, and the script prints:

- files dropped, and whether each was ingested exactly once (one ``file.received`` or
  ``benchmark.rejected`` for its bytes);
- whether every case was judged exactly once (one ``case.judged`` per ``case.opened``);
- stuck cases: opened and neither judged nor failed, or passed over by a stage's tracking
  position (must be 0);
- hung daemons: stopped and still running 30 s after their grace period (must be 0; their
  threads' stacks go to the watch log);
- the ``verify`` result.

Exit status 0 when all of these hold, 1 otherwise. Nothing needs the network (offline judge).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from evalledger import ledger
from evalledger.stages.dispatcher import STAGES
from evalledger.stages.intake_status import case_states
from evalledger.testing.hung import wait_or_dump, with_stacks

CLI = [sys.executable, "-m", "evalledger"]
HANG_SECONDS = 30   # a stopped daemon must exit within its grace period plus this


def benchmark(i: int, questions: int) -> bytes:
    """A native benchmark ``soak-<i>`` of numeric questions with two models' responses."""
    qs, responses = [], []
    for q in range(questions):
        answer = 100 * i + q
        qs.append({"id": f"q{q}", "question": f"What is {answer}?",
                   "template": {"fields": [{"name": "value", "type": "int", "description": "The number",
                                            "ground_truth": answer, "verify_with": {"type": "NumericExact"}}]}})
        for model, given in (("model-a", answer), ("model-b", answer + q % 2)):
            responses.append({"question_id": f"q{q}", "model": model, "text": f"It is {given}."})
    return json.dumps({"format": "evalledger/benchmark@1", "name": f"soak-{i}", "questions": qs,
                       "responses": responses}, indent=1).encode()


def responses(i: int, questions: int) -> bytes:
    """JSONL responses of a third model for ``soak-<i>``."""
    return b"".join(json.dumps({"benchmark": f"soak-{i}", "question_id": f"q{q}", "model": "model-c",
                                "text": f"Maybe {100 * i + q}."}).encode() + b"\n" for q in range(questions))


def hostile(n: int) -> tuple[str, bytes]:
    """The n-th hostile file: a name and bytes intake must reject (each different, so each counts)."""
    kinds = [
        ("cut.json", b'{"format": "evalledger/benchmark@1", "name": "cut", "questions": ['),
        ("binary.json", bytes(range(256)) * 4),
        ("latin1.json", '{"name": "caf\xe9"}'.encode("latin-1")),
        ("deep.json", b"[" * 5000 + b"]" * 5000),
        ("dupes.json", b'{"format": "evalledger/benchmark@1", "name": "a", "name": "b", "questions": []}'),
        ("empty.json", b""),
        ("new\nline.json", b'{"format": "evalledger/benchmark@1"}'),
    ]
    name, content = kinds[n % len(kinds)]
    return f"h{n}-{name}", content + b" " * (n // len(kinds))   # trailing spaces keep the bytes unique


def plan(count: int, questions: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """The files to drop, in order: benchmarks, their responses (a few before them), hostile files."""
    files: list[tuple[str, bytes]] = []
    for i in range(count):
        files.append((f"soak-{i}.json", benchmark(i, questions)))
        if i % 3 == 0:
            at = max(0, len(files) - rng.randint(1, 3))   # sometimes before its benchmark: pending first
            files.insert(at, (f"soak-{i}-more.jsonl", responses(i, questions)))
        if i % 2 == 0:
            files.append(hostile(i // 2))
    return files


def drop(inbox: Path, name: str, content: bytes) -> None:
    """Write under a hidden name, then rename in (as a careful producer does)."""
    tmp = inbox / f".{hashlib.sha256(name.encode()).hexdigest()[:12]}.part"
    tmp.write_bytes(content)
    os.replace(tmp, inbox / name)


def dropper(inbox: Path, files: list[tuple[str, bytes]], rng: random.Random, stop: threading.Event,
            dropped: list) -> None:
    """Drop the planned files one by one with random pauses until all are dropped or told to stop."""
    for name, content in files:
        if stop.wait(rng.uniform(0.05, 0.4)):
            return
        drop(inbox, name, content)
        dropped.append((name, content))


def evalledger(home: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI on ``home`` to completion."""
    return subprocess.run([*CLI, "--home", str(home), *args], capture_output=True, text=True, timeout=600)


def status_line(home: Path) -> str:
    """The ``cases:`` line of ``evalledger status``."""
    out = evalledger(home, "status").stdout
    return next((line for line in out.splitlines() if line.startswith("cases:")), out.strip()[-200:])


def soak(home: Path, seconds: float, rng: random.Random, files: list[tuple[str, bytes]], log) -> dict:
    """Run the daemon for ``seconds`` under random signals while files drop; returns counts."""
    inbox = home / "inbox"
    stop, dropped = threading.Event(), []
    thread = threading.Thread(target=dropper, args=(inbox, files, rng, stop, dropped), daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    signals = collections.Counter()
    hung: list[int] = []
    with open(home.parent / "watch.log", "ab") as watch_log:
        while time.monotonic() < deadline:
            grace = rng.choice(["0", "0", "0.2", "1"])
            proc = subprocess.Popen([*CLI, "--home", str(home), "watch", "--rescan-seconds", "1",
                                     "--grace-seconds", grace, "--log-format", "json"],
                                    stdout=subprocess.DEVNULL, stderr=watch_log,
                                    env=with_stacks(dict(os.environ)))
            time.sleep(rng.uniform(0.3, 2.0))
            sig = rng.choice([signal.SIGTERM, signal.SIGTERM, signal.SIGKILL])
            proc.send_signal(sig)
            signals[sig.name] += 1
            if wait_or_dump(proc, HANG_SECONDS + float(grace)) is None:
                # A daemon that does not stop is a finding; its threads' stacks went to the watch
                # log (wait_or_dump), for whoever looks into it.
                hung.append(proc.pid)
                log(f"HUNG    daemon {proc.pid} did not stop within {HANG_SECONDS:g} s of {sig.name}; "
                    f"its threads' stacks are in {home.parent / 'watch.log'}")
            log(f"{sig.name:<7} after restart {sum(signals.values()):>3}: {status_line(home)}")
    stop.set()
    thread.join()
    drained = evalledger(home, "watch", "--once")
    log(f"final watch --once: exit {drained.returncode}: {status_line(home)}")
    return {"signals": signals, "dropped": dropped, "hung": hung}


def check(home: Path, dropped: list[tuple[str, bytes]]) -> dict:
    """The exactly-once and stuck-case findings, read from the ledger."""
    with ledger.open_ledger(home, readonly=True) as led:
        outcomes = collections.Counter(e.data["sha256"] for e in led.read(types=["file.received", "benchmark.rejected"]))
        opened = [e for e in led.read(types=["case.opened"])]
        judged = collections.Counter(e.data["case_id"] for e in led.read(types=["case.judged"]))
        states = case_states(led)
        positions = {s.kind: led.tracking_position(s.tracking) for s in STAGES}
    shas = [hashlib.sha256(content).hexdigest() for _, content in dropped]
    unfinished = {cid for cid, state in states.items() if state == "opened"}
    passed_over = {e.data["case_id"] for e in opened
                   if e.data["case_id"] in unfinished and e.seq <= positions[e.data["kind"]]}
    return {
        "files": len(dropped),
        "ingested_once": sum(1 for sha in shas if outcomes[sha] == 1),
        "cases": len(opened),
        "judged_once": sum(1 for e in opened if judged[e.data["case_id"]] == 1),
        "stuck": len(unfinished | passed_over),
    }


def main(argv: list[str] | None = None) -> int:
    """Soak, check, print the figures; 0 when nothing was lost, repeated or stuck and verify passes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=None, help="how long to soak (default 5)")
    parser.add_argument("--seconds", type=float, default=None, help="how long to soak, in seconds (CI sizes)")
    parser.add_argument("--benchmarks", type=int, default=None, help="benchmarks to drop (default: by duration)")
    parser.add_argument("--questions", type=int, default=6, help="questions per benchmark (default 6)")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--keep", metavar="DIR", default=None, help="soak in DIR and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else 60 * (args.minutes if args.minutes is not None else 5)
    count = args.benchmarks or max(2, int(seconds / 2))
    rng = random.Random(args.seed)
    files = plan(count, args.questions, rng)
    with tempfile.TemporaryDirectory(prefix="evalledger-soak-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        home = ledger.init_home(root / "home")
        print(f"soak: {seconds:g} s, {len(files)} files planned, home {home}")
        run = soak(home, seconds, rng, files, print)
        found = check(home, run["dropped"])
        verify = evalledger(home, "verify")
    signals = ", ".join(f"{n} {name}" for name, n in sorted(run["signals"].items()))
    print(f"signals: {signals or 'none'}")
    print(f"files dropped: {found['files']}")
    print(f"ingested exactly once: {found['ingested_once']} of {found['files']}")
    print(f"cases judged exactly once: {found['judged_once']} of {found['cases']}")
    print(f"stuck cases: {found['stuck']} (target 0)")
    print(f"hung daemons: {len(run['hung'])} (target 0)")
    verdict = "ok" if verify.returncode == 0 else (verify.stdout.strip().splitlines() or ["FAILED ?"])[0]
    print(f"verify: {verdict}")
    good = (found["ingested_once"] == found["files"] and found["judged_once"] == found["cases"]
            and found["stuck"] == 0 and not run["hung"] and verify.returncode == 0)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
