"""A benchmark is one name with versions: changes listed, responses re-bound, report paths stable."""

from __future__ import annotations

import json
import sys

from evalledger import ledger
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from evalledger.testing.peak_rss import peak_rss_mb


def _benchmark(truths: dict[str, int], extra: dict | None = None) -> dict:
    questions = [{"id": qid, "question": f"How many moons does {qid} have?", "template": {"fields": [
        {"name": "moons", "type": "int", "description": "The number of moons", "ground_truth": truth,
         "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}}
        for qid, truth in truths.items()]
    return {"format": "evalledger/benchmark@1", "name": "solar-system-basics", "questions": questions, **(extra or {})}


def test_a_fixed_ground_truth_is_version_2_responses_rebind_and_reports_stay_put(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    v1 = tmp_path / "v1.benchmark.json"
    v1.write_text(json.dumps(_benchmark({"mars": 3, "earth": 1})))   # mars is wrong: 2
    responses = tmp_path / "answers.responses.jsonl"
    responses.write_text("".join(json.dumps({"benchmark": "solar-system-basics", "question_id": q, "model": "m",
                                             "text": t}) + "\n"
                                 for q, t in (("mars", "Mars has 2 moons."), ("earth", "Earth has 1 moon."))))
    assert run_cli("ingest", v1, home=home).returncode == 0
    assert run_cli("ingest", responses, home=home).returncode == 0
    assert run_cli("run", home=home).returncode == 0
    report = home / "reports" / "solar-system-basics" / "report.md"
    assert run_cli("report", home=home).returncode == 0 and report.exists()

    v2 = tmp_path / "v2.benchmark.json"
    v2.write_text(json.dumps(_benchmark({"mars": 2, "earth": 1, "venus": 0})))
    done = run_cli("ingest", v2, home=home)
    assert done.returncode == 0
    assert "version 2 of 'solar-system-basics': 1 changed (mars), 1 added (venus)" in done.stdout
    assert "2 responses of earlier versions stay with them: evalledger rebind 'solar-system-basics'" in done.stdout

    rebound = run_cli("rebind", "solar-system-basics", home=home)
    assert rebound.returncode == 0, rebound.stderr
    assert "2 new case(s)" in rebound.stdout
    again = run_cli("rebind", "solar-system-basics", home=home)
    assert "0 new case(s), 2 already there" in again.stdout      # exactly once
    assert run_cli("run", home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0

    with ledger.open_ledger(home, readonly=True) as led:
        [first, second] = [e.data for e in led.read(types=["benchmark.registered"])]
        assert "version" not in first and second["version"] == 2 and second["previous"] == first["benchmark"]
        assert second["changes"] == {"added": ["venus"], "removed": [], "changed": ["mars"]}
        marks = [e.data for e in led.read(types=["responses.registered"]) if e.data.get("rebound_from")]
        assert len(marks) == 1 and marks[0]["rebound_from"] == first["benchmark"]
        verdicts = {(e.data["case_id"]): e.data["verdict"] for e in led.read(types=["case.judged"])}
        latest_cases = [e.data for e in led.read(types=["case.opened"]) if e.data["benchmark"] == second["benchmark"]]
    assert len(latest_cases) == 2
    assert all(verdicts[c["case_id"]] == "pass" for c in latest_cases)   # mars right under the fixed truth

    # the latest keeps the stable path; the older version is reachable from it
    text = report.read_text()
    assert second["benchmark"] in text and "Version 2 of solar-system-basics" in text
    older = home / "reports" / "solar-system-basics" / "versions" / "v1" / "report.md"
    assert older.exists() and first["benchmark"] in older.read_text()
    assert "[version 1](versions/v1/report.md)" in text
    assert "[version 2 (latest)](../../report.md)" in older.read_text()
    index = (home / "reports" / "index.md").read_text()
    assert "solar-system-basics (version 2, latest)" in index


def test_rebind_refuses_what_is_not_a_version(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("rebind", "nothing", home=home).returncode == 2
    one = tmp_path / "one.benchmark.json"
    one.write_text(json.dumps(_benchmark({"mars": 2})))
    run_cli("ingest", one, home=home)
    done = run_cli("rebind", "solar-system-basics", home=home)
    assert done.returncode == 2 and "one version" in done.stderr


def test_rebind_memory_does_not_grow_with_the_benchmark(tmp_path):
    # it held every version's questions and every earlier response (2 GB at 100,000 cases)
    def peak(cases: int) -> float:
        first = arithmetic_benchmark(cases // 2, "grow")
        second = {**first, "questions": first["questions"][1:]}   # q0 removed: its responses stay behind
        second.pop("responses")
        home = tmp_path / f"home{cases}"
        with ledger.open_ledger(home) as led:
            for n, doc in enumerate((first, second)):
                (tmp_path / f"v{n}-{cases}.json").write_text(json.dumps(doc))
                assert ingest_path(led, tmp_path / f"v{n}-{cases}.json").ok
        code, mb, errors = peak_rss_mb([sys.executable, "-m", "evalledger", "--home", str(home), "rebind", "grow"])
        assert code == 0, errors[-2000:]
        with ledger.open_ledger(home, readonly=True) as led:
            latest = [e.data["benchmark"] for e in led.read(types=["benchmark.registered"])][-1]
            assert sum(1 for e in led.read(types=["case.opened"]) if e.data["benchmark"] == latest) == cases - 2
        return mb

    small, large = peak(2000), peak(8000)
    per_case_kb = (large - small) * 1024 / 6000
    assert per_case_kb < 1.5, f"the peak grows {per_case_kb:.2f} KB a case ({small:.0f} -> {large:.0f} MB)"
