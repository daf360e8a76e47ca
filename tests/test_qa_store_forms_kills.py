"""The store forms of issue 15 (blob store, compressed mirror, compact rows) under SIGKILL at random
moments: `ingest` of a benchmark over 1 MiB (spooled, registered in parts), `run` (offline judge),
`migrate --mirror gzip --rows compact` and `replay`, each killed after a random delay drawn over the
whole command (the seed is printed; EVALLEDGER_KILL_SEED sets it, EVALLEDGER_KILL_TRIES the number of
kills a test, 1 by default). After each kill the home opens and verifies (a mirror the kill cut is
completed by the next writable open, as docs/ledger.md promises), the same command run again finishes
the work with no event twice, and the reports and the rebuilt home equal an unkilled home's byte for byte."""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger

TRIES = int(os.environ.get("EVALLEDGER_KILL_TRIES", "1"))   # each CI run draws a new seed; raise it to hunt
SEED = int(os.environ.get("EVALLEDGER_KILL_SEED", str(random.SystemRandom().randrange(1 << 30))))
FORMS = {"gzip-compact": ("--mirror", "gzip", "--rows", "compact"), "default": ()}
#: what a kill may leave that a writable open completes: a mirror behind SQLite or a torn last append
MIRROR_CUT = ("ends in the middle of a gzip member", "(or any command that writes) completes it",
              "cuts the torn line")
#: events a killed and restarted command adds by design (each start of a run records one)
PER_START = {"run.started", "run.completed", "run.interrupted"}


def big_benchmark(path: Path) -> Path:
    """A native benchmark of 1,100 questions over 1 MiB (spooled by intake, registered in two parts),
    with answers to its first 12 questions by two models: 24 cases (a run of a second or two)."""
    from evalledger.testing.arithmetic import arithmetic_benchmark
    bench = arithmetic_benchmark(1100, "big-forms")
    for question in bench["questions"]:
        question["question"] += " Show the working." + " " * 600
    bench["responses"] = [r for r in bench["responses"] if int(r["question_id"][1:]) < 12]
    path.write_text(json.dumps(bench))
    assert path.stat().st_size > 1 << 20
    return path


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``result`` after checking that the command succeeded."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def report_files(home: Path) -> dict[str, bytes]:
    """Every file ``evalledger report`` writes for ``home``, by path under reports/ (written afresh)."""
    shutil.rmtree(home / "reports", ignore_errors=True)
    ok(cli("report", home=home))
    root = home / "reports"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def headless(files: dict[str, bytes], home: Path) -> dict[str, bytes]:
    """The report files with the home's own head (seq and hash) put as HEAD. Two homes that did the
    same work at different times differ in their events' ``recorded_at``, so in their head hash, and
    a restarted run records one more ``run.started``; nothing else of a report may differ."""
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    marks = {f"seq {head.seq}, hash `{head.hash}`".encode(): b"HEAD",
             f'"hash": "{head.hash}",\n    "seq": {head.seq}\n'.encode(): b"HEAD\n"}
    out = {}
    for name, data in files.items():
        for mark, put in marks.items():
            data = data.replace(mark, put)
        assert head.hash.encode() not in data, (home, name)   # every place the head is named was put as HEAD
        out[name] = data
    return out


def event_counts(home: Path) -> dict:
    """What the home holds, for comparison with an unkilled home: events by type (less those each
    start of a command adds), judge calls by case stream, and that no id or (stream, version) repeats."""
    with ledger.open_ledger(home, readonly=True) as led:
        events = list(led.read())
    ids = collections.Counter(e.id for e in events)
    versions = collections.Counter((e.stream, e.version) for e in events)
    assert [i for i, n in ids.items() if n > 1] == [] and [v for v, n in versions.items() if n > 1] == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return {"types": collections.Counter(e.type for e in events if e.type not in PER_START),
            "calls": collections.Counter(e.stream for e in events if e.type == "judge.called")}


def verify_after_kill(home: Path, note: str) -> None:
    """The killed home opens and ``evalledger verify`` passes, or fails only for a mirror the kill
    cut, which the next writable open completes: verify then passes."""
    first = cli("verify", home=home)
    assert "Traceback" not in first.stderr, (note, first.stderr[-3000:])
    if first.returncode != 0:
        failed = [line for line in first.stdout.splitlines() if line.startswith("FAILED")]
        assert failed and all(any(cut in line for cut in MIRROR_CUT) and "events.jsonl" in line for line in failed), \
            (note, first.stdout[-3000:])
        with ledger.open_ledger(home):   # a writable open completes the mirror
            pass
        again = cli("verify", home=home)
        assert again.returncode == 0, (note, first.stdout[-2000:], again.stdout[-3000:])


class Killer:
    """Runs a command as a real process and SIGKILLs it after a random delay over its whole length."""

    def __init__(self, test: str) -> None:
        self.seed = SEED + sum(test.encode())
        self.rng = random.Random(self.seed)
        print(f"{test}: seed {self.seed} (EVALLEDGER_KILL_SEED={SEED})")

    def kill(self, args: list, home: Path, length: float) -> str:
        """Start ``evalledger --home HOME ARGS``, kill it at a random moment in ``length`` seconds
        (it may finish first), and say what happened (with the seed, for the failure messages)."""
        delay = self.rng.uniform(0, length)
        process = subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), *map(str, args)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            code = process.wait(delay)
            fate = f"finished (exit {code}) before the kill at {delay:.3f}s"
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            fate = f"killed at {delay:.3f}s"
        stderr = process.stderr.read().decode("utf-8", "replace") if process.stderr else ""
        if process.stderr:
            process.stderr.close()
        assert "Traceback" not in stderr, stderr[-3000:]
        return f"{args[0]} {fate} (seed {self.seed})"


