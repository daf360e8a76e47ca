"""``evalledger demo`` as a user runs it: a real process, the real samples, the offline judge."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from evalledger.cli.demo import sample_files, summary_table
from watch_support import CLI, REPO, cli_env, evalledger


def test_demo_processes_the_samples_end_to_end_in_under_30_seconds(tmp_path):
    started = time.monotonic()
    proc = subprocess.run([*CLI, "demo", "--dir", str(tmp_path)], capture_output=True, text=True,
                          env=cli_env(), cwd=tmp_path, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 30
    home = Path(re.search(r"^demo home: (.+)$", proc.stdout, re.M).group(1))
    assert home.parent == tmp_path and home.is_dir()          # kept afterwards
    assert list((home / "inbox").iterdir()) == []
    assert len(list((home / "processed").iterdir())) == len(sample_files(REPO / "benchmarks" / "samples"))
    assert list((home / "rejected").iterdir()) == []
    stats = json.loads((home / "reports" / "aggregate-stats.json").read_text())
    for bench in stats["benchmarks"].values():
        assert bench["name"] in proc.stdout
        for figures in bench["models"].values():
            assert figures["judged"] == figures["cases"] > 0
    assert {j["backend"] for j in stats["judges"]} == {"offline"}
    assert "offline" in proc.stdout and "not a language model" in proc.stdout
    assert f"reports: {home / 'reports' / 'index.md'}" in proc.stdout
    assert evalledger(home, "verify").returncode == 0


def test_demo_makes_a_missing_dir_and_names_one_it_cannot_make(tmp_path):
    """--dir naming a folder not made yet stopped at a bare "[Errno 2] No such file or directory"."""
    where = tmp_path / "not" / "yet"
    proc = subprocess.run([*CLI, "demo", "--dir", str(where)], capture_output=True, text=True,
                          env=cli_env(), cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert Path(re.search(r"^demo home: (.+)$", proc.stdout, re.M).group(1)).parent == where
    (tmp_path / "a-file").write_text("x")
    proc = subprocess.run([*CLI, "demo", "--dir", str(tmp_path / "a-file" / "x")], capture_output=True, text=True,
                          env=cli_env(), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "a-file/x: cannot be made" in proc.stderr, proc.stderr


def test_demo_refuses_a_folder_without_samples(tmp_path):
    proc = subprocess.run([*CLI, "demo", "--dir", str(tmp_path), "--samples", str(tmp_path)],
                          capture_output=True, text=True, env=cli_env(), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "no sample benchmarks" in proc.stderr


def test_summary_table_shows_the_headline_of_each_kind():
    stats = {"benchmarks": {
        "b1": {"name": "quiz", "kind": "template",
               "models": {"m-a": {"cases": 4, "judged": 4, "passed": 3, "pass_rate": 0.75}}},
        "b2": {"name": "doc", "kind": "reconstruction", "models": {"m-a": {"cases": 1, "judged": 1}},
               "reconstruction": {"m-a": {"overall": {"average_score": 6.5}}}},
        "b3": {"name": "audit", "kind": "audit", "models": {"None": {"cases": 2, "judged": 2}},
               "audit": {"all": {"exact_match_rate": 0.5, "cross_band_confusion_rate": 0.0}}},
    }}
    lines = summary_table(stats).splitlines()
    assert lines[0].split() == ["benchmark", "kind", "model", "cases", "judged", "result"]
    assert lines[2].split()[:5] == ["audit", "audit", "-", "2", "2"] and "matches expected 50.0%" in lines[2]
    assert "mean claim score 6.50/10" in lines[3]
    assert lines[4].endswith("pass rate 75.0% (3/4)")
