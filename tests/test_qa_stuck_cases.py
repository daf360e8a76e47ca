"""Issue 13 item 1: no case is stuck after a signal, and pending work does not depend on tracking.

A stage's tracking position is a low watermark: every case of that stage at or below it is
finished. The daemon abandons a pass by raising in its main thread wherever it is, an append
included; the position must then stay below the case whose commit did not happen.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.ledger import Ledger
from evalledger.stages.dispatcher import STAGES, RunSettings, find_pending, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.intake_status import case_states
from evalledger.stages.interrupts import interrupt_behind
from evalledger.stages.judge.offline import HEURISTICS
from stages_support import InterruptedOnce
from watch_support import benchmark_file, drop_by_rename, evalledger, start_watch, wait_for, wait_stopped


class Interrupted(BaseException):
    """What a signal handler raises in the middle of an append (as the daemon's ``Abandoned``)."""


def passed_over(led: Ledger) -> list[tuple[str, int, str]]:
    """(stage, seq, case id) of every unfinished case at or below its stage's tracking position."""
    states = case_states(led)
    positions = {s.kind: (s.name, led.tracking_position(s.tracking)) for s in STAGES}
    out = []
    for opened in led.read(types=["case.opened"]):
        stage, position = positions[opened.data["kind"]]
        if states[opened.data["case_id"]] == "opened" and opened.seq <= position:
            out.append((stage, opened.seq, opened.data["case_id"]))
    return out


@pytest.mark.parametrize("nth", [1, 3, 7])
def test_an_append_interrupted_by_a_signal_never_lets_tracking_pass_the_case(tmp_path, nth):
    home = ledger.init_home(tmp_path / "home")
    for i in range(3):
        (tmp_path / f"bench-{i}.json").write_bytes(benchmark_file(i, questions=8))
    with ledger.open_ledger(home) as led:
        for i in range(3):
            assert ingest_path(led, tmp_path / f"bench-{i}.json").status == "accepted"
        faulty = InterruptedOnce(led, nth, Interrupted)
        with pytest.raises(Interrupted):
            run_until_idle(faulty, RunSettings(max_cases_in_flight=4))
        states = case_states(led)
        assert list(states.values()).count("opened") >= 1, "the interrupted case is unfinished"
        assert passed_over(led) == []
        # A scan that trusts tracking (no reconcile) still finds every unfinished case.
        unfinished = {cid for cid, state in states.items() if state == "opened"}
        assert {o.data["case_id"] for _, o, _ in find_pending(led).cases} == unfinished


def raise_as_python_wraps_it():
    """Raise ``Interrupted`` where Python 3.11 turns it into a ``RuntimeError`` caused by it: inside
    ``__set_name__``, which pydantic runs while it builds a model class (a lazily imported prompt
    module; CI once recorded a case's ``stage.failed`` "Error calling __set_name__" for a SIGTERM)."""
    class Hook:
        def __set_name__(self, owner, name):
            raise Interrupted()
    type("Reply", (), {"answer": Hook()})


def test_a_signal_python_wrapped_in_another_exception_is_still_a_stop_not_a_failure():
    try:
        raise_as_python_wraps_it()
    except BaseException as exc:   # noqa: BLE001 - what it arrives as depends on the Python version
        assert interrupt_behind(exc) is not None and isinstance(interrupt_behind(exc), Interrupted)
    assert interrupt_behind(ValueError("a real failure")) is None


@pytest.mark.parametrize("in_flight", [1, 4])
def test_an_append_interrupted_inside_a_wrapping_exception_fails_no_case(tmp_path, in_flight):
    home = ledger.init_home(tmp_path / "home")
    (tmp_path / "bench.json").write_bytes(benchmark_file(1, questions=8))
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, tmp_path / "bench.json").status == "accepted"
        with pytest.raises(Interrupted):   # the stop goes on up, as the daemon's Abandoned must
            run_until_idle(InterruptedOnce(led, 2, raise_as_python_wraps_it),
                           RunSettings(max_cases_in_flight=in_flight))
        assert not list(led.read(types=["stage.failed"])), "our own stop recorded as a case's failure"
        assert passed_over(led) == []
        assert run_until_idle(led).failed == 0
        assert len(list(led.read(types=["case.judged"]))) == 16


