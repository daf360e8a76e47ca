"""Generated large input files (over ``intake_read.SPOOL_ABOVE``, so intake spools them) and the
checks the large-file QA tests make of a home after each one.

The seed of every random choice is printed (``EVALLEDGER_QA_SEED`` sets it; each run draws a new
one otherwise), so a failure can be replayed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

from evalledger import ledger
from evalledger.stages.intake_read import SPOOL_ABOVE
from evalledger.stages.intake_status import status

CLI = [sys.executable, "-m", "evalledger"]
SEED = int(os.environ.get("EVALLEDGER_QA_SEED", str(random.SystemRandom().randrange(1 << 30))))
QUESTIONS = 1500            # two registration parts (intake_events.PART_QUESTIONS is 1,000)
PAD = 700                   # characters added to each question: 1,500 questions make ~1.3 MB
ANSWERED = range(0, QUESTIONS, 100)   # the questions the file's own responses answer (15 x 2 models)


def rng(test: str) -> random.Random:
    """The random source of one test, its seed printed (pytest shows it when the test fails)."""
    print(f"{test}: seed {SEED} (EVALLEDGER_QA_SEED={SEED})")
    return random.Random(f"{SEED}:{test}")


def question(i: int, note: str = "") -> dict:
    """Arithmetic question ``i``: one int field checked exactly, padded to make the file large."""
    return {"id": f"q{i}", "question": f"What is {i} plus {i}?{note} " + "." * PAD,
            "template": {"fields": [{"name": "total", "type": "int", "description": "The sum",
                                     "ground_truth": 2 * i, "verify_with": {"type": "NumericExact"}}]}}


def response(i: int, model: str, benchmark: str | None = None) -> dict:
    """Model ``model``'s answer to question ``i`` (``right`` answers right, any other model wrong)."""
    line = {"question_id": f"q{i}", "model": model, "text": f"The sum is {2 * i + (model != 'right')}."}
    return line if benchmark is None else {"benchmark": benchmark, **line}


def benchmark(name: str = "big", version: int = 1) -> dict:
    """A large native benchmark; version 2 changes every seventh question and adds one."""
    questions = [question(i, " (v2)" if version == 2 and i % 7 == 0 else "") for i in range(QUESTIONS)]
    if version == 2:
        questions.append(question(QUESTIONS))
    return {"format": "evalledger/benchmark@1", "name": name, "config": {}, "questions": questions,
            "responses": [response(i, m) for i in ANSWERED for m in ("right", "wrong")]}


def response_rows(benchmark_name: str, count: int) -> list[dict]:
    """``count`` response lines for ``benchmark_name``, a model for every QUESTIONS of them."""
    return [{**response(i % QUESTIONS, f"m{i // QUESTIONS}", benchmark_name), "text": f"answer {i} " + "z" * 150}
            for i in range(count)]


def jsonl(rows: list[dict]) -> bytes:
    """The rows as JSONL bytes."""
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def large(raw: bytes) -> bytes:
    """``raw``, checked to be large enough that intake spools it."""
    assert len(raw) > SPOOL_ABOVE, f"{len(raw)} bytes would not be spooled"
    return raw


def column_of(raw: bytes, offset: int) -> tuple[int, int]:
    """(line, column) of byte ``offset`` of an ASCII ``raw``, as JSON errors count them."""
    line = raw.count(b"\n", 0, offset) + 1
    return line, offset - (raw.rfind(b"\n", 0, offset) + 1) + 1


def cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``evalledger --home HOME ARGS`` as a subprocess, its output as text."""
    return subprocess.run([*CLI, "--home", str(home), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def event_counts(home: Path) -> Counter:
    """How many events of each type the home holds."""
    with ledger.open_ledger(home, readonly=True) as led:
        return Counter(e.type for e in led.read())


def dropped(home: Path, name: str, raw: bytes) -> Path:
    """``raw`` dropped into the home's inbox as ``name`` (written aside, then renamed in)."""
    inbox = home / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    aside = inbox / f".{name}.part"
    aside.write_bytes(raw)
    os.replace(aside, inbox / name)
    return inbox / name


def leftovers(home: Path) -> list[str]:
    """Hidden temporary files intake makes (spools, spill folders, files being taken) left anywhere in the home."""
    return sorted(str(p.relative_to(home)) for p in home.rglob(".*")
                  if p.name.startswith((".spool-", ".spill-", ".taking-", ".incoming-")))


def home_with_version_one(tmp_path: Path) -> Path:
    """A new home (``tmp_path``/home) in which ``evalledger ingest`` registered ``benchmark()``
    from the inbox: version 1 of ``big``, its cases open."""
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    first = cli(home, "ingest", dropped(home, "v1.json", large(json.dumps(benchmark()).encode())))
    assert first.returncode == 0, first.stdout + first.stderr
    return home


def assert_rejected_alone(home: Path, before: Counter, name: str, where: str, reason: str) -> str:
    """The last file ``name`` was rejected: its one error line names the file, ``where`` (a
    prefix of the place) and ``reason`` (a part of the reason); the ledger holds exactly one
    event more (its ``benchmark.rejected``); it is filed in rejected/ beside its error note.
    Returns the error line."""
    after = event_counts(home)
    assert after - before == Counter({"benchmark.rejected": 1}), after - before
    with ledger.open_ledger(home, readonly=True) as led:
        last = list(led.read(types=["benchmark.rejected"]))[-1].data
    assert last["file"] == name
    assert any(e["where"].startswith(where) and reason in e["reason"] for e in last["errors"]), last["errors"]
    note = (home / "rejected" / f"{name}.error.txt").read_text(encoding="utf-8")
    assert f"{name}: {where}" in note and reason in note, note[:2000]
    assert (home / "rejected" / name).exists() and not (home / "inbox" / name).exists()
    assert max(map(len, note.splitlines())) < 5_000, "an error line echoes a huge value"
    return note


def assert_healthy(home: Path) -> None:
    """The ledger verifies, its status is read, and intake left no temporary file behind (in
    this process: the CLI's ``verify`` and ``status`` are run by the tests that end with a good file)."""
    with ledger.open_ledger(home, readonly=True) as led:
        report = led.verify()
        assert report.ok, report.problems
        assert status(led).head["seq"] == report.head.seq
    assert leftovers(home) == []


def assert_healthy_by_cli(home: Path) -> None:
    """``evalledger verify`` passes, ``status`` runs, and intake left no temporary file behind."""
    verify = cli(home, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    shown = cli(home, "status")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stdout + shown.stderr
    assert leftovers(home) == []


def judged_and_reported(home: Path, cases: int) -> None:
    """``run --judge offline`` judges every one of ``cases`` open cases, and ``report`` writes the reports."""
    run = cli(home, "run", "--judge", "offline", timeout=300)
    assert run.returncode == 0 and f"{cases} judged, 0 failed" in run.stdout, run.stdout + run.stderr
    report = cli(home, "report")
    assert report.returncode == 0 and (home / "reports" / "index.md").exists(), report.stdout + report.stderr
    assert event_counts(home)["case.judged"] == cases
