"""The watch daemon's machinery with real observers on real folders and stand-in callbacks.

The stand-ins are plain functions: ``ingest`` records the bytes it read and moves the file to
processed/, as intake does; ``process`` and ``refresh`` count their calls. The ledger is real,
so ledger watching is tested with appends from another process.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.cli.watch import Callbacks, Daemon, WatchOptions
from evalledger.cli.watch_inbox import InboxTracker, is_ignored, scan_inbox
from evalledger.cli.watch_log import Log
from watch_support import drop_by_rename, evalledger, wait_for


class StandIn:
    """Plain-function callbacks that behave like intake/dispatcher/projections, and record calls."""

    def __init__(self, home: Path, led=None, fail_on: str | None = None):
        self.home = home
        self.led = led
        self.fail_on = fail_on
        self.read: dict[str, bytes] = {}
        self.ingest_count: dict[str, int] = {}
        self.process_calls = 0
        self.refresh_calls = 0
        self.fail_process = False
        self.long_pass = False
        self.long_pass_until = None
        self.pass_running = False
        self.ingested_during_pass: list[str] = []

    def ingest(self, path: Path):
        if self.fail_on and path.name == self.fail_on:
            raise ValueError(f"stand-in cannot read {path.name}")
        self.read[path.name] = path.read_bytes()
        if self.pass_running:
            self.ingested_during_pass.append(path.name)
        self.ingest_count[path.name] = self.ingest_count.get(path.name, 0) + 1
        path.rename(self.home / "processed" / path.name)
        return "accepted"

    def process(self, between_cases, should_stop=lambda: False):
        self.process_calls += 1
        if self.fail_process:
            raise RuntimeError("stand-in dispatcher failed")
        if self.long_pass:   # a pass of slow cases, calling the hook as each one finishes
            self.long_pass = False
            self.pass_running = True
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self.long_pass_until not in self.read:
                time.sleep(0.02)
                between_cases()
            self.pass_running = False
        return None

    def refresh(self):
        self.refresh_calls += 1
        return []

    def head(self):
        return self.led.head() if self.led is not None else 0

    def callbacks(self) -> Callbacks:
        return Callbacks(ingest=self.ingest, process=self.process, refresh=self.refresh, head=self.head)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return ledger.init_home(tmp_path / "home")


def start_daemon(home: Path, standin: StandIn, **options) -> tuple[Daemon, threading.Thread, io.StringIO]:
    """Run a daemon in a thread (no signal handlers there); stop it with ``daemon.stop()``."""
    logs = io.StringIO()
    daemon = Daemon(home, standin.callbacks(), WatchOptions(**options), Log("json", logs))
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    assert wait_for(lambda: '"event":"started"' in logs.getvalue())
    return daemon, thread, logs


def stop_daemon(daemon: Daemon, thread: threading.Thread) -> None:
    daemon.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()


def log_events(logs: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in logs.getvalue().splitlines() if line.strip()]


# --- ignore rules and the tracker ---------------------------------------------------------------

@pytest.mark.parametrize("name", [".hidden.json", "bench.json.tmp", "bench.json.part", "bench.json~", ".x"])
def test_hidden_and_temporary_names_are_ignored(name):
    assert is_ignored(name)


@pytest.mark.parametrize("name", ["bench.json", "answers.jsonl", "checkpoint.jsonld", "tmp.json", "part"])
def test_ordinary_names_are_not_ignored(name):
    assert not is_ignored(name)


def test_scan_lists_only_regular_visible_files(tmp_path):
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / ".a.json.part").write_text("{")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in scan_inbox(tmp_path)] == ["a.json", "b.json"]


def test_tracker_waits_for_a_writer_to_close_the_file(tmp_path):
    tracker = InboxTracker(quiet=0.05, settle=5.0)
    path = tmp_path / "slow.json"
    path.write_text('{"a": ')
    tracker.on_event(path, "created")
    tracker.on_event(path, "modified")
    time.sleep(0.1)
    assert tracker.ready() == []
    tracker.on_event(path, "closed")
    assert tracker.ready() == []          # closed just now: it must hold still for `quiet` first
    time.sleep(0.08)
    assert tracker.ready() == [path]


def test_tracker_does_not_wait_for_a_close_after_a_renamed_file_changes(tmp_path):
    tracker = InboxTracker(quiet=0.05, settle=5.0)
    path = tmp_path / "renamed.json"
    path.write_text("{}")
    tracker.on_event(path, "moved")
    time.sleep(0.06)
    path.chmod(0o600)                      # inotify: IN_ATTRIB, which watchdog reports as modified
    tracker.on_event(path, "modified")
    assert tracker.ready() == []          # it changed: quiet again
    time.sleep(0.12)
    assert tracker.ready() == [path]      # no close will come, and none is waited for


def test_tracker_waits_for_a_found_file_to_settle(tmp_path):
    tracker = InboxTracker(quiet=0.05, settle=0.4)
    path = tmp_path / "found.json"
    path.write_text("{}")
    tracker.found(path)
    assert tracker.ready() == []          # written a moment ago by someone we know nothing about
    time.sleep(0.45)
    assert tracker.ready() == [path]


def test_tracker_sees_a_size_change_between_probes(tmp_path):
    tracker = InboxTracker(quiet=0.05, settle=5.0)
    path = tmp_path / "moved.json"
    path.write_text("{}")
    tracker.on_event(path, "moved")
    assert tracker.ready() == []
    with open(path, "a") as fh:
        fh.write(" ")
    time.sleep(0.06)
    assert tracker.ready() == []          # changed since the last probe: quiet starts again
    time.sleep(0.06)
    assert tracker.ready() == [path]


def test_tracker_ignores_symlinks(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    old = time.time() - 60
    os.utime(target, (old, old))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    tracker = InboxTracker(quiet=0.0, settle=0.0)
    tracker.on_event(link, "moved")
    tracker.found(target)
    assert tracker.ready() == [target] and not (tmp_path / "link.json") in tracker.files


def test_tracker_drops_files_that_vanish(tmp_path):
    tracker = InboxTracker()
    path = tmp_path / "gone.json"
    tracker.found(path)
    assert tracker.ready() == [] and not tracker.pending()


# --- the daemon on a real inbox -----------------------------------------------------------------

def test_renamed_in_file_is_ingested_once_and_whole(home):
    standin = StandIn(home)
    daemon, thread, logs = start_daemon(home, standin)
    try:
        content = b'{"benchmark": "renamed"}' * 1000
        drop_by_rename(home / "inbox", "renamed.json", content)
        assert wait_for(lambda: "renamed.json" in standin.read, 3.0)
        time.sleep(0.3)
    finally:
        stop_daemon(daemon, thread)
    assert standin.read["renamed.json"] == content
    assert standin.ingest_count == {"renamed.json": 1}
    assert (home / "processed" / "renamed.json").exists()
    ingested = [e for e in log_events(logs) if e["event"] == "ingested"]
    assert [(e["file"], e["status"]) for e in ingested] == [("renamed.json", "accepted")]


def test_file_written_slowly_in_place_is_read_only_when_complete(home):
    standin = StandIn(home)
    daemon, thread, _ = start_daemon(home, standin, quiet=0.2)
    chunks = [b'{"part": %d, "pad": "%s"}\n' % (i, b"x" * 500) for i in range(6)]
    try:
        with open(home / "inbox" / "slow.jsonl", "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
                fh.flush()
                time.sleep(0.35)       # longer than `quiet`: only the open handle holds the daemon back
        assert wait_for(lambda: "slow.jsonl" in standin.read, 3.0)
    finally:
        stop_daemon(daemon, thread)
    assert standin.read["slow.jsonl"] == b"".join(chunks)
    assert standin.ingest_count == {"slow.jsonl": 1}


def test_temporary_names_wait_until_renamed(home):
    standin = StandIn(home)
    daemon, thread, _ = start_daemon(home, standin)
    try:
        for name in (".hidden.json", "a.json.tmp", "b.json.part", "c.json~"):
            (home / "inbox" / name).write_text("{}")
        time.sleep(0.8)
        assert standin.read == {}
        os.rename(home / "inbox" / "a.json.tmp", home / "inbox" / "a.json")
        assert wait_for(lambda: "a.json" in standin.read, 3.0)
    finally:
        stop_daemon(daemon, thread)
    assert set(standin.read) == {"a.json"}


def test_files_present_at_start_are_ingested(home):
    for name in ("one.json", "two.json"):
        (home / "inbox" / name).write_text("{}")
    old = time.time() - 60
    os.utime(home / "inbox" / "one.json", (old, old))
    standin = StandIn(home)
    daemon, thread, _ = start_daemon(home, standin)
    try:
        assert wait_for(lambda: len(standin.read) == 2, 4.0)
    finally:
        stop_daemon(daemon, thread)
    assert standin.ingest_count == {"one.json": 1, "two.json": 1}


def test_periodic_rescan_finds_files_the_watcher_missed(home):
    standin = StandIn(home)
    daemon, thread, _ = start_daemon(home, standin, rescan_seconds=0.5, settle=0.2)
    daemon.inbox_event = lambda path, kind: None    # the watcher loses every event from now on
    try:
        drop_by_rename(home / "inbox", "missed.json", b"{}")
        assert wait_for(lambda: "missed.json" in standin.read, 3.0)
    finally:
        stop_daemon(daemon, thread)


def test_polling_observer_ingests_renamed_files(home):
    standin = StandIn(home)
    daemon, thread, logs = start_daemon(home, standin, polling=True, settle=0.3)
    try:
        drop_by_rename(home / "inbox", "polled.json", b'{"x": 1}')
        assert wait_for(lambda: "polled.json" in standin.read, 4.0)
    finally:
        stop_daemon(daemon, thread)
    assert [e["observer"] for e in log_events(logs) if e["event"] == "started"] == ["PollingObserver"]


def test_ingest_errors_are_logged_and_the_daemon_keeps_running(home):
    standin = StandIn(home, fail_on="bad.json")
    daemon, thread, logs = start_daemon(home, standin)
    try:
        drop_by_rename(home / "inbox", "bad.json", b"{}")
        assert wait_for(lambda: any(e["event"] == "ingest_failed" for e in log_events(logs)), 3.0)
        drop_by_rename(home / "inbox", "good.json", b"{}")
        assert wait_for(lambda: "good.json" in standin.read, 3.0)
    finally:
        stop_daemon(daemon, thread)
    failed = [e for e in log_events(logs) if e["event"] == "ingest_failed"]
    assert len(failed) == 1 and failed[0]["file"] == "bad.json" and "cannot read" in failed[0]["error"]
    assert (home / "inbox" / "bad.json").exists()     # nothing lost: it stays where it was


def test_a_failing_dispatcher_is_logged_and_retried_at_the_next_rescan(home):
    with ledger.open_ledger(home) as led:
        standin = StandIn(home, led)
        standin.fail_process = True
        daemon, thread, logs = start_daemon(home, standin, rescan_seconds=0.6)
        try:
            assert wait_for(lambda: standin.process_calls >= 1)
            time.sleep(0.3)
            assert standin.process_calls == 1             # no hot loop on a failing pass
            standin.fail_process = False
            assert wait_for(lambda: standin.process_calls >= 2, 2.0)
        finally:
            stop_daemon(daemon, thread)
    assert [e["event"] for e in log_events(logs)].count("batch_failed") == 1


def test_appends_from_another_process_wake_the_dispatcher_within_a_second(home):
    with ledger.open_ledger(home) as led:
        standin = StandIn(home, led)
        daemon, thread, _ = start_daemon(home, standin)
        try:
            assert wait_for(lambda: standin.process_calls >= 1)
            time.sleep(0.5)
            idle_calls = standin.process_calls
            time.sleep(1.0)
            assert standin.process_calls == idle_calls   # idle: the dispatcher is not polled
            evalledger(home, "note", "--new-stream", "case:x", "from a shell")
            appended = time.monotonic()
            assert wait_for(lambda: standin.process_calls > idle_calls, 2.0)
            assert time.monotonic() - appended < 1.0
            assert wait_for(lambda: standin.refresh_calls >= 2)  # the head moved: reports refreshed
        finally:
            stop_daemon(daemon, thread)


def test_once_processes_the_inbox_and_returns(home):
    for name in ("a.json", "b.json"):
        drop_by_rename(home / "inbox", name, b"{}")
    with ledger.open_ledger(home) as led:
        standin = StandIn(home, led)
        logs = io.StringIO()
        outcome = Daemon(home, standin.callbacks(), WatchOptions(once=True, settle=0.2), Log("text", logs)).run()
    assert standin.ingest_count == {"a.json": 1, "b.json": 1}
    assert outcome.ingested == {"accepted": 2}
    assert standin.process_calls >= 1 and standin.refresh_calls == 1
    lines = logs.getvalue().splitlines()
    assert lines[0].split()[2] == "started" and lines[-1].split()[2] == "stopped"


def test_moving_an_ingested_file_out_does_not_hold_back_the_next_drop(home):
    """Intake moves each file out of the inbox (an unpaired inotify move); watchdog holds such an
    event to pair it, and every later event of the inbox waited behind it (0.5 s by default)."""
    standin = StandIn(home)
    daemon, thread, _ = start_daemon(home, standin)
    try:
        delays = []
        for n in range(3):
            (home / f"staged-{n}.json").write_bytes(b"{}")
            dropped = time.monotonic()
            os.rename(home / f"staged-{n}.json", home / "inbox" / f"next-{n}.json")
            assert wait_for(lambda n=n: f"next-{n}.json" in standin.read, 3.0, step=0.005)
            delays.append(time.monotonic() - dropped)
    finally:
        stop_daemon(daemon, thread)
    assert sorted(delays)[1] < 0.45, delays     # `quiet` (0.2 s) plus a little, not 0.5 s more


def test_files_dropped_during_a_long_pass_are_ingested_between_its_cases(home):
    standin = StandIn(home)
    standin.long_pass, standin.long_pass_until = True, "during.json"
    daemon, thread, _ = start_daemon(home, standin)
    try:
        assert wait_for(lambda: standin.pass_running)
        drop_by_rename(home / "inbox", "during.json", b"{}")
        assert wait_for(lambda: "during.json" in standin.read, 3.0)
    finally:
        stop_daemon(daemon, thread)
    assert standin.ingested_during_pass == ["during.json"]
