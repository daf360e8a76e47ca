"""The per-benchmark ``report.md`` (models side by side) and the per-document reconstruction report.

Numbers come from the aggregate document and from ``case_result``; this module only lays them out.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator

from evalledger.projections.markdown import (
    Markdown,
    audit_section,
    cell,
    comparison_section,
    fmt,
    label_text,
    link,
    pct,
    provenance_lines,
    reconstruction_section,
    summary_header,
    summary_rows,
    table,
    text,
    usd,
)
from evalledger.projections.reconstruction import band_labels
from evalledger.projections.results import group_label
from evalledger.projections.wording import count_of


def natural_key(text: str) -> list:
    """Sort "q2" before "q10" and "2" before "10": digit runs compare as numbers.

    The split's odd parts are its decimal-digit runs (``\\d``); the text between them is text
    even when ``str.isdigit`` holds for it ("²", "①": digits that are not decimal, which ``int``
    refuses), so no question id can make the report fail."""
    return [(0, run_value(part), "") if i % 2 else (1, 0, part) for i, part in enumerate(re.split(r"(\d+)", str(text)))]


def run_value(digits: str) -> int:
    """A run of decimal digits as its number, however long (``int`` alone refuses more than
    4,300 digits: a Karenina ``@id`` has no length limit)."""
    if len(digits) <= 4000:
        return int(digits)
    value = 0
    for start in range(0, len(digits), 4000):
        chunk = digits[start:start + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def verdict_text(result: dict[str, Any]) -> str:
    """A case's verdict as a reader needs it: the override next to the original, failures named."""
    if result["override"]:
        o = result["override"]
        return (f"{o['verdict']} (overridden by {o['author']}: {o['reason']}; "
                f"original {_original_state(result)})")
    if result["verdict"]:
        return result["verdict"] + (" (auto-fail)" if result["auto_failed"] else "") \
            + (" (abstained)" if result.get("abstained") else "")
    return result["status"]


def _original_state(result: dict[str, Any]) -> str:
    """What the stages said before the override: their verdict, or (a case overridden without ever
    being judged, e.g. after a stage.failed) its status, so "n/a" never hides that it was not judged."""
    if result["original_verdict"] is not None:
        return result["original_verdict"]
    return f"{result['status']}, not judged"


def side_by_side(results: list[dict], models: list[str], links: dict[str, str]) -> list[str]:
    """One row per question, one column per model: the verdict (or score) each model got, linked
    to the case's section."""
    by_question: dict[str, dict[str, list[dict]]] = {}
    for r in results:
        by_question.setdefault(str(r["question_id"]), {}).setdefault(group_label(r), []).append(r)
    rows = []
    for question in sorted(by_question, key=natural_key):
        row: list[Any] = [question]
        for model in models:
            outcomes = [case_link(outcome_label(r), r["case_id"], links) for r in by_question[question].get(model, [])]
            row.append(Markdown("; ".join(outcomes)) if outcomes else "-")
        rows.append(row)
    return ["### Side by side", ""] + table(["question", *(text(m) for m in models)], rows)


def case_link(label: Any, case_id: str, links: dict[str, str]) -> Markdown:
    """``label`` linked to the case's section on its case page (escaped text when it has none)."""
    target = links.get(case_id)
    return link(label, target) if target else Markdown(text(label))


def outcome_label(result: dict) -> str:
    if result["kind"] == "reconstruction" and result.get("calculated_metrics"):
        m = result["calculated_metrics"]
        return f"avg {fmt(m['average_score'])} (weighted {fmt(m['weighted_average_score'])})"
    if result["kind"] == "audit" and result["audit"]["credit"]:
        a = result["audit"]
        return (f"credit {a['credit']['credit_score']} {a['credit']['zone']} "
                f"(expected {fmt(a['expected_credit_score'])} {fmt(a['expected_zone'])})")
    return verdict_text(result)


def field_section(models: dict[str, dict]) -> list[str]:
    rows = [[m, f, v["verified"], v["passed"], v["failed"], v["undecided"], pct(v["pass_rate"])]
            for m, s in models.items() for f, v in s["per_field"].items()]
    if not rows:
        return []
    return ["### Per field", ""] + table(["model", "field", "verified", "passed", "failed", "undecided",
                                          "pass rate"], rows)


def trait_section(models: dict[str, dict]) -> list[str]:
    rows = [[m, t, v["scored"], v["mean_score"], pct(v["true_rate"]), v["auto_failed"]]
            for m, s in models.items() for t, v in s["per_trait"].items()]
    if not rows:
        return []
    return ["### Per rubric trait", ""] + table(["model", "trait", "scored", "mean score", "true rate",
                                                 "auto-failed"], rows)


