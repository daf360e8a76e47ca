"""``evalledger status`` reads every case's events once, keeping what they say of its state in a
temporary file: its peak does not grow with the cases (it held every ``case.opened`` event, 1.2 GB
at 200,000 cases)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evalledger.testing.peak_rss import peak_rss_mb
from intake_support import home_with_long_responses


def status_peak(tmp_path: Path, cases: int) -> tuple[float, dict]:
    """(peak RSS in MB, ``status --json``) of a home holding ``cases`` cases with long responses."""
    home = home_with_long_responses(tmp_path, cases, "status")
    out = tmp_path / f"status{cases}.json"
    code, mb, errors = peak_rss_mb([sys.executable, "-c", "import sys, runpy; sys.stdout = open(sys.argv[1], 'w'); "
                                    "sys.argv = ['evalledger', '--home', sys.argv[2], 'status', '--json']; "
                                    "runpy.run_module('evalledger', run_name='__main__')", str(out), str(home)])
    assert code == 0, errors[-2000:]
    return mb, json.loads(out.read_text())


def test_status_memory_does_not_grow_with_the_cases(tmp_path):
    (small, _), (large, shown) = status_peak(tmp_path, 2000), status_peak(tmp_path, 8000)
    assert shown["cases"] == {"opened": 8000, "judged": 0, "failed": 0}
    assert [b["cases"]["opened"] for b in shown["benchmarks"]] == [8000]
    per_case_kb = (large - small) * 1024 / 6000
    assert per_case_kb < 1.0, f"the peak grows {per_case_kb:.2f} KB a case ({small:.0f} -> {large:.0f} MB)"
