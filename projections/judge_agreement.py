"""How far two judges agree (``evalledger agreement --against OTHER_HOME``, or ``--profiles A,B``):
the same cases judged in two homes (case ids are derived from content, so a replay or a second
judge's run over the same files has the same ids), or under two profiles in one home (each profile
case names the case it was opened from).

Verdicts: the 2x2 table, Cohen's kappa with its bootstrap interval, percent agreement and McNemar's
exact test on the discordant pairs. Fields: agreement on ``passed``. Traits: kappa on boolean
scores, linear and quadratic weighted kappa on integer scores (categories min..max seen), the mean
absolute difference on other numbers. Claims: the mean absolute difference of claim scores.
Pure functions of two lists of case states (sorted by id).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from evalledger.projections.agreement_stats import (
    cohen_kappa,
    confusion_2x2,
    confusion_table,
    kappa_bootstrap_interval,
    mcnemar_exact,
    percent_agreement,
    table_of_2x2,
    weighted_kappa,
)
from evalledger.projections.results import original_verdict
from evalledger.projections.stats import rnd, seed_for


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def verdict_agreement(pairs: list[tuple[str, str]], seed_name: str) -> dict[str, Any]:
    """The judge-vs-judge verdict summary of (A, B) pairs: table, kappa, interval, agreement, McNemar."""
    cells = confusion_2x2(pairs)
    table = table_of_2x2(cells)
    interval = kappa_bootstrap_interval(table, seed_for("judges", seed_name))
    return {"n": len(pairs), "confusion": cells, "percent_agreement": rnd(percent_agreement(table)),
            "cohen_kappa": rnd(cohen_kappa(table)),
            "kappa_ci95": [rnd(interval[0]), rnd(interval[1])] if interval else None,
            "mcnemar_p": rnd(mcnemar_exact(cells["a_pass_b_fail"], cells["a_fail_b_pass"]))}


def _boolean_agreement(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    table = confusion_table(pairs, (True, False))
    return {"n": len(pairs), "kind": "boolean", "percent_agreement": rnd(percent_agreement(table)),
            "cohen_kappa": rnd(cohen_kappa(table))}


def score_agreement(pairs: list[tuple[Any, Any]]) -> dict[str, Any] | None:
    """Agreement of one trait's scores: boolean, integer (weighted kappa) or real (mean |A - B|)."""
    if not pairs:
        return None
    if all(isinstance(a, bool) and isinstance(b, bool) for a, b in pairs):
        return _boolean_agreement(pairs)
    if not all(_number(a) and _number(b) for a, b in pairs):
        return {"n": len(pairs), "kind": "mixed", "percent_agreement": rnd(sum(a == b for a, b in pairs) / len(pairs))}
    mad = rnd(math.fsum(abs(a - b) for a, b in pairs) / len(pairs))
    if all(float(a).is_integer() and float(b).is_integer() for a, b in pairs):
        low = int(min(min(a, b) for a, b in pairs))
        high = int(max(max(a, b) for a, b in pairs))
        table = confusion_table(((int(a), int(b)) for a, b in pairs), range(low, high + 1))
        return {"n": len(pairs), "kind": "integer", "percent_agreement": rnd(percent_agreement(table)),
                "weighted_kappa_linear": rnd(weighted_kappa(table, "linear")),
                "weighted_kappa_quadratic": rnd(weighted_kappa(table, "quadratic")), "mean_abs_difference": mad}
    return {"n": len(pairs), "kind": "real", "mean_abs_difference": mad}


def judge_agreement(cases_a: Iterable[dict], cases_b: Iterable[dict]) -> dict[str, Any]:
    """The whole judge-vs-judge document: verdicts overall and per benchmark, fields, traits, claims."""
    by_id_b = {c["case_id"]: c for c in cases_b}
    verdicts: list[tuple[str, str, str]] = []
    fields: dict[str, list[tuple[bool, bool]]] = {}
    traits: dict[str, list[tuple[Any, Any]]] = {}
    claim_diffs: list[float] = []
    disagreements, common = [], 0
    for a in cases_a:
        b = by_id_b.get(a["case_id"])
        if b is None:
            continue
        common += 1
        va, vb = original_verdict(a), original_verdict(b)
        if a["kind"] == "template" and va is not None and vb is not None:
            verdicts.append((str(a["benchmark"]), va, vb))
            if va != vb:
                disagreements.append({"case_id": a["case_id"], "benchmark": a["benchmark"], "model": a["model"],
                                      "question_id": a["question_id"], "a": va, "b": vb})
        for name in sorted(set(a["fields"]) & set(b["fields"])):
            pa, pb = a["fields"][name].get("passed"), b["fields"][name].get("passed")
            if isinstance(pa, bool) and isinstance(pb, bool):
                fields.setdefault(name, []).append((pa, pb))
        for name in sorted(set(a["traits"]) & set(b["traits"])):
            sa, sb = a["traits"][name].get("score"), b["traits"][name].get("score")
            if sa is not None and sb is not None:
                traits.setdefault(name, []).append((sa, sb))
        for claim in sorted(set(a["claims"]) & set(b["claims"])):
            ca, cb = a["claims"][claim].get("score"), b["claims"][claim].get("score")
            if _number(ca) and _number(cb):
                claim_diffs.append(abs(ca - cb))
    benchmarks = sorted({v[0] for v in verdicts})
    return {
        "cases_in_both": common,
        "verdicts": verdict_agreement([(va, vb) for _, va, vb in verdicts], "all"),
        "verdicts_by_benchmark": {bench: verdict_agreement([(va, vb) for b, va, vb in verdicts if b == bench], bench)
                                  for bench in benchmarks},
        "fields": {name: _boolean_agreement(pairs) for name, pairs in sorted(fields.items())},
        "traits": {name: score_agreement(pairs) for name, pairs in sorted(traits.items())},
        "claims": {"n": len(claim_diffs),
                   "mean_abs_difference": rnd(math.fsum(claim_diffs) / len(claim_diffs)) if claim_diffs else None},
        "disagreements": disagreements,
    }


