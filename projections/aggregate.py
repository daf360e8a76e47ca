"""Assemble every aggregate from the read models: per benchmark x model, comparisons,
reconstruction AggregateStats, audit zone metrics, and the provenance every report states
(ledger head, judge backend and model, config hashes).

The result is the content of ``aggregate-stats.json``; the markdown renderers read it, so the
JSON and the markdown can never disagree.
"""

from __future__ import annotations

from typing import Any

from evalledger.projections.appliers import call_fields
from evalledger.projections.audit import audit_groups
from evalledger.projections.reconstruction import aggregate_stats, collection_aggregates
from evalledger.projections.repeats import group_repeats
from evalledger.projections.results import (
    compare_models,
    group_cases,
    group_summary,
    known_cost,
    per_field,
    per_trait,
    rounded_cost,
    usage_of,
)

OFFLINE_NOTE = "offline heuristic baseline, not a language model"


def judges_of(cases: list[dict], runs: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """The judges behind these cases: (backend, model) with call counts, plus those runs declared."""
    seen: dict[tuple[str, str], int] = {}
    for case in cases:
        count_calls(case, seen)
    return judge_list(seen, runs)


def count_calls(case: dict, seen: dict[tuple[str, str], int]) -> None:
    """Add one case's judge calls to ``seen``: (backend, model) -> calls (reports tally case by case)."""
    for stored in case["calls"].values():
        call = call_fields(stored)
        key = (_backend_label(call), str(call["model"]))
        seen[key] = seen.get(key, 0) + 1


def judge_list(seen: dict[tuple[str, str], int], runs: dict[str, dict] | None) -> list[dict[str, Any]]:
    """The judges as reports state them: the tallied calls, plus the judges the runs declared."""
    seen = dict(seen)
    for run in (runs or {}).values():
        started = run.get("started") or {}
        judge = started.get("judge") if isinstance(started.get("judge"), dict) else {}
        backend = started.get("backend") or judge.get("backend")
        if backend:
            key = (str(backend), str(started.get("model") or judge.get("model")))
            seen.setdefault(key, 0)
    return [{"backend": b, "model": m, "calls": n,
             "note": OFFLINE_NOTE if b in ("offline", "replay of offline") else None}
            for (b, m), n in sorted(seen.items())]


def _backend_label(call: dict) -> str:
    """The backend that answered: a replayed call names the backend that first answered it."""
    backend = str(call["backend"])
    source = call.get("source_backend")
    return f"replay of {source}" if backend == "replay" and source else backend


def config_hashes_of(cases: list[dict], runs: dict[str, dict] | None = None) -> list[str]:
    """Every config hash the stages stamped on these cases' events, plus those of the runs."""
    return hash_list({h for case in cases for h in case["config_hashes"]}, runs)


def hash_list(hashes: set[str], runs: dict[str, dict] | None) -> list[str]:
    """The cases' config hashes (``hashes``) with those the runs declared, sorted."""
    hashes = set(hashes)
    for run in (runs or {}).values():
        for part in (run.get("started") or {}, run.get("completed") or {}):
            if part.get("config_hash"):
                hashes.add(str(part["config_hash"]))
            hashes.update(str(h) for h in (part.get("configs") or {}))
    return sorted(hashes)


def configs_by_hash(runs: dict[str, dict] | None) -> dict[str, Any]:
    """The effective configs the runs declared, keyed by config hash.

    Keyed by hash, not by run: a daemon restarted after a crash starts more runs (with random run
    ids) under the same configs, and the reports must equal those of an uninterrupted run.
    """
    out: dict[str, Any] = {}
    for run in (runs or {}).values():
        for part in (run.get("started") or {}, run.get("completed") or {}):
            for digest, config in (part.get("configs") or {}).items():
                out.setdefault(str(digest), config)  # a hash names one config: first is as good as any
    return dict(sorted(out.items()))


def provenance(position: tuple[int, str], cases: list[dict], runs: dict | None,
               checkpoint: dict | None = None) -> dict[str, Any]:
    """What a report was built from: ledger head, the latest signed checkpoint, judges, config hashes."""
    return {"ledger_head": {"seq": position[0], "hash": position[1]},
            "checkpoint": checkpoint_provenance(checkpoint, position),
            "judges": judges_of(cases, runs), "config_hashes": config_hashes_of(cases, runs)}


def checkpoint_provenance(checkpoint: dict | None, position: tuple[int, str]) -> dict[str, Any] | None:
    """The latest checkpoint as a report states it (None when none was signed), with how many
    events the report's head holds beyond it: those no signature covers yet."""
    if not checkpoint:
        return None
    seq = checkpoint.get("seq") if isinstance(checkpoint.get("seq"), int) else 0
    return {**checkpoint, "events_after": max(0, position[0] - seq)}


def benchmark_kind(benchmark: dict | None, cases: list[dict]) -> str | None:
    """The benchmark's kind: as registered, else the first of its cases' kinds (None without cases)."""
    if benchmark and benchmark.get("kind"):
        return benchmark["kind"]
    kinds = sorted({str(c["kind"]) for c in cases})
    return kinds[0] if kinds else None


def benchmark_aggregates(benchmark_id: str, benchmark: dict | None, cases: list[dict]) -> dict[str, Any]:
    """Everything computed for one benchmark (cases sorted by id)."""
    by_model = {model: group for (_, model), group in group_cases(cases).items()}
    kind = benchmark_kind(benchmark, cases)
    out: dict[str, Any] = {
        "benchmark": benchmark_id, "name": (benchmark or {}).get("name"), "kind": kind,
        "registered": benchmark is not None,
        "question_count": (benchmark or {}).get("question_count"),
        "rejected_questions": (benchmark or {}).get("rejected_questions", []),
        "models": {m: _model_aggregates(g) for m, g in by_model.items()},
        "comparisons": compare_models(benchmark_id, by_model),
        **{k: benchmark[k] for k in ("version", "previous", "changes") if benchmark and benchmark.get(k)},
    }
    recon = {m: aggregate_stats(g) for m, g in by_model.items() if any(c["kind"] == "reconstruction" for c in g)}
    if recon:
        out["reconstruction"] = recon
    audited = [c for c in cases if c["kind"] == "audit"]
    if audited:
        out["audit"] = audit_groups(audited)
    return out


def _model_aggregates(cases: list[dict]) -> dict[str, Any]:
    """One benchmark x model: the summary, per field, per trait, and (judged K > 1 times) the repeats."""
    out = {**group_summary(cases), "per_field": per_field(cases), "per_trait": per_trait(cases)}
    repeats = group_repeats(cases)
    if repeats is not None:   # a run without repeats keeps its bytes
        out["repeats"] = repeats
    return out


def judging_totals(cases: list[dict]) -> dict[str, Any]:
    """Judge calls, tokens and cost over every case (cost None, unknown, when a call was unpriced)."""
    usages = [usage_of(c) for c in cases]
    return {"judge_calls": sum(u["judge_calls"] for u in usages), "tokens": sum(u["tokens"] for u in usages),
            "cost": rounded_cost(known_cost(u["cost"] for u in usages)),
            "unpriced_calls": sum(u["unpriced_calls"] for u in usages)}


def build_aggregates(position: tuple[int, str], cases: list[dict], benchmarks: dict[str, dict],
                     runs: dict[str, dict], checkpoint: dict | None = None) -> dict[str, Any]:
    """The whole ``aggregate-stats.json`` document (``checkpoint``: the latest signed, if any)."""
    by_benchmark: dict[str, list[dict]] = {}
    for case in cases:
        by_benchmark.setdefault(str(case["benchmark"]), []).append(case)
    registered = {k: v for k, v in benchmarks.items() if v.get("benchmark") is not None}
    ids = sorted(set(by_benchmark) | set(registered))
    return {
        **provenance(position, cases, runs, checkpoint),
        "configs": configs_by_hash(runs),
        "totals": judging_totals(cases),
        "benchmarks": {b: benchmark_aggregates(b, registered.get(b), sorted(by_benchmark.get(b, []),
                                                                            key=lambda c: c["case_id"]))
                       for b in ids},
        "rejected_files": [{"file": v["rejected_file"], "errors": v["errors"]}
                           for k, v in sorted(benchmarks.items()) if v.get("benchmark") is None],
        "reconstruction_collections": collection_aggregates(cases),
    }
