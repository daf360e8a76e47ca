"""Issue 13 item 3: an interrupted ``replay --into DIR`` carries on when run again; other targets are refused."""

from __future__ import annotations

import collections
import signal
import subprocess
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.dispatcher import run_until_idle
from evalledger.stages.intake import ingest_path
from watch_support import CLI, REPO, benchmark_file, cli_env, evalledger, wait_for


def judged_source(tmp_path: Path, benchmarks: int = 4, questions: int = 40) -> Path:
    """A home whose cases were all judged by the offline judge."""
    home = ledger.init_home(tmp_path / "source")
    with ledger.open_ledger(home) as led:
        for i in range(benchmarks):
            path = tmp_path / f"bench-{i}.json"
            path.write_bytes(benchmark_file(i, questions=questions))
            assert ingest_path(led, path).status == "accepted"
        assert run_until_idle(led).failed == 0
    return home


def count(home: Path, type: str) -> int:
    with ledger.open_ledger(home, readonly=True) as led:
        return sum(1 for _ in led.read(types=[type]))


def judged_yet(home: Path) -> bool:
    """True once the replay being made in ``home`` has committed a verdict (False while it starts)."""
    try:
        return count(home, "case.judged") > 0
    except Exception:   # no ledger.db yet, or its schema not yet created
        return False


def test_a_replay_interrupted_by_ctrl_c_carries_on_when_run_again(tmp_path):
    source = judged_source(tmp_path)
    target = tmp_path / "replayed"
    proc = subprocess.Popen([*CLI, "--home", str(source), "replay", "--into", str(target), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=REPO)
    assert wait_for(lambda: judged_yet(target), 60, step=0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert b"carries on" in err
    done_before = count(target, "case.judged")
    assert 0 < done_before < 320

    again = evalledger(source, "replay", "--into", str(target), "--quiet")
    assert "carrying on the replay begun there" in again.stdout
    with ledger.open_ledger(target, readonly=True) as led:
        judged = collections.Counter(e.data["case_id"] for e in led.read(types=["case.judged"]))
        opened = collections.Counter(e.data["case_id"] for e in led.read(types=["case.opened"]))
        origins = list(led.read(types=["replay.started"]))
    assert len(origins) == 1
    assert len(opened) == 320 and set(opened.values()) == {1}, "inputs copied once"
    assert judged == opened, "every case judged exactly once"
    assert evalledger(target, "verify").returncode == 0
    # A third run finds its own finished replay: nothing to do, nothing appended.
    head = ledger.open_ledger(target, readonly=True).head()
    evalledger(source, "replay", "--into", str(target), "--quiet")
    assert ledger.open_ledger(target, readonly=True).head() == head


def test_a_replay_home_of_another_source_or_setting_and_a_plain_home_are_refused(tmp_path):
    source = judged_source(tmp_path, benchmarks=1, questions=2)
    other = ledger.init_home(tmp_path / "other")
    (tmp_path / "o.json").write_bytes(benchmark_file(9, questions=2))
    evalledger(other, "ingest", str(tmp_path / "o.json"))
    target = tmp_path / "replayed"
    evalledger(source, "replay", "--into", str(target), "--quiet")
    head = ledger.open_ledger(target, readonly=True).head()

    refusals = [
        (other, [], "another replay (the source there:"),
        (source, ["--set", "deep_judgment_enabled=true"], "another replay (the --set layer there: {}"),
    ]
    for home, extra, reason in refusals:
        done = evalledger(home, "replay", "--into", str(target), *extra, check=False)
        assert done.returncode == 2, done.stdout
        assert reason in done.stderr and str(target) in done.stderr
    plain = evalledger(source, "replay", "--into", str(other), check=False)
    assert plain.returncode == 2 and "no replay began" in plain.stderr
    assert ledger.open_ledger(target, readonly=True).head() == head, "a refusal writes nothing"


@pytest.mark.parametrize("grown", [False, True])
def test_a_resumed_replay_copies_up_to_the_head_it_began_from(tmp_path, grown):
    source = judged_source(tmp_path, benchmarks=2, questions=2)
    target = tmp_path / "replayed"
    from evalledger.stages.replaying import seed_replay
    label = str(source.resolve())
    with ledger.open_ledger(source) as src, ledger.open_ledger(target) as led:
        begun = src.head()
        seed_replay(src, led, label, {}, None)
    if grown:   # the source moves on after the replay began: the replay still replays what it began from
        (tmp_path / "late.json").write_bytes(benchmark_file(7, questions=2))
        evalledger(source, "ingest", str(tmp_path / "late.json"))
    done = evalledger(source, "replay", "--into", str(target), "--quiet")
    assert f"replay of seq {begun.seq} {begun.hash}" in done.stdout
    assert count(target, "case.opened") == 8 and count(target, "case.judged") == 8


def test_replay_into_carries_on_its_own_replay_and_refuses_another(tmp_path):
    """The Python API the command prints: ``resumed`` set, nothing copied twice; ReplayRefused otherwise."""
    from evalledger.stages.replaying import COPIED_TYPES, ReplayRefused, replay_into, seed_replay
    source = judged_source(tmp_path, benchmarks=1, questions=2)
    target = tmp_path / "replayed"
    with ledger.open_ledger(source) as src, ledger.open_ledger(target) as led:
        seed_replay(src, led, str(source.resolve()), {}, None)
    result = replay_into(source, target)
    assert result.resumed and result.summary.failed == 0
    assert count(target, "case.opened") == count(target, "case.judged") == count(source, "case.opened")
    with pytest.raises(ReplayRefused, match="another replay \\(the --set layer there: \\{\\}"):
        replay_into(source, target, overrides={"deep_judgment_enabled": True})
    fresh = replay_into(source, tmp_path / "new")
    assert not fresh.resumed and fresh.copied == sum(count(source, t) for t in COPIED_TYPES)
