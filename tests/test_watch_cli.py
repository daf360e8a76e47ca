"""``evalledger watch`` through its public interface: the command run as a real process."""

from __future__ import annotations

import json
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from evalledger import ledger
from watch_support import (
    BAD_FILE,
    CLI,
    REPO,
    benchmark_file,
    cli_env,
    drop_by_rename,
    evalledger,
    events,
    responses_file,
    start_watch,
    wait_for,
    wait_stopped,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return ledger.init_home(tmp_path / "home")


def log_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logged(path: Path, event: str) -> bool:
    return path.exists() and any(r.get("event") == event for r in log_records(path))


def judged_count(home: Path) -> int:
    with ledger.open_ledger(home, readonly=True) as led:
        return sum(1 for _ in led.read(types=["case.judged"]))


def _recorded_at(event: dict) -> float:
    return datetime.fromisoformat(event["meta"]["recorded_at"].replace("Z", "+00:00")).timestamp()


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


def test_drop_a_file_get_a_report_and_bad_files_go_to_rejected(home, tmp_path):
    log = tmp_path / "watch.log"
    proc = start_watch(home, "--log-format", "json", log_path=log)
    try:
        assert wait_for(lambda: logged(log, "started"))
        drop_by_rename(home / "inbox", "broken.json", BAD_FILE)
        drop_by_rename(home / "inbox", "bench-1.json", benchmark_file(1, questions=3))
        assert wait_for(lambda: judged_count(home) == 6, 10)
        assert wait_for(lambda: "bench-1" in (home / "reports" / "index.md").read_text(), 5)
        assert proc.poll() is None, "the daemon keeps running after a bad file"
        assert (home / "rejected" / "broken.json").exists()
        assert "not valid JSON" in (home / "rejected" / "broken.json.error.txt").read_text()
        drop_by_rename(home / "inbox", "responses-1.jsonl", responses_file(1, questions=3))
        assert wait_for(lambda: judged_count(home) == 9, 10)
    finally:
        assert stop(proc) == 0
    assert list((home / "inbox").iterdir()) == []
    records = log_records(log)
    assert all({"ts", "level", "event"} <= set(r) for r in records)
    assert {r["file"]: r["status"] for r in records if r["event"] == "ingested"} == {
        "broken.json": "rejected", "bench-1.json": "accepted", "responses-1.jsonl": "accepted"}
    assert len([r for r in records if r["event"] == "ingested"]) == 3
    assert records[-1]["event"] == "stopped"
    assert any(r["event"] == "stopping" and r["signal"] == "SIGTERM" for r in records)
    assert evalledger(home, "verify").returncode == 0


def test_a_second_daemon_exits_naming_the_first_ones_pid(home, tmp_path):
    first = start_watch(home, "--log-format", "json", log_path=tmp_path / "first.log")
    try:
        assert wait_for(lambda: logged(tmp_path / "first.log", "started"))
        second = evalledger(home, "watch", check=False, timeout=20)
        assert second.returncode == 1
        assert f"pid {first.pid}" in second.stderr and "already running" in second.stderr
        assert (home / "watch.lock").read_text().strip() == str(first.pid)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    # The crashed daemon's lock file is still there, but its lock died with it.
    again = start_watch(home, "--log-format", "json", log_path=tmp_path / "again.log")
    try:
        assert wait_for(lambda: logged(tmp_path / "again.log", "started"))
        assert (home / "watch.lock").read_text().strip() == str(again.pid)
    finally:
        assert stop(again) == 0


def test_events_appended_by_another_process_wake_the_daemon_within_a_second(home, tmp_path):
    log = tmp_path / "watch.log"
    proc = start_watch(home, "--log-format", "json", log_path=log)
    try:
        assert wait_for(lambda: logged(log, "started") and logged(log, "batch"))
        source = tmp_path / "bench-2.json"
        source.write_bytes(benchmark_file(2, questions=2))
        evalledger(home, "ingest", str(source))          # from a shell, not through the inbox
        ingested_at = time.time()
        assert wait_for(lambda: judged_count(home) == 4, 5, step=0.02)
        judged_at = max(_recorded_at(e) for e in events(home, "case.judged"))
        assert judged_at - ingested_at < 1.0             # woken by the ledger files, not by a rescan
        evalledger(home, "note", "--new-stream", "case:x", "a note from a shell")
        head = evalledger(home, "verify").stdout.split()[1].split(":")[0]
        assert wait_for(lambda: f"seq {head}," in (home / "reports" / "index.md").read_text(), 2)
    finally:
        assert stop(proc) == 0
    assert not any(r["event"] == "ingested" for r in log_records(log))


def test_once_processes_everything_then_exits(home):
    drop_by_rename(home / "inbox", "bench-3.json", benchmark_file(3, questions=2))
    result = evalledger(home, "watch", "--once", check=False)
    assert result.returncode == 0, result.stderr
    assert judged_count(home) == 4
    assert (home / "reports" / "index.md").exists()
    lines = result.stderr.splitlines()
    assert " started " in lines[0] and " stopped " in lines[-1]


def test_a_deleted_inbox_is_put_back(home):
    (home / "inbox").rmdir()
    assert evalledger(home, "watch", "--once", check=False).returncode == 0
    assert (home / "inbox").is_dir()


def test_once_exits_1_when_a_file_was_rejected(home):
    drop_by_rename(home / "inbox", "broken.json", BAD_FILE)
    result = evalledger(home, "watch", "--once", check=False)
    assert result.returncode == 1
    assert (home / "rejected" / "broken.json.error.txt").exists()


def test_polling_observer_processes_dropped_files(home, tmp_path):
    log = tmp_path / "watch.log"
    proc = start_watch(home, "--polling", "--log-format", "json", log_path=log)
    try:
        assert wait_for(lambda: logged(log, "started"))
        drop_by_rename(home / "inbox", "bench-4.json", benchmark_file(4, questions=2))
        assert wait_for(lambda: judged_count(home) == 4, 10)
    finally:
        assert stop(proc) == 0
    assert [r["observer"] for r in log_records(log) if r["event"] == "started"] == ["PollingObserver"]


def test_watch_refuses_a_folder_that_is_not_a_home(tmp_path):
    result = evalledger(tmp_path / "nowhere", "watch", "--once", check=False)
    assert result.returncode == 2 and "init" in result.stderr


# --- signals with work in flight (the daemon machinery with a slow stand-in dispatcher) ----------

SLOW_DAEMON = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from evalledger.cli.watch import Callbacks, Daemon, WatchOptions
    from evalledger.cli.watch_log import Log

    home, seconds, grace = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    state = {"head": 0}

    def process(between_cases, should_stop):
        if state["head"] == 0:
            print("busy", flush=True)
            time.sleep(seconds)            # a long judge call in flight
            state["head"] = 1
            print("finished", flush=True)

    callbacks = Callbacks(ingest=lambda p: "accepted", process=process, refresh=lambda: [],
                          head=lambda: state["head"])
    outcome = Daemon(home, callbacks, WatchOptions(grace_seconds=grace), Log("json")).run()
    print("abandoned" if outcome.abandoned else "clean", flush=True)
""")


def run_slow_daemon(home: Path, seconds: float, grace: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_DAEMON, str(home), str(seconds), str(grace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=REPO)
    ready, _, _ = select.select([proc.stdout], [], [], 20)   # never hang the suite on a broken daemon
    if not ready:
        proc.kill()
        raise AssertionError(f"the daemon never got busy: {proc.communicate()[1]}")
    assert proc.stdout.readline().strip() == "busy", proc.stderr.read() if proc.poll() is not None else ""
    return proc


def test_sigterm_lets_in_flight_work_finish_within_the_grace_period(home):
    proc = run_slow_daemon(home, seconds=0.5, grace=5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out.split() == ["finished", "clean"]
    assert '"event":"stopping"' in err and '"event":"stopped"' in err


def test_sigterm_abandons_in_flight_work_after_the_grace_period(home):
    proc = run_slow_daemon(home, seconds=30, grace=0.3)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and time.monotonic() - started < 5
    assert out.split() == ["abandoned"]
    assert '"event":"abandoned"' in err


def test_a_second_sigint_abandons_at_once(home):
    proc = run_slow_daemon(home, seconds=30, grace=60)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and out.split() == ["abandoned"]


def test_sigterm_in_the_middle_of_a_real_pass_exits_0_and_a_restart_finishes_the_work(home, tmp_path):
    log = tmp_path / "watch.log"
    for i in range(4):
        drop_by_rename(home / "inbox", f"bench-{i}.json", benchmark_file(i, questions=40))
    proc = start_watch(home, "--log-format", "json", "--grace-seconds", "0", log_path=log)
    assert wait_for(lambda: logged(log, "judging"), 20, step=0.005)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    records = log_records(log)
    assert records[-1]["event"] == "stopped"
    assert any(r["event"] == "abandoned" for r in records), "the pass was still running: it was abandoned"
    assert judged_count(home) < 320
    assert evalledger(home, "verify").returncode == 0
    assert evalledger(home, "watch", "--once", check=False).returncode == 0
    judged = [e["data"]["case_id"] for e in events(home, "case.judged")]
    assert len(judged) == len(set(judged)) == 320


STOPPED_BETWEEN_COMMIT_AND_MIRROR = textwrap.dedent("""
    import os, signal, sys, time
    from evalledger.cli.main import main
    from evalledger.ledger import mirror

    real_append = mirror.Mirror.append

    def append(self, recorder, first_seq, lines, last_seq, **kwargs):
        if any(b'"case.judged"' in line for line in lines):   # a case's outcome is committed, not mirrored
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(20)                                     # the abandoning signal lands here
        return real_append(self, recorder, first_seq, lines, last_seq, **kwargs)

    mirror.Mirror.append = append
    sys.exit(main(["--home", sys.argv[1], "watch", "--once", "--grace-seconds", "0"]))
""")


def test_a_stop_between_a_commit_and_its_mirror_write_leaves_a_home_that_verifies(home):
    """The abandoning signal lands inside an append, after SQLite committed and before the mirror
    was written: the daemon completes the mirror before it exits, so ``verify`` passes at once."""
    drop_by_rename(home / "inbox", "bench-0.json", benchmark_file(0, questions=4))
    proc = subprocess.run([sys.executable, "-c", STOPPED_BETWEEN_COMMIT_AND_MIRROR, str(home)],
                          capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "abandoned" in proc.stderr
    assert events(home, "case.judged"), "the stop came after a case's commit"
    result = evalledger(home, "verify", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        assert (home / "events.jsonl").read_bytes() == b"".join(e.line() for e in led.read())


def test_sigterm_mid_pass_starts_no_new_case_and_a_restart_finishes_the_rest_once(home, tmp_path):
    """A real daemon judging 60 cases through a slow stand-in judge gets SIGTERM a few cases in:
    the cases in flight finish and commit, no new one starts, the daemon exits at once (not at
    the end of the pass, nor after the grace period), the ledger verifies, and a restart judges
    each remaining case exactly once."""
    from evalledger.stages.intake import ingest_path
    from evalledger.testing.stand_in import StandIn, StandInThread
    total = 60
    bench = tmp_path / "bench-7.json"
    bench.write_bytes(benchmark_file(7, questions=20, models=("a", "b", "c")))
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, bench).status == "accepted"
    log = tmp_path / "watch.log"
    with StandInThread(StandIn(delay=0.25)) as stand_in:
        env = {**cli_env(), "OPENAI_API_KEY": "sk-local-placeholder-key", "OPENAI_BASE_URL": stand_in.base_url}
        judge = ["--judge", "openai", "--model", "stand-in-1", "--concurrency", "4"]
        with open(log, "ab") as err:
            proc = subprocess.Popen([*CLI, "--home", str(home), "watch", "--log-format", "json", *judge],
                                    stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)
        try:
            assert wait_for(lambda: len(stand_in.requests) >= 4, 30), log.read_text()
            before = len(stand_in.requests)
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            assert proc.wait(timeout=30) == 0
            took = time.monotonic() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
        # At most the 16 cases in flight (and those a loaded machine started before the signal
        # landed) were asked for after the signal; finishing the pass would ask for about 55.
        started_after = len(stand_in.requests) - before
        assert started_after <= 20, started_after
        assert took < 5, f"the daemon took {took:.1f} s to stop: it went on with the pass"
        judged_at_stop = judged_count(home)
        assert judged_at_stop < total // 2
        assert any(r["event"] == "pass_stopped" for r in log_records(log))
        with ledger.open_ledger(home, readonly=True) as led:
            assert led.verify().ok
        # Restart: the rest is judged, each case once (quickly: the judge need not be slow now).
        stand_in.delay = 0.0
        again = evalledger(home, "watch", "--once", *judge, timeout=120, env=env)
    assert again.returncode == 0, again.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        judged = [e.data["case_id"] for e in led.read(types=["case.judged"])]
    assert len(judged) == total and len(set(judged)) == total


@pytest.mark.parametrize("how", ["home restored", "ledger.db replaced"])
def test_a_store_replaced_under_a_running_daemon_stops_it_and_loses_nothing(home, tmp_path, how):
    """A home removed and restored from a copy (or its ledger.db replaced by one) while the daemon
    ran: the daemon kept the old file open and wrote the next batch's events there, where nobody
    could read them, filed the batch's input away as processed, and left the home refused as a
    store that lost its mirror's events. Now its first write finds the file replaced: nothing is
    written, the input stays in the inbox, the daemon stops (exit 1, naming ledger.db), and a
    daemon started again judges the input."""
    log = tmp_path / "watch.log"
    proc = start_watch(home, "--log-format", "json", "--rescan-seconds", "1", log_path=log)
    try:
        assert wait_for(lambda: logged(log, "started"))
        shutil.copytree(home, tmp_path / "saved")
        if how == "home restored":
            shutil.rmtree(home)
            shutil.copytree(tmp_path / "saved", home)
        else:
            for suffix in ("-wal", "-shm"):
                Path(f"{home / 'ledger.db'}{suffix}").unlink(missing_ok=True)
            (tmp_path / "saved" / "ledger.db").replace(home / "ledger.db")
        drop_by_rename(home / "inbox", "late.benchmark.json", benchmark_file(1))
        code = wait_stopped(proc, 30, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert code == 1
    [said] = [r for r in log_records(log) if r.get("event") == "store_replaced"]
    assert "ledger.db" in said["error"] and "nothing was written" in said["error"], said
    assert (home / "inbox" / "late.benchmark.json").is_file() and not any((home / "processed").iterdir())
    assert evalledger(home, "verify").returncode == 0
    again = evalledger(home, "watch", "--once", check=False, timeout=120)
    assert again.returncode == 0, again.stderr
    assert judged_count(home) == 8 and evalledger(home, "verify").returncode == 0