def timed(args: list, home: Path) -> float:
    """Run ``evalledger --home HOME ARGS`` to completion; its wall time in seconds."""
    started = time.monotonic()
    ok(cli(*args, home=home))
    return time.monotonic() - started


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> dict:
    """For each form: homes at each stage (made, ingested, judged), made without a kill, with each
    command's wall time, the migrated and replayed homes, and the reports of each."""
    root = tmp_path_factory.mktemp("forms")
    source = big_benchmark(root / "big.json")
    made = {}
    for form, init in FORMS.items():
        base = root / form
        ok(cli("init", *init, home=base / "made"))
        shutil.copytree(base / "made", base / "ingested")
        times = {"ingest": timed(["ingest", source], base / "ingested")}
        shutil.copytree(base / "ingested", base / "judged")
        times["run"] = timed(["run", "--judge", "offline"], base / "judged")
        times["migrate"] = timed(["migrate", "--to", base / "migrated", "--mirror", "gzip", "--rows", "compact"],
                                 base / "judged")
        times["replay"] = timed(["replay", "--into", base / "replayed", "--quiet"], base / "judged")
        made[form] = {"base": base, "source": source, "times": times,
                      **{name: {"home": base / name, "reports": headless(report_files(base / name), base / name),
                                "counts": event_counts(base / name)}
                         for name in ("ingested", "judged", "migrated", "replayed")}}
    return made


def command(name: str, source: Path, target: Path) -> list:
    """The arguments of the command under test (``target``: migrate's or replay's new home)."""
    return {"ingest": ["ingest", source], "run": ["run", "--judge", "offline"],
            "migrate": ["migrate", "--to", target, "--mirror", "gzip", "--rows", "compact"],
            "replay": ["replay", "--into", target, "--quiet"]}[name]


#: command -> (the stage it starts from, the stage an unkilled command reaches, whether it writes a new home)
STEPS = {"ingest": ("made", "ingested", False), "run": ("ingested", "judged", False),
         "migrate": ("judged", "migrated", True), "replay": ("judged", "replayed", True)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", STEPS)
def test_a_command_killed_at_a_random_moment_then_run_again_equals_an_unkilled_one(stages, tmp_path, form, name):
    made = stages[form]
    start, reached, new_home = STEPS[name]
    killer = Killer(f"{name}-{form}")
    for attempt in range(TRIES):
        work = tmp_path / f"try-{attempt}"
        shutil.copytree(made["base"] / start, work / "home")
        target = work / "new" if new_home else work / "home"
        args = command(name, made["source"], work / "new")
        note = killer.kill(args, work / "home", made["times"][name] * 1.1)
        verify_after_kill(work / "home", note)
        if target.exists() and (target / "ledger.db").exists():
            verify_after_kill(target, note)
        again = cli(*args, home=work / "home")
        assert again.returncode == 0, (note, again.stdout[-3000:], again.stderr[-3000:])
        verify_after_kill(target, note)
        assert event_counts(target) == made[reached]["counts"], note
        reports = report_files(target)
        assert headless(reports, target) == made[reached]["reports"], note
        assert report_files(rebuilt(target, work / "rebuilt")) == reports, note


def rebuilt(home: Path, into: Path) -> Path:
    """A home rebuilt from ``home``'s mirror, as docs/ledger.md says: ``--home NEW import <mirror>``."""
    mirror = home / "events.jsonl.gz" if (home / "events.jsonl.gz").exists() else home / "events.jsonl"
    ok(cli("import", mirror, home=into))
    return into


def test_migrate_carries_on_from_each_state_a_kill_can_leave_and_refuses_anything_else(stages, tmp_path):
    source = stages["default"]["judged"]["home"]
    args = ["--mirror", "gzip", "--rows", "compact"]
    whole = tmp_path / "whole"
    ok(cli("migrate", "--to", whole, *args, home=source))
    begun = tmp_path / "begun"          # killed before ledger.db: the empty mirror and lock file
    begun.mkdir()
    (begun / "events.jsonl.gz").touch()
    (begun / "ledger.lock").touch()
    copied = tmp_path / "copied"        # killed after store.migrated, before processed/ was copied
    shutil.copytree(whole, copied)
    shutil.rmtree(copied / "processed")
    for target in (begun, copied):
        again = ok(cli("migrate", "--to", target, *args, home=source))
        assert "migrated" in again.stdout
        assert headless(report_files(target), target) == headless(report_files(whole), whole)
        assert sorted(p.name for p in (target / "processed").iterdir()) == \
            sorted(p.name for p in (whole / "processed").iterdir())
    assert event_counts(copied) == event_counts(whole)
    refused = cli("migrate", "--to", whole, "--mirror", "jsonl", "--rows", "text", home=source)
    assert refused.returncode == 2 and "not empty" in refused.stderr and "gzip mirror and compact rows" in \
        refused.stderr
    stranger = tmp_path / "stranger"    # a home with other events is never taken for a migration
    with ledger.open_ledger(ledger.init_home(stranger)) as led:
        led.append(ledger.NewEvent("case:x", "note.added", {"text": "not the source's"}))
    refused = cli("migrate", "--to", stranger, home=source)
    assert refused.returncode == 2 and "not empty" in refused.stderr, refused.stderr