def attention_section(results: list[dict], links: dict[str, str]) -> list[str]:
    """Cases a reader must see, each linked to its section: every failed verdict, failed or
    pending (still in every denominator), overridden, auto-failed, abstained."""
    rows = [[case_link(r["case_id"], r["case_id"], links), r["question_id"], group_label(r), why]
            for r in results if (why := attention_reason(r))]
    if not rows:
        return []
    return attention_header() + table(["case", "question", "model", "why"], rows)[2:]


def attention_header() -> list[str]:
    """The lines "Cases to look at" starts with, up to its table's first row."""
    return ["### Cases to look at", ""] + table(["case", "question", "model", "why"], [])[:2]


def attention_reason(r: dict) -> str | None:
    """Why a case is among the cases to look at (None: it is not)."""
    why = []
    if r["verdict"] == "fail" and not r["auto_failed"] and not r["override"]:
        why.append("failed: " + ("; ".join(r["auto_fail_reasons"]) or "the judge's verdict"))
    if r["status"] != "judged":
        why.append(r["status"] + ": " + ("; ".join(f"{f['stage']}: {f['reason']}" for f in r["failures"])
                                         or "no final event yet"))
    if r["override"]:
        why.append("overridden: " + verdict_text(r))
    if r["auto_failed"]:
        why.append("auto-failed: " + ", ".join(r["auto_fail_reasons"]))
    if r.get("abstained"):
        why.append("abstained: " + str((r.get("abstention") or {}).get("evidence")))
    return " / ".join(why) or None


def repeats_section(models: dict[str, dict]) -> list[str]:
    """Repeated judging: per model the unstable share, Fleiss' kappa and score spread, then the
    unstable cases (their repeats did not agree). Nothing for a benchmark judged once per case."""
    judged = {m: s["repeats"] for m, s in models.items() if s.get("repeats")}
    if not judged:
        return []
    lines = ["### Repeated judging", "",
             "Each case judged K times (seed r on repeat r); unstable = its repeats' verdicts disagree; "
             "Fleiss' kappa across repeats over the cases judged K times (docs: reports, repeated judging).", ""]
    lines += table(["model", "cases", "K", "rule", "unstable", "unstable share", "Fleiss' kappa (K, cases)",
                    "claim score sd (mean), max range"],
                   [[m, r["cases"], ", ".join(map(str, r["repeat_counts"])), ", ".join(r["rules"]),
                     r["unstable"], pct(r["unstable_share"]),
                     f"{fmt(r['fleiss_kappa'])} ({fmt(r['kappa_repeats'])}, {r['kappa_cases']})",
                     _spread_cell(r.get("claim_spread"))] for m, r in judged.items()])
    traits = [[m, t, v["scored"], fmt(v["mean_sd"]), fmt(v["max_range"]), v["varying"]]
              for m, r in judged.items() for t, v in (r.get("trait_spread") or {}).items()]
    if traits:
        lines += ["Rubric trait scores across repeats:", ""]
        lines += table(["model", "trait", "cases", "sd (mean)", "max range", "cases varying"], traits)
    unstable = [[c["case_id"], c["question_id"], m, " ".join(c["verdicts"]), pct(c["pass_rate"]), c["flips"],
                 c["verdict"]] for m, r in judged.items() for c in r["unstable_cases"]]
    if unstable:
        lines += ["Unstable cases:", ""]
        lines += table(["case", "question", "model", "repeats", "pass rate", "flips", "verdict"], unstable)
    return lines


def _spread_cell(spread: dict[str, Any] | None) -> str:
    """``sd, max range`` of the claim scores, or "-" when no claim was scored."""
    return f"{fmt(spread['mean_sd'])}, {fmt(spread['max_range'])}" if spread else "-"


def version_lines(data: dict[str, Any]) -> list[str]:
    """Which version of its name this benchmark is, what changed against the one before, and links
    to the other versions."""
    lines = []
    if data.get("version"):
        changes = data.get("changes") or {}
        parts = [f"{k}: {', '.join(changes[k])}" for k in ("changed", "added", "removed") if changes.get(k)]
        lines.append(f"Version {data['version']} of {text(data['name'])}; against version {data['version'] - 1} "
                     f"({text(data.get('previous'))}): " + (text("; ".join(parts)) if parts else "the same questions")
                     + ".")
    links = data.get("version_links") or []
    if links:
        lines.append("Other versions: " + ", ".join(f"[{label}]({path})" for label, path in links) + ".")
    return lines + [""] if lines else []


