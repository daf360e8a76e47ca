"""Reports name the latest signed checkpoint they were built under, and that line checks offline
against the published checkpoints (``check-proof --report``), through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from evalledger.ledger import checkpoint as cps
from evalledger.projections.markdown import parse_checkpoint_line

SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"
AUDIT = SAMPLES / "verifyfast-cases.audit.jsonl"


def _ok(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _report_files(home: Path) -> dict[str, bytes]:
    reports = home / "reports"
    return {str(p.relative_to(reports)): p.read_bytes() for p in sorted(reports.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A home with the audit sample judged offline, and a key kept outside it."""
    from evalledger.cli.main import main
    root = tmp_path_factory.mktemp("report-checkpoints")
    home, key = root / "home", root / "keys" / "signer.key"
    key.parent.mkdir()
    assert main(["--home", str(home), "init"]) == 0
    assert main(["--home", str(home), "ingest", str(AUDIT)]) == 0
    assert main(["--home", str(home), "run", "--quiet"]) == 0
    assert main(["--home", str(home), "keygen", "--out", str(key)]) == 0
    return home, key


def test_a_report_names_its_checkpoint_and_the_line_checks_against_checkpoints_jsonl(judged, run_cli, tmp_path):
    home, key = judged
    pub = str(key) + ".pub"
    _ok(run_cli("report", home=home))
    index = (home / "reports" / "index.md").read_text()
    assert "- Latest checkpoint: none signed" in index
    refused = run_cli("check-proof", "--report", home / "reports" / "index.md", "--checkpoints",
                      home / "checkpoints.jsonl", "--pubkey", pub, home=home)
    assert refused.returncode != 0

    _ok(run_cli("checkpoint", "--key", key, home=home))
    [row] = cps.read_checkpoints(home / "checkpoints.jsonl")
    _ok(run_cli("report", home=home))
    reports = home / "reports"
    stats = json.loads((reports / "aggregate-stats.json").read_text())
    claim = stats["checkpoint"]
    assert (claim["seq"], claim["root"]) == (row["seq"], row["root"])
    assert claim["events_after"] == 1 and stats["ledger_head"]["seq"] == row["seq"] + 1
    benchmark_reports = sorted(reports.glob("*/report.md"))
    assert benchmark_reports
    for path in [reports / "index.md", reports / "aggregate-report.md", reports / "agreement.md",
                 *benchmark_reports]:
        text = path.read_text()
        line = next(ln for ln in text.splitlines() if ln.startswith("- Latest checkpoint: "))
        assert f"seq {row['seq']}, root `{row['root']}`" in line, path
        assert "no event after it but its own checkpoint.signed record" in line, path
        assert parse_checkpoint_line(text)["note_sha256"] == claim["note_sha256"]
    for path in [reports / "index.md", reports / "aggregate-stats.json", benchmark_reports[0]]:
        checked = _ok(run_cli("check-proof", "--report", path, "--checkpoints", home / "checkpoints.jsonl",
                              "--pubkey", pub, home=tmp_path / "no-home"))
        assert checked.stdout.startswith("OK ") and f"at seq {row['seq']}" in checked.stdout
        assert "only the report's checkpoint line is checked: its figures are not" in checked.stdout

    # a report whose checkpoint line was edited (another root) no longer checks, and says why
    forged = tmp_path / "forged.md"
    forged.write_text((reports / "index.md").read_text().replace(row["root"], "0" * 64))
    failed = run_cli("check-proof", "--report", forged, "--checkpoints", home / "checkpoints.jsonl",
                     "--pubkey", pub, home=home)
    assert failed.returncode == 1 and "FAILED" in failed.stdout and "root" in failed.stdout
    # a checkpoints file that does not hold the report's checkpoint
    other = tmp_path / "other.jsonl"
    other.write_bytes(orjson.dumps({**row, "note": row["note"].replace("time ", "time 1")}) + b"\n")
    failed = run_cli("check-proof", "--report", reports / "index.md", "--checkpoints", other, "--pubkey", pub,
                     home=home)
    assert failed.returncode == 1 and "not published there" in failed.stdout


def test_events_after_the_checkpoint_are_stated_and_a_rebuild_gives_the_same_bytes(judged, run_cli):
    home, key = judged
    _ok(run_cli("checkpoint", "--key", key, home=home))
    rows = cps.read_checkpoints(home / "checkpoints.jsonl")
    latest = rows[-1]
    _ok(run_cli("note", "--new-stream", "run:extra", "first note after the checkpoint", home=home))
    _ok(run_cli("note", "run:extra", "second note after the checkpoint", home=home))
    _ok(run_cli("report", home=home))
    index = (home / "reports" / "index.md").read_text()
    line = next(ln for ln in index.splitlines() if ln.startswith("- Latest checkpoint: "))
    assert f"seq {latest['seq']}, root `{latest['root']}`" in line
    assert "2 events came after it besides its own checkpoint.signed record: not covered" in line
    checked = _ok(run_cli("check-proof", "--report", home / "reports" / "index.md", "--checkpoints",
                          home / "checkpoints.jsonl", "--pubkey", str(key) + ".pub", home=home))
    assert "3 event(s) after the checkpoint" in checked.stdout

    updated = _report_files(home)
    _ok(run_cli("rebuild", home=home))
    assert _report_files(home) == updated      # the read model folds the same incrementally and afresh
    _ok(run_cli("verify", "--projections", home=home))
