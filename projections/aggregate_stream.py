"""``aggregate-stats.json`` tallied case by case: the same document as ``aggregate.build_aggregates``
without holding every case.

Cases arrive one at a time in case-id order (``AggregateBuilder.add``). A benchmark whose cases are
all template cases is tallied as it goes: counts and sums per benchmark x model, costs and trait
scores as exact sums (``ExactSum``: what ``math.fsum`` of them all gives), the paired comparison
counted by the caller (in SQL, from the spilled report rows), and only the cases that were
judged more than once (repeats). A benchmark with any other kind of case (reconstruction, audit: their statistics read
whole cases) keeps its cases and goes through ``aggregate.benchmark_aggregates`` as before; so do
the reviewed cases (agreement) and the reconstruction cases (collections). Memory then grows with
the rare cases, not with every case.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from evalledger.projections.aggregate import (
    benchmark_aggregates,
    checkpoint_provenance,
    configs_by_hash,
    count_calls,
    hash_list,
    judge_list,
)
from evalledger.projections.reconstruction import collection_aggregates
from evalledger.projections.repeats import group_repeats
from evalledger.projections.results import (
    NUMERIC,
    PairCounts,
    case_status,
    compare_pairs,
    effective_verdict,
    excerpt_retry_count,
    group_label,
    is_auto_failed,
    override_of,
    pass_rate,
    rounded_cost,
    usage_of,
)
from evalledger.projections.stats import ratio, rnd, wilson_interval

PairCounter = Callable[[str, str, str], "PairCounts | None"]   # (benchmark, group a, group b) -> counts
_USAGE_SUMS = ("judge_calls", "judge_retries", "judge_errors", "input_tokens", "output_tokens", "tokens",
               "unpriced_calls")


class ExactSum:
    """A sum of floats kept exact as a few non-overlapping partials (Shewchuk's algorithm, as
    ``math.fsum`` uses): ``value()`` equals ``math.fsum`` of every value added, in constant memory
    (in any order, unless a partial sum passes the largest float: then it raises as ``fsum`` does
    for that order, and reports add in case-id order as the in-memory sums did)."""

    def __init__(self) -> None:
        self.count = 0
        self.partials: list[float] = []
        self.specials: list[float] = []   # inf, -inf, nan: each at most once (fsum's result is the same)

    def add(self, value: float) -> None:
        """Add one value (converted to float, as ``math.fsum`` converts it). As ``math.fsum`` does
        for the same values in the same order: a finite sum that overflows raises OverflowError
        (rather than going on as inf or nan), and an inf or nan drops the partials so far."""
        x = float(value)
        self.count += 1
        if not math.isfinite(x):
            if not any(repr(x) == repr(s) for s in self.specials):
                self.specials.append(x)
            self.partials = []
            return
        i = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self.partials[i] = lo
                i += 1
            x = hi
        if not math.isfinite(x):
            raise OverflowError("intermediate overflow in fsum")
        self.partials[i:] = [x]

    def value(self) -> float:
        """The correctly rounded sum of every value added."""
        return math.fsum(self.specials + self.partials)


class CostSum:
    """``known_cost`` over cases added one by one: None once a cost is unknown, else the fsum of
    every cost."""

    def __init__(self) -> None:
        self.costs: ExactSum | None = ExactSum()

    def add(self, cost: float | None) -> None:
        """Add one case's cost (None: unknown, and so is the sum)."""
        if cost is None:
            self.costs = None
        elif self.costs is not None:
            self.costs.add(cost)

    def total(self) -> float | None:
        """The rounded sum as reports state it (None when a cost was unknown)."""
        return rounded_cost(None if self.costs is None else self.costs.value())


class JudgeTally:
    """The judges and config hashes behind some cases (``aggregate.provenance``), tallied."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], int] = {}
        self.hashes: set[str] = set()

    def add(self, case: dict) -> None:
        """Count one case's judge calls and config hashes."""
        count_calls(case, self.calls)
        self.hashes.update(case["config_hashes"])

    def provenance(self, position: tuple[int, str], runs: dict | None, checkpoint: dict | None = None) -> dict:
        """``aggregate.provenance`` of the cases tallied."""
        return {"ledger_head": {"seq": position[0], "hash": position[1]},
                "checkpoint": checkpoint_provenance(checkpoint, position),
                "judges": judge_list(self.calls, runs), "config_hashes": hash_list(self.hashes, runs)}


