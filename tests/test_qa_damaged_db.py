"""QA: a ledger.db that is not an SQLite database is named, verify reports it, the mirror is kept."""

from __future__ import annotations


def _damage(home) -> bytes:
    """Overwrite ledger.db with bytes that are no database; returns the mirror's bytes."""
    for extra in ("ledger.db-wal", "ledger.db-shm"):
        (home / extra).unlink(missing_ok=True)
    (home / "ledger.db").write_bytes(b"not a database " * 600)
    return (home / "events.jsonl").read_bytes()


def test_verify_of_an_unreadable_store_is_a_finding_not_a_traceback(home, run_cli):
    run_cli("note", "--new-stream", "case:a", "kept", home=home)
    mirror = _damage(home)
    done = run_cli("verify", home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout.startswith("FAILED ") and "ledger.db: cannot be read as an SQLite database" in done.stdout
    assert (home / "events.jsonl").read_bytes() == mirror


def test_other_commands_name_the_file_and_the_way_out(home, tmp_path, run_cli):
    run_cli("note", "--new-stream", "case:a", "kept", home=home)
    mirror = _damage(home)
    for command in (["status"], ["log"], ["run"], ["note", "--new-stream", "case:a", "more"]):
        done = run_cli(*command, home=home)
        assert done.returncode == 2 and "Traceback" not in done.stderr, command
        assert "ledger.db" in done.stderr and "import" in done.stderr
    assert (home / "events.jsonl").read_bytes() == mirror
    rescued = run_cli("import", home / "events.jsonl", home=tmp_path / "new")
    assert rescued.returncode == 0 and rescued.stdout.startswith("imported 1 events")


def test_a_store_cut_short_beside_a_stale_wal_is_named_too(tmp_path, run_cli):
    """The write-ahead log left by a killed writer still holds page 1, so the file opens and
    only its other pages fail: verify, status and log stopped with a Python traceback."""
    from viewer_support import damage_leaving_wal, failing_home
    home = tmp_path / "judged"
    failing_home(home, extra_cases=30)
    damage_leaving_wal(home)
    verified = run_cli("verify", home=home)
    assert verified.returncode == 1 and "Traceback" not in verified.stderr, verified.stderr
    assert verified.stdout.startswith("FAILED ") and "ledger.db: cannot be read as an SQLite database" in verified.stdout
    for command in (["status"], ["log"]):
        done = run_cli(*command, home=home)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (command, done.stderr)
        assert "ledger.db: cannot be read as an SQLite database (database disk image is malformed)" in done.stderr