def profile_pairs(cases: Iterable[dict], origins: dict[str, str], a: str, b: str) -> tuple[list[dict], list[dict]]:
    """Profile ``a``'s and ``b``'s cases, ``b``'s renamed to the id of ``a``'s case of the same origin
    (``origins``: profile case id -> what it was judged on), so that ``judge_agreement`` pairs the two
    judges' verdicts on the same question and response and names ``a``'s case in disagreements."""
    cases = list(cases)
    ours = [c for c in cases if c.get("profile") == a and c["case_id"] in origins]
    id_of = {origins[c["case_id"]]: c["case_id"] for c in ours}
    theirs = [{**c, "case_id": id_of[origins[c["case_id"]]]} for c in cases
              if c.get("profile") == b and origins.get(c["case_id"]) in id_of]
    return ours, theirs


def _fmt(value: Any, percent: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.2f}%" if percent else f"{value:.4f}"


def format_judge_agreement(doc: dict[str, Any], label_a: str, label_b: str) -> str:
    """The judge-vs-judge document as text for the terminal."""
    v = doc["verdicts"]
    cells = v["confusion"]
    ci = v["kappa_ci95"]
    lines = [f"A: {label_a}", f"B: {label_b}", f"cases in both homes: {doc['cases_in_both']}",
             f"verdicts compared: {v['n']}", f"Cohen's kappa {_fmt(v['cohen_kappa'])} (95% bootstrap interval "
             + ("n/a" if ci is None else f"{ci[0]:.4f} to {ci[1]:.4f}") + f"), percent agreement "
             f"{_fmt(v['percent_agreement'], percent=True)}",
             f"both pass {cells['both_pass']}, A only {cells['a_pass_b_fail']}, B only {cells['a_fail_b_pass']}, "
             f"both fail {cells['both_fail']}; McNemar exact p = {_fmt(v['mcnemar_p'])}"]
    for bench, s in doc["verdicts_by_benchmark"].items():
        lines.append(f"  benchmark {bench}: n {s['n']}, kappa {_fmt(s['cohen_kappa'])}, "
                     f"agreement {_fmt(s['percent_agreement'], percent=True)}, McNemar p {_fmt(s['mcnemar_p'])}")
    for name, s in doc["fields"].items():
        lines.append(f"field {name}: n {s['n']}, kappa {_fmt(s['cohen_kappa'])}, "
                     f"agreement {_fmt(s['percent_agreement'], percent=True)}")
    for name, s in doc["traits"].items():
        if s["kind"] == "integer":
            lines.append(f"trait {name}: n {s['n']}, weighted kappa linear {_fmt(s['weighted_kappa_linear'])}, "
                         f"quadratic {_fmt(s['weighted_kappa_quadratic'])}, mean |A-B| {_fmt(s['mean_abs_difference'])}")
        elif s["kind"] == "boolean":
            lines.append(f"trait {name}: n {s['n']}, kappa {_fmt(s['cohen_kappa'])}, "
                         f"agreement {_fmt(s['percent_agreement'], percent=True)}")
        elif s["kind"] == "real":
            lines.append(f"trait {name}: n {s['n']}, mean |A-B| {_fmt(s['mean_abs_difference'])}")
        else:
            lines.append(f"trait {name}: n {s['n']}, scores of mixed kinds, "
                         f"agreement {_fmt(s['percent_agreement'], percent=True)}")
    if doc["claims"]["n"]:
        lines.append(f"claims: n {doc['claims']['n']}, mean |A-B| {_fmt(doc['claims']['mean_abs_difference'])}")
    lines.append(f"verdict disagreements: {len(doc['disagreements'])}")
    for d in doc["disagreements"]:
        lines.append(f"  case {d['case_id']} ({d['benchmark']} / {d['model']} / {d['question_id']}): "
                     f"A {d['a']}, B {d['b']}; evalledger history {d['case_id']}")
    return "\n".join(lines) + "\n"