class TraitTally:
    """One rubric trait of one group: ``results.per_trait``'s numbers, tallied."""

    def __init__(self) -> None:
        self.scored = 0
        self.auto_failed = 0
        self.booleans = 0
        self.trues = 0
        self.numbers = ExactSum()

    def add(self, score: Any) -> None:
        """Count one score (a boolean, a number, or anything else: scored but neither)."""
        self.scored += 1
        if isinstance(score, bool):
            self.booleans += 1
            self.trues += score
        elif isinstance(score, NUMERIC):
            self.numbers.add(score)

    def summary(self) -> dict[str, Any]:
        """The trait's row of ``per_trait``."""
        numbers = self.numbers
        return {"scored": self.scored, "auto_failed": self.auto_failed,
                "mean_score": rnd(numbers.value() / numbers.count) if numbers.count else None,
                "true_rate": rnd(ratio(self.trues, self.booleans)) if self.booleans else None}


class GroupTally:
    """One benchmark x model (or model [profile]) of template cases: ``aggregate._model_aggregates``
    tallied case by case."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(("cases", "judged", "failed", "pending", "passed", "failed_verdict",
                                     "with_verdict", "auto_failed", "abstained", "overridden",
                                     "excerpt_retries", *_USAGE_SUMS), 0)
        self.cost = CostSum()
        self.fields: dict[str, dict[str, int]] = {}
        self.traits: dict[str, TraitTally] = {}
        self.repeated: list[dict] = []

    def add(self, case: dict, usage: dict[str, Any]) -> None:
        """Tally one case (cases come in case-id order; ``usage``: its ``usage_of``)."""
        c = self.counts
        status = case_status(case)
        verdict = effective_verdict(case)
        c["cases"] += 1
        c[status] += 1
        c["passed"] += verdict == "pass"
        c["failed_verdict"] += verdict == "fail"
        c["with_verdict"] += verdict is not None
        c["auto_failed"] += is_auto_failed(case)
        c["abstained"] += case.get("abstention") is not None
        c["overridden"] += override_of(case) is not None   # a confirmation after it undoes it
        c["excerpt_retries"] += excerpt_retry_count(case)
        for key in _USAGE_SUMS:
            c[key] += usage[key]
        self.cost.add(usage["cost"])
        for name, field in case["fields"].items():
            row = self.fields.setdefault(name, {"verified": 0, "passed": 0, "failed": 0, "undecided": 0})
            row["verified"] += 1
            row[{True: "passed", False: "failed"}.get(field["passed"], "undecided")] += 1
        for name, trait in case["traits"].items():
            self.traits.setdefault(name, TraitTally()).add(trait["score"])
        for name in case["traits_auto_failed"]:
            self.traits.setdefault(name, TraitTally()).auto_failed += 1
        if (case.get("repeats") or {}).get("runs"):
            self.repeated.append(case)

    def aggregates(self) -> dict[str, Any]:
        """The group's entry in a benchmark's ``models``: summary, per field, per trait, repeats."""
        out = {**self.summary(), "per_field": self.per_field(),
               "per_trait": {name: self.traits[name].summary() for name in sorted(self.traits)}}
        repeats = group_repeats(self.repeated)
        if repeats is not None:
            out["repeats"] = repeats
        return out

    def summary(self) -> dict[str, Any]:
        """``results.group_summary`` of the cases tallied."""
        c = self.counts
        n, passed, with_verdict = c["cases"], c["passed"], c["with_verdict"]
        interval = wilson_interval(passed, n) if with_verdict else None
        return {
            "cases": n, "judged": c["judged"], "failed": c["failed"], "pending": c["pending"], "passed": passed,
            "failed_verdict": c["failed_verdict"], "pass_rate": pass_rate(passed, n, with_verdict),
            "pass_rate_ci95": [rnd(interval[0]), rnd(interval[1])] if interval else None,
            "auto_failed": c["auto_failed"], "auto_fail_rate": rnd(ratio(c["auto_failed"], n)),
            "abstained": c["abstained"], "abstention_rate": rnd(ratio(c["abstained"], n)),
            "overridden": c["overridden"], "excerpt_retries": c["excerpt_retries"],
            **{key: c[key] for key in _USAGE_SUMS[:-1]}, "cost": self.cost.total(),
            "unpriced_calls": c["unpriced_calls"],
        }

    def per_field(self) -> dict[str, dict[str, Any]]:
        """``results.per_field`` of the cases tallied."""
        return {name: {**row, "pass_rate": rnd(ratio(row["passed"], row["passed"] + row["failed"]))}
                for name, row in sorted(self.fields.items())}


class BenchmarkTally:
    """One benchmark: its provenance, kinds, and either a tally per group (template cases only)
    or, for a benchmark with other kinds, its cases themselves."""

    def __init__(self, whole: bool) -> None:
        self.judges = JudgeTally()
        self.kinds: set[str] = set()
        self.groups: dict[str, GroupTally] = {}
        self.cases: list[dict] | None = [] if whole else None

    def add(self, case: dict, usage: dict[str, Any]) -> None:
        """Tally (or keep) one case of the benchmark (``usage``: its ``usage_of``)."""
        self.judges.add(case)
        self.kinds.add(str(case["kind"]))
        if self.cases is not None:
            self.cases.append(case)
        elif case["kind"] != "template":   # the caller names every such benchmark up front
            raise ValueError(f"benchmark {case['benchmark']!r}: a {case['kind']} case in a tallied benchmark")
        else:
            self.groups.setdefault(group_label(case), GroupTally()).add(case, usage)

    def aggregates(self, benchmark_id: str, benchmark: dict | None, pairs: PairCounter) -> dict[str, Any]:
        """``aggregate.benchmark_aggregates`` of this benchmark (``pairs``: the paired counts of
        two of its groups, for the model comparisons)."""
        if self.cases is not None:
            return benchmark_aggregates(benchmark_id, benchmark, self.cases)
        models = sorted(self.groups)
        return {
            "benchmark": benchmark_id, "name": (benchmark or {}).get("name"),
            "kind": (benchmark or {}).get("kind") or (min(self.kinds) if self.kinds else None),
            "registered": benchmark is not None,
            "question_count": (benchmark or {}).get("question_count"),
            "rejected_questions": (benchmark or {}).get("rejected_questions", []),
            "models": {m: self.groups[m].aggregates() for m in models},
            "comparisons": compare_pairs(benchmark_id, models, lambda a, b: pairs(benchmark_id, a, b)),
            **{k: benchmark[k] for k in ("version", "previous", "changes") if benchmark and benchmark.get(k)},
        }


class AggregateBuilder:
    """Takes every case state in case-id order (``add``) and gives ``build_aggregates``'s document
    (``finish``). ``whole``: the benchmarks (as ``str``) whose cases are kept whole."""

    def __init__(self, whole: set[str]) -> None:
        self.whole = whole
        self.judges = JudgeTally()
        self.totals = dict.fromkeys(("judge_calls", "tokens", "unpriced_calls"), 0)
        self.cost = CostSum()
        self.benchmarks: dict[str, BenchmarkTally] = {}
        self.reviewed: list[dict] = []        # for the reviewer agreement
        self.reconstructions: list[dict] = []  # for the collections

    def add(self, case: dict) -> None:
        """Tally one case (its aggregate facts: ``reports.aggregate_facts``)."""
        self.judges.add(case)
        usage = usage_of(case)
        for key in self.totals:
            self.totals[key] += usage[key]
        self.cost.add(usage["cost"])
        bench = str(case["benchmark"])
        if bench not in self.benchmarks:
            self.benchmarks[bench] = BenchmarkTally(whole=bench in self.whole or case["kind"] != "template")
        self.benchmarks[bench].add(case, usage)
        if case.get("overrides") or case.get("confirmations"):
            self.reviewed.append(case)
        if case["kind"] == "reconstruction":
            self.reconstructions.append(case)

    def benchmark_provenance(self, bench: str, position: tuple[int, str]) -> dict[str, Any]:
        """``aggregate.provenance`` of one benchmark's cases (no runs, no checkpoint)."""
        tally = self.benchmarks.get(bench)
        return (tally.judges if tally else JudgeTally()).provenance(position, None)

    def benchmark_cases(self, bench: str) -> list[dict]:
        """The cases kept whole for one benchmark ([] for a tallied one)."""
        tally = self.benchmarks.get(bench)
        return (tally.cases or []) if tally else []

    def finish(self, position: tuple[int, str], benchmarks: dict[str, dict], runs: dict[str, dict],
               checkpoint: dict | None, pairs: PairCounter) -> dict[str, Any]:
        """The whole ``aggregate-stats.json`` document, equal to ``build_aggregates``'s (``pairs``:
        two groups' counts over their shared questions, ``report_rows.ReportRows.paired_counts``)."""
        registered = {k: v for k, v in benchmarks.items() if v.get("benchmark") is not None}
        empty = BenchmarkTally(whole=False)
        return {
            **self.judges.provenance(position, runs, checkpoint),
            "configs": configs_by_hash(runs),
            "totals": {"judge_calls": self.totals["judge_calls"], "tokens": self.totals["tokens"],
                       "cost": self.cost.total(), "unpriced_calls": self.totals["unpriced_calls"]},
            "benchmarks": {b: self.benchmarks.get(b, empty).aggregates(b, registered.get(b), pairs)
                           for b in sorted(set(self.benchmarks) | set(registered))},
            "rejected_files": [{"file": v["rejected_file"], "errors": v["errors"]}
                               for k, v in sorted(benchmarks.items()) if v.get("benchmark") is None],
            "reconstruction_collections": collection_aggregates(self.reconstructions),
        }
