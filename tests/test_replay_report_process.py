"""`replay` writes the new home's reports in a child process, as `evalledger report` would: the same
bytes, and a failure there says the replay itself is complete and how to write them."""

from __future__ import annotations

import json
import shutil

from evalledger import ledger
from evalledger.projections.replay import finish_replay
from evalledger.stages.replaying import replay_into
from stages_support import offline_judged


def folder_bytes(folder):
    """Every file under ``folder`` by relative path, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_replay_reports_are_the_bytes_report_writes(tmp_path, run_cli):
    source = offline_judged(tmp_path)
    target = tmp_path / "replayed"
    done = run_cli("replay", "--into", target, home=source)
    assert done.returncode == 0, done.stderr
    written = folder_bytes(target / "reports")
    assert written                                            # the replay wrote the reports
    shutil.rmtree(target / "reports")
    again = run_cli("report", home=target)
    assert again.returncode == 0, again.stderr
    assert folder_bytes(target / "reports") == written


def test_finish_replay_without_report_leaves_the_reports_to_the_caller(tmp_path):
    source = offline_judged(tmp_path)
    target = tmp_path / "replayed"
    replay_into(source, target)
    assert finish_replay(target, [], report=False) is None    # nothing unrecorded: no listing
    assert not (target / "reports").exists() or not any((target / "reports").iterdir())


def test_replay_whose_report_fails_says_the_replay_is_complete(tmp_path, run_cli):
    source = offline_judged(tmp_path)
    target = tmp_path / "replayed"
    replay_into(source, target)                               # the replay, carried on below: nothing left to run
    reports = target / "reports"
    if reports.exists():
        shutil.rmtree(reports)
    reports.write_text("not a folder")                        # the report cannot be written there
    done = run_cli("replay", "--into", target, home=source)
    assert done.returncode == 1
    assert f"writing the reports of {target} failed" in done.stderr
    assert f"run 'evalledger --home {target} report'" in done.stderr
    assert "0 case(s) re-run" in done.stdout                   # what the replay did is still said
    with ledger.open_ledger(target, readonly=True) as led:     # the replayed ledger is intact
        assert led.head().seq > 0


def test_replay_whose_report_fails_still_lists_the_requests_never_recorded(tmp_path, run_cli):
    source = offline_judged(tmp_path)
    target = tmp_path / "deep"
    deep = ("--set", "deep_judgment_enabled=true")
    assert run_cli("replay", "--into", target, *deep, home=source).returncode == 1   # unrecorded: exit 1
    shutil.rmtree(target / "reports")
    (target / "reports").write_text("not a folder")           # the report cannot be written there
    done = run_cli("replay", "--into", target, *deep, home=source)   # carried on: nothing left to run
    assert done.returncode == 1
    assert f"writing the reports of {target} failed" in done.stderr
    listing = target / "replay-unrecorded.jsonl"
    rows = [json.loads(line) for line in listing.read_text().splitlines()]
    assert rows                                               # deep judgment asks what was never asked
    assert f"{len(rows)} judge request(s) the new configuration needs were never recorded" in done.stdout
    assert f"full list (one JSON object a line): {listing}" in done.stdout
