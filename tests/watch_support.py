"""Helpers for the watch tests: benchmark files, ways of dropping them, the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from evalledger.testing.hung import wait_or_dump, with_stacks

REPO = Path(__file__).resolve().parents[1]


def cli_env() -> dict[str, str]:
    """The environment for ``python -m evalledger``: the installed package, no home variable."""
    env = {k: v for k, v in os.environ.items() if k != "EVALLEDGER_HOME"}
    return env


# What the installed ``evalledger`` script runs.
CLI = [sys.executable, "-m", "evalledger"]


def evalledger(home: Path, *args: str, check: bool = True, timeout: float = 60,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``evalledger --home HOME ARGS`` to completion (in ``env``, default ``cli_env()``)."""
    proc = subprocess.run([*CLI, "--home", str(home), *args], capture_output=True,
                          text=True, env=env or cli_env(), cwd=REPO, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"evalledger {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def start_watch(home: Path, *args: str, log_path: Path | None = None) -> subprocess.Popen:
    """Start ``evalledger watch`` as a real process; its stderr goes to ``log_path`` (appended)."""
    log_path = log_path or home.parent / "watch.log"
    # with_stacks: a daemon that will not stop can be made to write every thread's stack into its
    # log (SIGABRT), which is what ``wait_stopped`` does.
    with open(log_path, "ab") as log:
        return subprocess.Popen([*CLI, "--home", str(home), "watch", *args],
                                stdout=subprocess.DEVNULL, stderr=log, env=with_stacks(cli_env()), cwd=REPO)


def wait_stopped(proc: subprocess.Popen, timeout: float, log_path: Path, log_offset: int = 0) -> int:
    """Wait for a daemon started by ``start_watch`` to exit and return its exit code. One that has
    not exited after ``timeout`` seconds is made to write its threads' stacks (``wait_or_dump``)
    and the test fails with its log from ``log_offset`` on, so the stacks say where it hung."""
    started = time.monotonic()
    code = wait_or_dump(proc, timeout)
    if code is not None:
        return code
    with open(log_path, "rb") as fh:
        fh.seek(log_offset)
        tail = fh.read().decode("utf-8", "replace")[-20000:]
    raise AssertionError(f"daemon {proc.pid} still running {time.monotonic() - started:.1f} s after it was "
                         f"asked to stop (load average {os.getloadavg()}); its log since then, with "
                         f"every thread's stack:\n{tail}")


def benchmark_file(i: int, questions: int = 4, models: tuple[str, ...] = ("model-a", "model-b")) -> bytes:
    """A native benchmark ``bench-<i>`` whose questions ask for a number; some responses are wrong."""
    qs, responses = [], []
    for q in range(questions):
        answer = 10 * i + q
        qs.append({"id": f"q{q}", "question": f"What is {answer} written as digits?",
                   "template": {"fields": [{"name": "value", "type": "int", "description": "The number given",
                                            "ground_truth": answer, "verify_with": {"type": "NumericExact"}}]}})
        for m, model in enumerate(models):
            given = answer if (q + m) % 3 else answer + 1
            responses.append({"question_id": f"q{q}", "model": model, "text": f"The number is {given}."})
    return json.dumps({"format": "evalledger/benchmark@1", "name": f"bench-{i}", "questions": qs,
                       "responses": responses}, indent=1).encode()


def responses_file(i: int, questions: int = 4, model: str = "model-c") -> bytes:
    """JSONL responses of one more model for ``bench-<i>``."""
    lines = [{"benchmark": f"bench-{i}", "question_id": f"q{q}", "model": model,
              "text": f"I believe it is {10 * i + q}."} for q in range(questions)]
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


BAD_FILE = b'{"format": "evalledger/benchmark@1", "name": "broken", "questions": ['


def drop_by_rename(inbox: Path, name: str, content: bytes) -> None:
    """The safe way: write under a hidden temporary name, then rename into place."""
    tmp = inbox / f".{name}.part"
    tmp.write_bytes(content)
    os.rename(tmp, inbox / name)


def drop_slowly(inbox: Path, name: str, content: bytes, chunks: int = 5, pause: float = 0.1) -> None:
    """Write the file in place, a chunk at a time, keeping it open (as a slow copy does)."""
    step = max(1, len(content) // chunks + 1)
    with open(inbox / name, "wb") as fh:
        for at in range(0, len(content), step):
            fh.write(content[at:at + step])
            fh.flush()
            time.sleep(pause)


def events(home: Path, *types: str) -> list[dict]:
    """The ledger's events of these types, read through ``evalledger log --json``."""
    args = ["log", "--json"] + [a for t in types for a in ("--type", t)]
    return [json.loads(line) for line in evalledger(home, *args).stdout.splitlines() if line.strip()]


def wait_for(condition, timeout: float = 10.0, step: float = 0.05) -> bool:
    """Poll ``condition`` until true or ``timeout``; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())


# The one key of aggregate-stats.json that may differ from an uninterrupted run's: the head it was
# built from (the issue allows only the head line to differ).
HISTORY_KEYS = ("ledger_head",)


def report_texts(home: Path) -> dict[str, str]:
    """Every report file by relative path, without its head line (markdown: "Built from ledger head")
    and, in JSON, without the HISTORY_KEYS."""
    reports = home / "reports"
    out = {}
    for path in sorted(p for p in reports.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            data = json.loads(text)
            for key in HISTORY_KEYS:
                data.pop(key, None)
            text = json.dumps(data, indent=1, sort_keys=True)
        else:
            text = "\n".join(line for line in text.splitlines() if "ledger head" not in line.lower())
        out[str(path.relative_to(reports))] = text
    return out