def render_benchmark(data: dict[str, Any], prov: dict[str, Any], results: list[dict],
                     pictures: list[tuple[str, str]], documents: dict[str, str],
                     case_links: dict[str, str] | None = None) -> str:
    """``<benchmark>/report.md``; ``case_links`` gives each case's section (case id -> link)."""
    links = case_links or {}
    return "\n".join(benchmark_lines(data, prov, pictures, documents,
                                     side_by_side(results, list(data["models"]), links),
                                     attention_section(results, links)))


def benchmark_lines(data: dict[str, Any], prov: dict[str, Any], pictures: list[tuple[str, str]],
                    documents: dict[str, str], side: Iterable[str], attention: Iterable[str]) -> Iterator[str]:
    """The lines of ``<benchmark>/report.md`` one by one; ``side`` and ``attention`` are the
    sections with a row per question and per case to look at (a streamed report reads them a page
    at a time)."""
    lines = [f"# Benchmark {text(data['benchmark'])}" + (f": {text(data['name'])}" if data["name"] else ""), ""]
    lines += provenance_lines(prov)
    lines += version_lines(data)
    lines += [f"Kind: {text(data['kind'])}. Questions registered: {fmt(data['question_count'])}."
              + (" Pass rate = passed / all cases: failed and pending cases stay in the denominator."
                 if data["kind"] == "template" else ""), ""]
    if data["rejected_questions"]:
        lines += ["Questions not registered: " + text("; ".join(f"{q.get('where')}: {q.get('reason')}"
                                                                for q in data["rejected_questions"])), ""]
    lines += ["## Summary", ""] + table(summary_header(data["kind"]), summary_rows(data["models"], data["kind"]))
    audit_groups = data.get("audit", {})
    for title, name in pictures:
        if title not in audit_groups:           # zone matrices are drawn inside their section
            lines += [f"![{label_text(title)}]({name})", ""]
    lines += comparison_section(data["comparisons"])
    yield from lines
    yield from side
    lines = field_section(data["models"]) + trait_section(data["models"])
    lines += repeats_section(data["models"])
    lines += reconstruction_section(data.get("reconstruction", {}))
    if documents:
        lines += ["### Documents", ""] + [f"- {link(doc, path)}" for doc, path in documents.items()] + [""]
    lines += audit_section(data.get("audit", {}), svg_names={k: v for k, v in pictures if k in data.get("audit", {})})
    yield from lines
    yield from attention


def render_document(doc: dict[str, Any], prov: dict[str, Any]) -> str:
    """``{doc_id}.md``: one reconstruction document, claim by claim, then its metrics."""
    m = doc["calculated_metrics"]
    fully, partially, not_ = band_labels(doc.get("claim_bands") or [])
    lines = [f"# Reconstruction {text(doc['doc_id'])}", ""] + provenance_lines(prov)
    meta = doc["metadata"]
    lines += [f"Case `{text(doc['case_id'])}`, benchmark {text(doc['benchmark'])}, "
              f"collection {text(doc.get('collection'))}, "
              f"reconstruction by {text(meta.get('reconstruction_model') or '(no model)')}, judged by "
              f"{text(meta['model'] or '(no judge call)')} at {doc.get('timestamp') or '(not judged)'}, "
              f"status {doc['status']}; {count_of(meta['total_tokens'], 'token')}, "
              f"{usd(meta['cost_usd'])} USD.", ""]
    lines += table(["metric", "value"], [
        ["total claims scored", m["total_claims"]], ["average score", m["average_score"]],
        ["importance-weighted average", m["weighted_average_score"]],
        ["fully reconstructed (" + fully + ")", m["fully_reconstructed"]],
        ["partially reconstructed (" + partially + ")", m["partially_reconstructed"]],
        ["not reconstructed (" + not_ + ")", m["not_reconstructed"]],
        ["claims not scored", ", ".join(doc["unscored_claims"]) or "none"]])
    lines += ["## Claims", ""]
    lines += table(["claim", "type", "importance", "score", "justification", "evidence", "text"],
                   [[c["claim_id"], c["claim_type"], c["importance"], c["score"], c["justification"],
                     ", ".join(c["evidence_refs"]) or "none", c["claim_text"]] for c in doc["claim_evaluations"]])
    lines += ["## By type", ""] + table(["type", "count", "average"],
                                        [[k, v["count"], v["average_score"]] for k, v in m["by_type"].items()])
    lines += ["## By importance", ""] + table(["importance", "count", "average"],
                                              [[k, v["count"], v["average_score"]]
                                               for k, v in m["by_importance"].items()])
    return "\n".join(lines)


__all__ = ["render_benchmark", "render_document", "verdict_text", "cell"]
