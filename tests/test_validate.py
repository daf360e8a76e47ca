"""``evalledger validate``: every intake check, nothing written, the same messages and exit codes as ingest."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.intake import ingest_bytes
from evalledger.stages.validate import validate_bytes

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "benchmarks" / "samples"
BENCH = json.loads((SAMPLES / "pharmacology.benchmark.json").read_text())


def _head(home: Path) -> tuple[int, str]:
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    return head.seq, head.hash


def _variants() -> dict[str, bytes]:
    no_question = json.loads(json.dumps(BENCH))
    del no_question["questions"][0]["question"]
    bad_primitive = json.loads(json.dumps(BENCH))
    bad_primitive["questions"][1]["template"]["fields"][0]["verify_with"] = {"type": "NumericTolerance", "mode": "percent"}
    return {
        "missing-question.benchmark.json": json.dumps(no_question).encode(),
        "bad-primitive.benchmark.json": json.dumps(bad_primitive).encode(),
        "not-json.benchmark.json": b'{"format": "evalledger/benchmark@1", "name": ',
        "duplicate-keys.benchmark.json": b'{"format": "evalledger/benchmark@1", "name": "a", "name": "b", "questions": []}',
        "latin1.benchmark.json": '{"name": "caf\u00e9"}'.encode("latin-1"),
        "unknown-question.responses.jsonl": json.dumps({"benchmark": BENCH["name"], "question_id": "q999",
                                                        "model": "m", "text": "x"}).encode() + b"\n",
    }


def test_validate_prints_what_ingest_prints_and_writes_nothing(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", SAMPLES / "pharmacology.benchmark.json", home=home).returncode == 0
    folder = tmp_path / "drafts"
    folder.mkdir()
    for name, raw in _variants().items():
        (folder / name).write_bytes(raw)
    before = _head(home)
    for path in sorted(folder.iterdir()):
        checked = run_cli("validate", path, home=home)
        assert _head(home) == before and path.exists(), path.name  # nothing recorded, nothing moved
        assert checked.returncode == 1, (path.name, checked.stdout)
        ingested = run_cli("ingest", path, home=home)
        assert ingested.returncode == 1
        # the same status word, error count and every error line
        assert checked.stdout.splitlines() == ingested.stdout.splitlines(), path.name
        before = _head(home)


def test_validate_a_good_file_exits_0_and_needs_no_home(tmp_path, run_cli):
    done = run_cli("validate", SAMPLES, home=tmp_path / "no-home-here")
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["valid", "pending", "valid", "valid"]
    assert "(14 questions, 28 responses)" in lines[0]
    assert not (tmp_path / "no-home-here").exists()


def test_validate_names_a_missing_file_as_a_usage_error(tmp_path, run_cli):
    done = run_cli("validate", tmp_path / "nope.json", home=tmp_path)
    assert done.returncode == 2 and "no such file" in done.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=4000), junk=st.binary(max_size=8))
def test_validate_and_ingest_agree_on_damaged_files(tmp_path_factory, cut, junk):
    """A sample cut short and given junk: validate's outcome and errors equal ingest's."""
    raw = (SAMPLES / "pharmacology.benchmark.json").read_bytes()
    damaged = raw[:cut] + junk
    home = tmp_path_factory.mktemp("h")
    with ledger.open_ledger(home) as led:
        checked = validate_bytes(led, damaged, "x.benchmark.json")
        ingested = ingest_bytes(led, damaged, "x.benchmark.json")
    expected = {"accepted": "valid"}.get(ingested.status, ingested.status)
    assert checked.status == expected
    assert checked.errors == ingested.errors
