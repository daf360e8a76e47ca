"""``evalledger status`` reads every case's events once, keeping what they say of its state in a
temporary file: its peak does not grow with the cases (it held every ``case.opened`` event, 1.2 GB
at 200,000 cases)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evalledger import ledger
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from evalledger.testing.peak_rss import peak_rss_mb


def status_peak(tmp_path: Path, cases: int) -> tuple[float, dict]:
    """(peak RSS in MB, ``status --json``) of a home holding ``cases`` cases with long responses."""
    doc = arithmetic_benchmark(cases // 2, "status")
    for response in doc["responses"]:
        response["text"] += " Worked through step by step. " * 40   # ~1.2 KB a response, as real ones are
    source = tmp_path / f"b{cases}.json"
    source.write_text(json.dumps(doc))
    home = tmp_path / f"home{cases}"
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, source).ok
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
