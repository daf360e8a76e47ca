"""QA: `export --out` onto the ledger's own files is refused instead of truncating the ledger."""

from __future__ import annotations

import pytest


def _two_notes(run_cli, home) -> str:
    run_cli("note", "--new-stream", "case:a", "one", home=home)
    run_cli("note", "--new-stream", "case:a", "two", home=home)
    return run_cli("verify", home=home).stdout


@pytest.mark.parametrize("name", ["ledger.db", "events.jsonl"])
def test_export_onto_a_homes_store_or_mirror_is_refused_and_loses_nothing(home, run_cli, name):
    head = _two_notes(run_cli, home)
    done = run_cli("export", "--out", home / name, home=home)
    assert done.returncode == 2 and "own files" in done.stderr and "Traceback" not in done.stderr
    after = run_cli("verify", home=home)
    assert after.returncode == 0 and after.stdout == head


def test_export_of_a_jsonl_ledger_onto_itself_is_refused(tmp_path, run_cli):
    store = tmp_path / "ledger.jsonl"
    head = _two_notes(run_cli, store)
    size = store.stat().st_size
    done = run_cli("export", "--out", store, home=store)
    assert done.returncode == 2
    assert store.stat().st_size == size and run_cli("verify", home=store).stdout == head


def test_export_elsewhere_still_writes_the_exact_mirror(home, tmp_path, run_cli):
    _two_notes(run_cli, home)
    out = tmp_path / "copy.jsonl"
    assert run_cli("export", "--out", out, home=home).returncode == 0
    assert out.read_bytes() == (home / "events.jsonl").read_bytes()
