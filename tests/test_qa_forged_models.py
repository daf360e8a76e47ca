"""Issue 13 items 14 and 15: forged read models and tracking records are found; a list of published
heads names the latest that holds and the first that does not."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalledger import ledger
from watch_support import benchmark_file

REPO = Path(__file__).resolve().parents[1]
PHARMACOLOGY = REPO / "benchmarks" / "samples" / "pharmacology.benchmark.json"


@pytest.fixture
def reported(home, run_cli, tmp_path):
    """A home with judged cases and reports written."""
    assert run_cli("ingest", PHARMACOLOGY, home=home).returncode == 0
    assert run_cli("run", "--quiet", home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0
    return home


def forge(home: Path, sql: str, *params) -> None:
    with sqlite3.connect(home / "ledger.db") as conn:
        conn.execute(sql, params)


def failing_case(home: Path) -> str:
    with sqlite3.connect(home / "ledger.db") as conn:
        return conn.execute("select case_id from proj_cases where verdict = 'fail' order by case_id").fetchone()[0]


def test_a_forged_verdict_is_refused_by_report_and_named_by_verify_projections(reported, run_cli):
    home = reported
    assert run_cli("verify", "--projections", home=home).returncode == 0
    before = {p.name: p.read_bytes() for p in (home / "reports").rglob("*") if p.is_file()}
    case_id = failing_case(home)
    forge(home, "update proj_cases set verdict = 'pass' where verdict = 'fail'")
    assert run_cli("note", "--new-stream", "case:x", "after the forgery", home=home).returncode == 0

    report = run_cli("report", home=home)
    assert report.returncode == 1
    [line] = report.stderr.strip().splitlines()
    assert "do not match the digest stored when they were written" in line and "evalledger rebuild" in line
    after = {p.name: p.read_bytes() for p in (home / "reports").rglob("*") if p.is_file()}
    assert after == before, "no report was rendered from the forged models"

    verify = run_cli("verify", "--projections", home=home)
    assert verify.returncode == 1
    assert (f"proj_cases row case_id='{case_id}': column verdict is 'pass' in the stored read models, "
            "'fail' folded from the events") in verify.stdout

    assert run_cli("rebuild", home=home).returncode == 0
    assert run_cli("verify", "--projections", home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0


def test_a_forgery_that_also_rewrites_the_digest_is_still_found_by_verify_projections(reported, run_cli):
    from evalledger.projections.store import ReadModelStore
    home = reported
    case_id = failing_case(home)
    with sqlite3.connect(home / "ledger.db") as conn:
        [state] = conn.execute("select state from proj_cases where case_id = ?", (case_id,)).fetchone()
    forged = json.loads(state)
    forged["verdict"] = True   # whatever the state says, it is not what the events say
    forge(home, "update proj_cases set state = ? where case_id = ?", json.dumps(forged, sort_keys=True), case_id)
    with ledger.open_ledger(home) as led:   # the forger recomputes the digest too
        store = ReadModelStore(led)
        store.conn.execute("update proj_digest set digest = ?", (store.contents_digest(),))
        store.close()
    assert run_cli("report", home=home).returncode == 0   # the digest alone cannot tell
    verify = run_cli("verify", "--projections", home=home)
    assert verify.returncode == 1
    assert f"proj_cases row case_id='{case_id}': column state is" in verify.stdout


def test_read_models_behind_the_head_are_not_a_finding(reported, run_cli):
    assert run_cli("note", "--new-stream", "case:x", "a later event", home=reported).returncode == 0
    done = run_cli("verify", "--projections", home=reported)
    assert done.returncode == 0, done.stderr
    assert "read models match" in done.stdout


def test_verify_finds_a_tracking_position_past_the_head(reported, run_cli):
    home = reported
    forge(home, "insert or replace into tracking values ('stage:template', 999999)")
    verify = run_cli("verify", home=home)
    assert verify.returncode == 1
    assert "tracking record 'stage:template' is at seq 999999, past the head" in verify.stdout
    (home.parent / "late.json").write_bytes(benchmark_file(5, questions=2))
    assert run_cli("ingest", home.parent / "late.json", home=home).returncode == 0
    run = run_cli("run", "--quiet", home=home)
    assert run.returncode == 0 and "nothing pending" not in run.stdout
    assert "4 judged" in run.stdout
    status = run_cli("status", home=home).stdout
    assert "4 cases of stage template had been passed over by its tracking position (seq 999999)" in status
    assert run_cli("verify", home=home).returncode == 0


def test_a_tracking_position_past_the_head_with_nothing_pending_is_set_back(reported, run_cli):
    home = reported
    forge(home, "insert or replace into tracking values ('stage:audit', 999999)")
    assert run_cli("run", "--quiet", home=home).stdout.strip() == "nothing pending"
    status = run_cli("status", home=home).stdout
    assert "the tracking position of stage audit (seq 999999) was past the ledger head" in status
    assert run_cli("verify", home=home).returncode == 0


def _heads(home: Path, notes: int) -> list[str]:
    """Append notes, recording the head after each (as verify prints it)."""
    heads = []
    with ledger.open_ledger(home) as led:
        for n in range(notes):
            led.append(ledger.NewEvent("case:x", "note.added", {"text": f"note {n}"}))
            head = led.head()
            heads.append(f"{head.seq}:{head.hash}")
    return heads


def rewritten_after(home: Path, keep: int, target: Path) -> Path:
    """A home holding the first ``keep`` events of ``home``, then different ones."""
    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)[:keep]
    (target.parent / "prefix.jsonl").write_bytes(b"".join(lines))
    with ledger.open_ledger(target) as led:
        led.import_file(target.parent / "prefix.jsonl")
        for n in range(3):
            led.append(ledger.NewEvent("case:x", "note.added", {"text": f"another note {n}"}))
    return target


def test_a_list_of_published_heads_names_the_latest_that_holds_and_the_first_that_does_not(home, run_cli, tmp_path):
    heads = _heads(home, 6)
    listing = tmp_path / "heads.txt"
    listing.write_text("# published after each note\n" + "\n".join(heads) + "\n")
    checkpoints = tmp_path / "checkpoints.jsonl"
    checkpoints.write_text("".join(json.dumps({"seq": int(h.split(":")[0]), "hash": h.split(":")[1]}) + "\n"
                                   for h in heads))
    for published in (listing, checkpoints):
        ok = run_cli("verify", "--expect-head", published, home=home)
        assert ok.returncode == 0, ok.stderr
        assert f"latest published head that still holds: seq {heads[-1].replace(':', ' ')}" in ok.stdout
        assert "all 6 published heads hold" in ok.stdout

    # History rewritten from seq 4 on: the same first three notes, then others.
    other = rewritten_after(home, 3, tmp_path / "rewritten")
    for published in (listing, checkpoints):
        done = run_cli("verify", "--expect-head", published, home=other)
        assert done.returncode == 1
        assert f"latest published head that still holds: seq {heads[2].replace(':', ' ')} ({published}:" in done.stdout
        assert f"first published head that does not hold: seq {heads[3].replace(':', ' ')}" in done.stdout
        assert "FAILED first published head that does not hold" in done.stdout
        assert "the ledger holds" in done.stdout


def test_a_cut_ledger_and_bad_published_lists(home, run_cli, tmp_path):
    heads = _heads(home, 3)
    cut = tmp_path / "cut"
    (tmp_path / "first.jsonl").write_bytes((home / "events.jsonl").read_bytes().splitlines(keepends=True)[0])
    assert run_cli("import", tmp_path / "first.jsonl", home=cut).returncode == 0
    listing = tmp_path / "heads.txt"
    listing.write_text("\n".join(heads) + "\n")
    done = run_cli("verify", "--expect-head", listing, home=cut)
    assert done.returncode == 1
    assert f"first published head that does not hold: seq {heads[1].replace(':', ' ')}" in done.stdout
    assert "the ledger ends at seq 1" in done.stdout

    bad = tmp_path / "bad.txt"
    bad.write_text(heads[0] + "\nnot a head\n")
    refused = run_cli("verify", "--expect-head", bad, home=home)
    assert refused.returncode == 2 and f"{bad}:2:" in refused.stderr and "Traceback" not in refused.stderr
    missing = run_cli("verify", "--expect-head", tmp_path / "nope.txt", home=home)
    assert missing.returncode == 2 and "neither SEQ:HASH nor a file" in missing.stderr


@pytest.mark.parametrize("backend", ["home", "jsonl"])
def test_a_tracking_position_past_the_head_is_found_on_every_backend(tmp_path, backend):
    """The check sits on the Recorder interface: a SQLite home and a standalone JSONL ledger alike;
    a run's full reconcile sets the position back and takes up the cases it passed over."""
    from evalledger.stages.dispatcher import run_until_idle
    from evalledger.stages.intake import ingest_path
    target = ledger.init_home(tmp_path / "home") if backend == "home" else tmp_path / "events.jsonl"
    bench = tmp_path / "bench.json"
    bench.write_bytes(benchmark_file(3, questions=2))
    with ledger.open_ledger(target) as led:
        assert ingest_path(led, bench).status == "accepted"
        head = led.head().seq
        led.set_tracking("stage:template", head + 1000)
        report = led.verify()
        assert not report.ok
        [problem] = report.problems
        assert f"tracking record 'stage:template' is at seq {head + 1000}, past the head (seq {head})" in str(problem)
        where = "events.jsonl.tracking.json" if backend == "jsonl" else "ledger.db (table tracking)"
        assert where in str(problem)
        opened = sum(1 for _ in led.read(types=["case.opened"]))
        summary = run_until_idle(led)
        assert opened and summary.judged == opened and summary.failed == 0, "the passed-over cases are judged"
        assert led.tracking_position("stage:template") <= led.head().seq
        assert led.verify().ok
        assert [e.data["stage"] for e in led.read(types=["run.reconciled"])] == ["template"]
