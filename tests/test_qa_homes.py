"""QA: commands given a --home that does not exist, or a path that is not what they expect."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_ingest_into_a_mistyped_home_refuses_and_creates_nothing(tmp_path, run_cli):
    typo = tmp_path / "evalleger"
    done = run_cli("ingest", SAMPLE, home=typo)
    assert done.returncode == 2
    assert str(typo) in done.stderr and "init" in done.stderr and "Traceback" not in done.stderr
    assert not typo.exists()


def test_import_of_a_missing_file_leaves_no_new_home_behind(tmp_path, run_cli):
    target = tmp_path / "new-home"
    done = run_cli("import", tmp_path / "no-such.jsonl", home=target)
    assert done.returncode == 2 and "no such file" in done.stderr
    assert not target.exists()
    folder = run_cli("import", tmp_path, home=target)
    assert folder.returncode == 2 and "not a file" in folder.stderr
    assert not target.exists()


def test_ingest_of_an_empty_folder_names_that_folder_not_the_inbox(home, tmp_path, run_cli):
    empty = tmp_path / "drops"
    empty.mkdir()
    done = run_cli("ingest", empty, home=home)
    assert done.returncode == 0
    assert done.stdout.strip() == f"nothing to ingest in {empty}"