def test_a_judge_call_interrupted_inside_a_wrapping_exception_fails_no_case(tmp_path, monkeypatch):
    home = ledger.init_home(tmp_path / "home")
    (tmp_path / "bench.json").write_bytes(benchmark_file(1, questions=4))
    calls = []

    def parse_then_stop(request):
        calls.append(request)
        if len(calls) == 3:
            raise_as_python_wraps_it()
        return real_parse(request)

    real_parse = HEURISTICS["parse"]
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, tmp_path / "bench.json").status == "accepted"
        monkeypatch.setitem(HEURISTICS, "parse", parse_then_stop)
        with pytest.raises(Interrupted):
            run_until_idle(led, RunSettings(max_cases_in_flight=1))
        assert not list(led.read(types=["stage.failed"])), "our own stop recorded as a case's failure"
        assert not [e for e in led.read(types=["judge.called"]) if e.data.get("error")], \
            "our own stop recorded as a failed judge call"
        monkeypatch.setitem(HEURISTICS, "parse", real_parse)
        assert run_until_idle(led).failed == 0
        assert len(list(led.read(types=["case.judged"]))) == 8


def test_a_forged_tracking_position_is_reconciled_and_status_says_so(home, run_cli, tmp_path):
    (tmp_path / "bench.json").write_bytes(benchmark_file(1, questions=3))
    assert run_cli("ingest", tmp_path / "bench.json", home=home).returncode == 0
    with sqlite3.connect(home / "ledger.db") as conn:
        conn.execute("insert or replace into tracking values('stage:template', 999999)")
    ran = run_cli("run", home=home)
    assert ran.returncode == 0, ran.stderr
    assert "nothing pending" not in ran.stdout + ran.stderr
    shown = run_cli("status", home=home)
    assert "cases: 0 opened, 6 judged" in shown.stdout
    line = next(line for line in shown.stdout.splitlines() if line.startswith("reconciled:"))
    assert "6 cases of stage template" in line and "seq 999999" in line
    data = json.loads(run_cli("status", "--json", home=home).stdout)
    assert [(r["stage"], r["cases"]) for r in data["reconciled"]] == [("template", 6)]
    assert run_cli("run", home=home).returncode == 0   # nothing more, and nothing recorded twice
    again = json.loads(run_cli("status", "--json", home=home).stdout)
    assert len(again["reconciled"]) == 1


KILLS = 32
SEED = 20261123


def test_sigterm_at_random_points_leaves_no_case_stuck_and_a_restart_finishes_each_once(tmp_path):
    rng = random.Random(SEED)
    home = ledger.init_home(tmp_path / "home")
    log_path = tmp_path / "watch.log"
    dropped = 0
    for n in range(KILLS):
        if n % 2 == 0:   # new work for the next daemons: one benchmark of 12 cases
            drop_by_rename(home / "inbox", f"bench-{dropped}.json", benchmark_file(dropped, questions=6))
            dropped += 1
        offset = log_path.stat().st_size if log_path.exists() else 0
        proc = start_watch(home, "--grace-seconds", "0", "--rescan-seconds", "1", "--log-format", "json",
                           log_path=log_path)
        if n % 3:
            wait_for(lambda at=offset: _logged_since(log_path, at, b'"event":"judging"'), 5.0, step=0.002)
            time.sleep(rng.uniform(0.0, 0.03))   # in the middle of the pass
        else:
            time.sleep(rng.uniform(0.2, 0.9))    # any moment: starting, ingesting, judging, idle
        os.kill(proc.pid, signal.SIGTERM)
        # -SIGTERM: the signal came before the daemon installed its handlers (the default action)
        assert wait_stopped(proc, 20, log_path, offset) in (0, -signal.SIGTERM)
        with ledger.open_ledger(home, readonly=True) as led:
            assert passed_over(led) == [], f"after SIGTERM {n + 1}: tracking passed an unfinished case"
    assert evalledger(home, "watch", "--once", check=False).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        opened = [e.data["case_id"] for e in led.read(types=["case.opened"])]
        judged = [e.data["case_id"] for e in led.read(types=["case.judged"])]
        assert not list(led.read(types=["run.reconciled"])), "no reconcile found anything to repair"
    assert len(opened) == dropped * 12
    assert sorted(judged) == sorted(opened), "every case judged exactly once"
    assert evalledger(home, "verify").returncode == 0
    assert b'"event":"abandoned"' in log_path.read_bytes(), "some SIGTERM landed in a running pass"


def _logged_since(log_path: Path, offset: int, needle: bytes) -> bool:
    with open(log_path, "rb") as fh:
        fh.seek(offset)
        return needle in fh.read()


@pytest.mark.parametrize("how", [["run", "--judge", "replay"], ["run", "--set", "judge_backend=replay"],
                                 ["watch", "--once", "--judge", "replay"]])
def test_the_replay_judge_on_a_home_itself_is_a_usage_error_pointing_to_replay(home, run_cli, tmp_path, how):
    (tmp_path / "bench.json").write_bytes(benchmark_file(1, questions=2))
    assert run_cli("ingest", tmp_path / "bench.json", home=home).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    done = run_cli(*how, home=home)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "evalledger --home SOURCE replay --into DIR" in line
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.head() == head, "nothing was written"
