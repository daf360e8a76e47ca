"""Reports are a function of the judgments, not of how many runs it took to make them."""

from __future__ import annotations

import json
from pathlib import Path

from evalledger.cli.main import main

SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"
AUDIT = SAMPLES / "verifyfast-cases.audit.jsonl"
RECONSTRUCTION = SAMPLES / "polio-vaccine-1955.reconstruction.json"


def stats_without_head(home: Path) -> dict:
    data = json.loads((home / "reports" / "aggregate-stats.json").read_text(encoding="utf-8"))
    data.pop("ledger_head")
    return data


def test_two_runs_report_exactly_what_one_run_reports(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["--home", str(one), "init"]) == 0
    assert main(["--home", str(one), "ingest", str(AUDIT), str(RECONSTRUCTION)]) == 0
    assert main(["--home", str(one), "run", "--quiet"]) == 0
    assert main(["--home", str(one), "report"]) == 0

    assert main(["--home", str(two), "init"]) == 0
    assert main(["--home", str(two), "ingest", str(AUDIT)]) == 0
    assert main(["--home", str(two), "run", "--quiet"]) == 0        # a first run (a daemon's, say) ...
    assert main(["--home", str(two), "ingest", str(RECONSTRUCTION)]) == 0
    assert main(["--home", str(two), "run", "--quiet"]) == 0        # ... and a second, after a restart
    assert main(["--home", str(two), "report"]) == 0

    a, b = stats_without_head(one), stats_without_head(two)
    assert a["configs"] and set(a["configs"]) == set(a["config_hashes"]) & set(a["configs"])
    assert a == b
