"""How often the offline judge's verdict is right on the held-out answers (out of sample).

    python benchmarks/heldout/evaluate_heldout.py [answers.benchmark.json]

Runs the real pipeline (intake, dispatcher with the offline judge, primitives) in a temporary
home and compares each case's verdict with the one known by construction: ``model-right``
responses should pass, ``model-wrong`` responses should fail. Prints the figure and each miss.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path

HERE = Path(__file__).resolve().parent
EXPECTED = {"model-right": "pass", "model-wrong": "fail"}


def verdicts(benchmark: Path) -> list[dict]:
    """One row per case: question id, model, response text, parsed value, verdict and expected verdict."""
    with tempfile.TemporaryDirectory() as tmp, ledger.open_ledger(Path(tmp) / "home") as led:
        ingest_path(led, benchmark)
        run_until_idle(led, RunSettings(judge_backend="offline"))
        opened = {e.data["case_id"]: e.data for e in led.read(types=["case.opened"])}
        parsed = {e.data["case_id"]: e.data.get("extracted") for e in led.read(types=["field.verified"])}
        rows = []
        for e in led.read(types=["case.judged"]):
            case = opened[e.data["case_id"]]
            rows.append({"question_id": case.get("question_id"), "model": case.get("model"),
                         "text": case.get("response", {}).get("text") if isinstance(case.get("response"), dict) else None,
                         "parsed": parsed.get(e.data["case_id"]), "verdict": e.data["verdict"],
                         "expected": EXPECTED[case.get("model")]})
    return sorted(rows, key=lambda r: (r["question_id"], r["model"]))


def main(argv: list[str] | None = None) -> int:
    """Print the accuracy and the misses."""
    argv = sys.argv[1:] if argv is None else argv
    rows = verdicts(Path(argv[0]) if argv else HERE / "answers.benchmark.json")
    right = sum(r["verdict"] == r["expected"] for r in rows)
    print(f"offline judge on the held-out answers: {right}/{len(rows)} verdicts as expected")
    for r in rows:
        if r["verdict"] != r["expected"]:
            print(f"  miss {r['question_id']} {r['model']}: parsed {r['parsed']!r}, verdict {r['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
