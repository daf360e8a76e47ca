"""QA: commands given a --home that does not exist, or a path that is not what they expect."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_import_of_a_missing_file_leaves_no_new_home_behind(tmp_path, run_cli):
    target = tmp_path / "new-home"
    done = run_cli("import", tmp_path / "no-such.jsonl", home=target)
    assert done.returncode == 2 and "no such file" in done.stderr
    assert not target.exists()
    folder = run_cli("import", tmp_path, home=target)
    assert folder.returncode == 2 and "not a file" in folder.stderr
    assert not target.exists()
