"""How far the judge agrees with reviewers: the reviewed cases, kappa with its interval, the 2x2
table and the disagreements (``evalledger agreement``, ``reports/agreement.md``).

A reviewer label is the latest reviewer event of a template case's stream: ``verdict.overridden``
(the reviewer's verdict) or ``verdict.confirmed`` (the judge's verdict, confirmed). The judge's
label is the stages' verdict (``case.judged``). A case reviewed but never judged has no judge
label and is only counted. Pure functions of case states (sorted by id): same events, same bytes.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from evalledger.projections.agreement_stats import (
    cohen_kappa,
    confusion_2x2,
    kappa_bootstrap_interval,
    percent_agreement,
    table_of_2x2,
)
from evalledger.projections.markdown import checkpoint_line
from evalledger.projections.results import original_verdict
from evalledger.projections.stats import rnd, seed_for

ALL = "all reviewed cases"


def reviewer_label(case: dict) -> dict[str, Any] | None:
    """The latest reviewer event of a case: verdict, author, reason and ``kind`` (override or confirm)."""
    reviews = [("override", o) for o in case.get("overrides") or []]
    reviews += [("confirm", c) for c in case.get("confirmations") or []]
    if not reviews:
        return None
    kind, latest = max(reviews, key=lambda r: (r[1]["v"], r[1]["id"]))
    return {"verdict": latest["verdict"], "author": latest["author"], "reason": latest["reason"], "kind": kind}


def judge_group(case: dict) -> str | None:
    """The judge profile a case was judged under (``profile`` of its config), None when unnamed.

    Agreement is reported per profile when any case names one, so two profiles in one home are
    compared with their reviewers separately (the profiles of issue 12 put the name there).
    """
    profile = (case.get("config") or {}).get("profile")
    return str(profile) if profile is not None else None


def reviewed_pairs(cases: Iterable[dict]) -> tuple[list[dict[str, Any]], int]:
    """(one row per reviewed template case with a judge verdict, count reviewed but never judged)."""
    rows, unjudged = [], 0
    for case in cases:
        label = reviewer_label(case)
        if label is None or case["kind"] != "template":
            continue
        judge = original_verdict(case)
        if judge is None:
            unjudged += 1
            continue
        rows.append({"case_id": case["case_id"], "benchmark": case["benchmark"], "model": case["model"],
                     "question_id": case["question_id"], "profile": judge_group(case), "judge": judge,
                     "reviewer": label["verdict"], "review": label["kind"], "author": label["author"],
                     "reason": label["reason"]})
    return rows, unjudged


def agreement_summary(rows: list[dict[str, Any]], seed_name: str) -> dict[str, Any]:
    """Kappa, its bootstrap interval, percent agreement and the 2x2 table (A = judge, B = reviewer)."""
    cells = confusion_2x2((r["judge"], r["reviewer"]) for r in rows)
    table = table_of_2x2(cells)
    interval = kappa_bootstrap_interval(table, seed_for("agreement", seed_name))
    return {"n": len(rows), "confusion": cells, "percent_agreement": rnd(percent_agreement(table)),
            "cohen_kappa": rnd(cohen_kappa(table)),
            "kappa_ci95": [rnd(interval[0]), rnd(interval[1])] if interval else None}


def reviewer_agreement(cases: Iterable[dict]) -> dict[str, Any]:
    """The whole judge-vs-reviewer document ``evalledger agreement --json`` prints."""
    rows, unjudged = reviewed_pairs(cases)
    doc: dict[str, Any] = {"reviewed": len(rows), "reviewed_not_judged": unjudged,
                           "overall": agreement_summary(rows, ALL)}
    benchmarks = sorted({str(r["benchmark"]) for r in rows})
    doc["by_benchmark"] = {b: agreement_summary([r for r in rows if str(r["benchmark"]) == b], b)
                           for b in benchmarks}
    profiles = sorted({r["profile"] for r in rows if r["profile"] is not None})
    if profiles:
        doc["by_profile"] = {p: agreement_summary([r for r in rows if r["profile"] == p], "profile:" + p)
                             for p in profiles}
    doc["disagreements"] = [{k: r[k] for k in ("case_id", "benchmark", "model", "question_id", "judge",
                                                "reviewer", "author", "reason")}
                            for r in rows if r["judge"] != r["reviewer"]]
    return doc


def _number(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:.2f}%" if percent else f"{value:.4f}"


def _interval(summary: dict) -> str:
    ci = summary["kappa_ci95"]
    return "n/a" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _cell(text: Any) -> str:
    """A value from a file or a reviewer as one table cell of plain text: printable characters only,
    pipes escaped, '<' '>' '&' as entities so a viewer never renders them as HTML, and no link."""
    value = "".join(c if c.isprintable() else " " for c in str(text))[:200]
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # An escaped "]" before "(" or "[" closes no link; "\://" is no bare URL a viewer links.
    value = re.sub(r"\](?=[(\[])", r"\\]", value).replace("://", "\\://")
    return value.replace("|", "\\|")


def format_agreement(doc: dict[str, Any]) -> list[str]:
    """The agreement document as markdown lines (used by the report file and the command)."""
    overall = doc["overall"]
    cells = overall["confusion"]
    lines = [f"Reviewed template cases with a judge verdict: {doc['reviewed']}"
             f" (reviewed but never judged: {doc['reviewed_not_judged']}).", ""]
    lines += ["| scope | n | Cohen's kappa | 95% bootstrap interval | percent agreement |", "|---|---|---|---|---|"]
    scopes = [(ALL, overall)] + [(f"benchmark {b}", s) for b, s in doc["by_benchmark"].items()]
    scopes += [(f"profile {p}", s) for p, s in doc.get("by_profile", {}).items()]
    for name, s in scopes:
        lines.append(f"| {_cell(name)} | {s['n']} | {_number(s['cohen_kappa'])} | {_interval(s)} | "
                     f"{_number(s['percent_agreement'], percent=True)} |")
    lines += ["", "Percent agreement counts agreement by chance too; kappa corrects for it.", "",
              "| judge \\ reviewer | pass | fail |", "|---|---|---|",
              f"| pass | {cells['both_pass']} | {cells['a_pass_b_fail']} |",
              f"| fail | {cells['a_fail_b_pass']} | {cells['both_fail']} |", ""]
    lines.append(f"## Disagreements ({len(doc['disagreements'])})")
    lines.append("")
    if not doc["disagreements"]:
        lines.append("None.")
    else:
        lines += ["| case | benchmark | model | question | judge | reviewer | by | reason | history |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for d in doc["disagreements"]:
            lines.append(f"| {d['case_id']} | {_cell(d['benchmark'])} | {_cell(d['model'])} | "
                         f"{_cell(d['question_id'])} | {d['judge']} | {d['reviewer']} | {_cell(d['author'])} | "
                         f"{_cell(d['reason'])} | `evalledger history {d['case_id']}` |")
    return lines


def render_agreement(doc: dict[str, Any], ledger_head: dict[str, Any],
                     checkpoint: dict[str, Any] | None = None) -> str:
    """``reports/agreement.md``: the judge against its reviewers, built from the named head (and
    under the named checkpoint)."""
    lines = ["# Agreement of the judge with reviewers", "",
             f"- Built from ledger head: seq {ledger_head['seq']}, hash `{ledger_head['hash']}`",
             checkpoint_line(checkpoint), "",
             "Reviewer labels are the latest `verdict.overridden` or `verdict.confirmed` of each case "
             "(`evalledger override`, `evalledger confirm`); the judge's label is its `case.judged` verdict.",
             ""]
    return "\n".join(lines + format_agreement(doc)) + "\n"
