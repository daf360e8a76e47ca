"""QA: when a benchmark arrives and its pending responses do not fit it, the benchmark's line says so."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_a_pending_file_rejected_by_the_arriving_benchmark_is_named_on_its_line(home, tmp_path, run_cli):
    bench = json.loads(SAMPLE.read_text())
    bench.update(name="later-bench", responses=[])
    first_question = bench["questions"][0]["id"]
    (tmp_path / "later.json").write_text(json.dumps(bench))
    (tmp_path / "early.json").write_text(json.dumps({
        "format": "evalledger/responses@1", "benchmark": "later-bench",
        "responses": [{"question_id": first_question, "model": "m", "text": "x"},
                      {"question_id": "no-such-question", "model": "m", "text": "y"}]}))
    assert run_cli("ingest", tmp_path / "early.json", home=home).stdout.startswith("pending  early.json")
    done = run_cli("ingest", tmp_path / "later.json", home=home)
    assert done.returncode == 0
    assert "including the responses" not in done.stdout
    assert "pending file early.json rejected: 1 error" in done.stdout and "no-such-question" in done.stdout
