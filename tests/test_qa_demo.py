"""QA: `demo --samples DIR` with a bad file says so and exits 1, as `watch --once` does."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_rejected_sample_is_named_in_the_summary_and_fails_the_demo(tmp_path, run_cli):
    samples = tmp_path / "samples"
    samples.mkdir()
    shutil.copy(REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl", samples)
    (samples / "broken.json").write_text('{"format": "evalledger/benchmark@1",')
    done = run_cli("demo", "--samples", samples, "--dir", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "rejected: 1 file(s)" in done.stdout and "Traceback" not in done.stderr
    [home] = [p for p in tmp_path.iterdir() if p.name.startswith("evalledger-demo-")]
    assert (home / "rejected" / "broken.json.error.txt").is_file()


def test_the_samples_alone_still_pass(tmp_path, run_cli):
    done = run_cli("demo", "--dir", tmp_path)
    assert done.returncode == 0 and "rejected:" not in done.stdout
