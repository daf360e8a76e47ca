"""What the offline judge gets right on the sample benchmarks (benchmarks/samples/).

    python -m stages.judge.offline.evaluate [SAMPLES_DIR]

Ingests the samples into a temporary home, runs every stage with the offline judge (the real
pipeline: intake, dispatcher, primitives, credit scoring), and reads the outcome from the ledger:

- audit: credit scores against the cases' ``expected_credit_score`` (exact, within one, zone
  accuracy, cross-band confusion: the spec's metrics);
- template: fields verified and cases passed per model (``model-alpha`` answers everything
  correctly, so each of its failures is an error of the offline judge);
- reconstruction: each claim's score.

The numbers in docs/judge.md come from this script.
"""

from __future__ import annotations

import importlib.resources
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from evalledger import ledger

ZONES = {1: "BAD", 2: "BAD", 3: "MID", 4: "GOOD", 5: "GOOD"}


def run_samples(samples: Path, home: Path) -> None:
    """Ingest every sample file into ``home`` and run the stages offline until idle."""
    from evalledger.stages.dispatcher import RunSettings, run_until_idle
    from evalledger.stages.intake import ingest_path

    with ledger.open_ledger(home) as led:
        for path in sorted(samples.iterdir()):
            if path.suffix in (".json", ".jsonl", ".jsonld"):
                ingest_path(led, path)
        run_until_idle(led, RunSettings(judge_backend="offline"))


def audit_metrics(led) -> dict[str, Any]:
    """Exact, within-one, zone accuracy and cross-band confusion of the credit scores."""
    expected = {e.data["case_id"]: e.data["question"].get("expected_credit_score")
                for e in led.read(types=["case.opened"]) if e.data["kind"] == "audit"}
    pairs = [(expected[e.data["case_id"]], e.data["credit_score"]) for e in led.read(types=["credit.scored"])
             if expected.get(e.data["case_id"]) is not None]
    n = len(pairs)
    confusion = Counter((ZONES[want], ZONES[got]) for want, got in pairs)
    cross = confusion[("BAD", "GOOD")] + confusion[("GOOD", "BAD")]
    return {"cases": n, "exact": sum(w == g for w, g in pairs), "within_one": sum(abs(w - g) <= 1 for w, g in pairs),
            "zone": sum(ZONES[w] == ZONES[g] for w, g in pairs), "cross_band": cross,
            "confusion": {f"{a}->{b}": c for (a, b), c in sorted(confusion.items())}}


def template_metrics(led) -> dict[str, Any]:
    """Per model: fields verified (passed / decided) and cases passed."""
    model_of = {e.data["case_id"]: e.data.get("model") for e in led.read(types=["case.opened"])
                if e.data["kind"] == "template"}
    fields: dict[str, Counter] = defaultdict(Counter)
    for e in led.read(types=["field.verified"]):
        model = model_of.get(e.data["case_id"])
        outcome = {True: "passed", False: "failed", None: "undecided"}[e.data["passed"]]
        fields[model][outcome] += 1
    cases: dict[str, Counter] = defaultdict(Counter)
    for e in led.read(types=["case.judged"]):
        cases[model_of.get(e.data["case_id"])][e.data["verdict"]] += 1
    return {model: {"fields": dict(fields[model]), "cases": dict(cases[model])} for model in sorted(cases, key=str)}


def claim_scores(led) -> dict[str, int]:
    """Each scored claim's score, by claim id."""
    return {e.data["claim_id"]: e.data["score"] for e in led.read(types=["claim.scored"])}


def main(argv: list[str] | None = None) -> int:
    """Judge the samples offline in a temporary home and print how the offline judge did."""
    argv = sys.argv[1:] if argv is None else argv
    samples = Path(argv[0]) if argv else Path(str(importlib.resources.files("evalledger.samples")))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        run_samples(samples, home)
        with ledger.open_ledger(home) as led:
            audit, template, claims = audit_metrics(led), template_metrics(led), claim_scores(led)
    n = audit["cases"] or 1
    print(f"audit ({audit['cases']} cases): exact {audit['exact']}/{n}, within one {audit['within_one']}/{n}, "
          f"zone {audit['zone']}/{n} ({audit['zone'] / n:.0%}), cross-band {audit['cross_band']}/{n}")
    print(f"  zones expected->got: {audit['confusion']}")
    for model, m in template.items():
        print(f"template {model}: fields {m['fields']}, cases {m['cases']}")
    print(f"reconstruction claim scores: {claims}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
