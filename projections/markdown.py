"""Markdown building blocks and the two top-level reports: ``index.md`` and ``aggregate-report.md``.

Everything renders from the aggregate document (``projections.aggregate``): no number is
computed here, only formatted, so the markdown always says what the JSON says.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from evalledger.projections.audit import CROSS_BAND_TARGET, ZONES
from evalledger.projections.reconstruction import band_labels
from evalledger.projections.wording import count_of


def fmt(value: Any) -> str:
    """A cell: n/a for None, yes/no for booleans, numbers as they are."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def pct(value: float | None, digits: int = 1) -> str:
    """A 0-1 rate as a percentage (n/a when there is no denominator)."""
    return "n/a" if value is None else f"{value * 100:.{digits}f}%"


def interval(ci: list[float] | None) -> str:
    """A 95% interval as percentages, or ``n/a`` (numbers only: table-safe as it is)."""
    return "n/a" if not ci else Markdown(f"[{ci[0] * 100:.1f}%, {ci[1] * 100:.1f}%]")


class Markdown(str):
    """Markdown the reports built themselves (a link, an image): put into a table as it is.

    Any other value is text from a file or a judge and is escaped (``text``)."""


# What could make text from a file or a judge into markup: a link or an image (a "]" right before
# "(" or "[": with it escaped, no link can close; a bare "[cross]" stays as it is), HTML and
# autolinks (< > &), code spans, emphasis, table cells (|) and the escape character itself.
# An underscore inside a word is no emphasis in CommonMark, so "model_a" stays readable.
_SPECIAL = re.compile(r"[\\`*<>|&]|\](?=[(\[])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_PLAIN = re.compile(r"(?:[^\\\\`*\]<>|&_:\s]| (?! ))*")   # nothing to escape, single spaces only
_LINE_START = re.compile(r"^(\s*)([#+=>-]|\d+[.)])")


def text(value: Any, line_start: bool = False) -> str:
    """``value`` (from a file or a judge) as markdown that shows it literally, on one line: every
    character that could start a link, an image, HTML, a code span, emphasis or a table cell is
    backslash-escaped; ``line_start`` (the text begins a line) escapes a heading, list or quote
    marker at its start too (inside a table cell such a marker is plain text: "-92.9%")."""
    raw = fmt(value)
    if _PLAIN.fullmatch(raw) and not line_start:      # most cells: numbers, names, verdicts
        return raw
    flat = " ".join(raw.split())
    # "\://" still shows "://" but is no longer a bare URL that GFM would make a link of.
    escaped = _SPECIAL.sub(lambda m: "\\" + m.group(), flat).replace("://", "\\://")
    if line_start:
        escaped = _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped, count=1)
    return escaped


def cell(value: Any) -> str:
    """A table cell: text escaped (``text``), report-built ``Markdown`` as it is; one line."""
    if isinstance(value, Markdown):
        return value.replace("\n", " ")
    return text(value)


def link(label: Any, target: str) -> Markdown:
    """A link the report builds: the label escaped, the target (a path the report chose) as it is."""
    return Markdown(f"[{label_text(label)}]({target})")


def label_text(label: Any) -> str:
    """``text`` for a link's label or an image's alt text: its brackets escaped too, so an
    unbalanced one cannot end the label early."""
    return re.sub(r"(?<!\\)([\[\]])", r"\\\1", text(label))


def table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    """A markdown table's lines (header, separator, rows, then a blank line)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def usd(cost: float | None) -> str:
    """A cost in USD as reports print it: 6 decimals, or "unknown" (an unpriced model), never 0 for it."""
    return "unknown" if cost is None else f"{cost:.6f}"


def judge_line(judges: list[dict]) -> str:
    """The judges that answered, as one line of text."""
    if not judges:
        return "none recorded"
    parts = []
    for j in judges:
        note = f" ({text(j['note'])})" if j.get("note") else ""
        parts.append(f"{text(j['backend'])} / {text(j['model'])}{note}: {count_of(j['calls'], 'call')}")
    return "; ".join(parts)


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """The header every report carries: ledger head, latest checkpoint, judge backend and model,
    config hashes."""
    head = prov["ledger_head"]
    hashes = ", ".join(f"`{h}`" for h in prov["config_hashes"]) or "none recorded"
    return [f"- Built from ledger head: seq {head['seq']}, hash `{head['hash']}`",
            checkpoint_line(prov.get("checkpoint")),
            f"- Judge: {judge_line(prov['judges'])}",
            f"- Config hash: {hashes}", ""]


CHECKPOINT_PREFIX = "- Latest checkpoint: "


def checkpoint_line(checkpoint: dict[str, Any] | None) -> str:
    """The checkpoint a report was built under, as one line ``parse_checkpoint_line`` reads back:
    its seq, Merkle root, key id and the sha256 of its signed note, then whether events came after.

    A checkpoint's own ``checkpoint.signed`` event always comes after the seq it signs, so one
    event after it is that record; more are events no signed checkpoint covers yet.
    """
    if not checkpoint:
        return CHECKPOINT_PREFIX + "none signed ('evalledger checkpoint' signs one)"
    after = int(checkpoint.get("events_after") or 0)
    if after <= 1:
        tail = "no event after it but its own checkpoint.signed record" if after else "the report's head is its"
    else:
        tail = (f"{after - 1} event{'s' if after != 2 else ''} came after it besides its own checkpoint.signed "
                "record: not covered by a signed checkpoint")
    return (f"{CHECKPOINT_PREFIX}seq {checkpoint['seq']}, root `{checkpoint['root']}`, key `{checkpoint['key']}`, "
            f"note sha256 `{checkpoint['note_sha256']}`; {tail}")


_CHECKPOINT_RE = re.compile(r"seq (\d+), root `([0-9a-f]{64})`, key `([^`]*)`, note sha256 `([0-9a-f]{64})`")
_HEAD_RE = re.compile(r"^- Built from ledger head: seq (\d+), hash `([0-9a-f]{64})`", re.M)


def parse_checkpoint_line(text: str) -> dict[str, Any] | None:
    """The checkpoint claim of a rendered report (markdown): {seq, root, key, note_sha256,
    ledger_head: {seq, hash}}; None when the report names no checkpoint. ValueError when the
    text has no provenance lines at all."""
    head = _HEAD_RE.search(text)
    line = next((ln for ln in text.splitlines() if ln.startswith(CHECKPOINT_PREFIX)), None)
    if head is None or line is None:
        raise ValueError("no provenance lines ('- Built from ledger head: ...', '- Latest checkpoint: ...')")
    found = _CHECKPOINT_RE.match(line[len(CHECKPOINT_PREFIX):])
    if found is None:
        return None
    return {"seq": int(found[1]), "root": found[2], "key": found[3], "note_sha256": found[4],
            "ledger_head": {"seq": int(head[1]), "hash": head[2]}}


SUMMARY_HEADER = ["model", "cases", "judged", "failed", "pending", "passed", "pass rate", "95% CI",
                  "auto-failed", "abstained", "overridden", "excerpt retries", "judge calls", "judge retries",
                  "tokens", "cost (USD)"]
# Reconstruction and audit cases have no pass/fail verdict (claim scores, credit scores): their
# summary keeps only what applies to them, never a "passed 0" and "pass rate n/a".
SCORED_SUMMARY_HEADER = ["model", "cases", "judged", "failed", "pending", "judge calls", "judge retries",
                         "tokens", "cost (USD)"]


def summary_header(kind: str | None) -> list[str]:
    """The summary table's columns for a benchmark of ``kind``."""
    return SUMMARY_HEADER if kind == "template" else SCORED_SUMMARY_HEADER


def summary_rows(models: dict[str, dict], kind: str | None = "template") -> list[list[Any]]:
    """The summary table's rows, one per model, with the columns of ``summary_header(kind)``."""
    if kind != "template":
        return [[m, s["cases"], s["judged"], s["failed"], s["pending"], s["judge_calls"], s["judge_retries"],
                 s["tokens"], usd(s["cost"])] for m, s in models.items()]
    return [[m, s["cases"], s["judged"], s["failed"], s["pending"], s["passed"], pct(s["pass_rate"]),
             interval(s["pass_rate_ci95"]), f"{s['auto_failed']} ({pct(s['auto_fail_rate'])})",
             f"{s.get('abstained', 0)} ({pct(s.get('abstention_rate'))})", s["overridden"], s["excerpt_retries"],
             s["judge_calls"], s["judge_retries"], s["tokens"], usd(s["cost"])] for m, s in models.items()]


COMPARISON_HEADER = ["A", "B", "pairs", "both pass", "A only", "B only", "neither", "A rate",
                     "B rate", "B - A", "bootstrap 95% CI", "McNemar exact p", "unfinished pairs"]


def comparison_rows(comparisons: list[dict]) -> list[list[Any]]:
    """The paired comparison table's rows, one per pair of models."""
    return [[c["model_a"], c["model_b"], c["pairs"], c["both_pass"], c["a_only"], c["b_only"],
             c["neither"], pct(c["a_pass_rate"]), pct(c["b_pass_rate"]), pct(c["difference"]),
             interval(c["difference_ci95"]), c["mcnemar_p"], c["unfinished_pairs"]] for c in comparisons]


def comparison_section(comparisons: list[dict]) -> list[str]:
    """The model comparison section (empty without comparisons)."""
    if not comparisons:
        return []
    lines = ["### Model comparison (paired, same questions)", ""]
    lines += table(COMPARISON_HEADER, comparison_rows(comparisons))
    lines += [f"- {text(c['verdict'])}" for c in comparisons] + [""]
    return lines


def reconstruction_section(stats: dict[str, dict], level: str = "###") -> list[str]:
    """The reconstruction results section, one block per model."""
    lines = []
    for model, agg in stats.items():
        o = agg["overall"]
        fully, partially, not_ = band_labels(agg.get("claim_bands") or [])
        lines += [f"{level} Reconstruction: {text(model)}", "",
                  f"{count_of(agg['total_documents'], 'document')}, {count_of(agg['total_claims'], 'scored claim')}; "
                  f"average {fmt(o['average_score'])}, importance-weighted {fmt(o['weighted_average_score'])}; "
                  f"fully ({fully}) {fmt(o['pct_fully_reconstructed'])}%, partially ({partially}) "
                  f"{fmt(o['pct_partially_reconstructed'])}%, not ({not_}) {fmt(o['pct_not_reconstructed'])}%.", ""]
        lines += table(["claim type", "count", "average", f"% fully ({fully})"],
                       [[t, v["count"], v["average_score"], v["pct_reconstructed"]]
                        for t, v in agg["by_claim_type"].items()])
        lines += table(["importance", "count", "average", f"% fully ({fully})"],
                       [[t, v["count"], v["average_score"], v["pct_reconstructed"]]
                        for t, v in agg["by_importance"].items()])
    return lines


def matrix_table(matrix: dict[str, dict[str, int]]) -> list[str]:
    """The expected-by-actual zone matrix as a table."""
    return table(["expected \\ actual", *ZONES], [[row, *(matrix[row][col] for col in ZONES)] for row in ZONES])


def audit_section(groups: dict[str, dict], level: str = "###", svg_names: dict[str, str] | None = None) -> list[str]:
    """The audit results section, one block per group."""
    lines = []
    for key, g in groups.items():
        met = {True: "met", False: "NOT met", None: "n/a (nothing compared)"}[g["target_met"]]
        lines += [f"{level} Audit zones: {text(key)}", ""]
        if svg_names and key in svg_names:
            lines += [f"![zone confusion matrix, {label_text(key)}]({svg_names[key]})", ""]
        lines += matrix_table(g["matrix"])
        lines += table(["metric", "value"], [
            ["cases", g["cases"]], ["compared (expected and scored)", g["compared"]],
            ["not scored (expected, no credit score)", g["not_scored"]],
            ["zone accuracy", f"{g['zone_matches']}/{g['compared']} = {pct(g['zone_accuracy'])}"],
            ["cross-band confusion", f"{g['cross_band']}/{g['compared']} = {pct(g['cross_band_confusion_rate'])}"],
            ["target: cross-band < " + pct(CROSS_BAND_TARGET, 0), met],
            ["exact match", f"{g['exact_matches']}/{g['compared']} = {pct(g['exact_match_rate'])}"],
            ["within +-1", f"{g['within_one']}/{g['compared']} = {pct(g['within_one_rate'])}"]])
        coverage = g.get("zone_coverage")
        if coverage:
            lines += table(["expected zone", "cases", "share", "recommended", "within"],
                           [[z, coverage[z]["count"], pct(coverage[z]["share"]),
                             f"{pct(coverage[z]['recommended'][0], 0)}-{pct(coverage[z]['recommended'][1], 0)}",
                             {True: "yes", False: "NO", None: "n/a"}[coverage[z]["within"]]] for z in ZONES])
            if coverage["warning"]:
                lines += [f"**Warning**: {coverage['warning']}.", ""]
        if g["per_tag"]:
            lines += table(["tag", "compared", "exact", "zone accuracy", "cross-band", "mean expected",
                            "mean actual"],
                           [[t, v["compared"], v["exact_matches"], pct(v["zone_accuracy"]), v["cross_band"],
                             v["mean_expected"], v["mean_actual"]] for t, v in g["per_tag"].items()])
    return lines


def bench_link(benchmark: str, folder: str) -> Markdown:
    """A link to a benchmark's report."""
    return link(benchmark, f"{folder}/report.md")


def render_index(agg: dict[str, Any], folders: dict[str, str]) -> str:
    """``index.md``: what the ledger holds and where each report is."""
    lines = ["# evalledger reports", ""] + provenance_lines(agg)
    lines += ["Files: [aggregate-report.md](aggregate-report.md) (every aggregate), "
              "[aggregate-stats.json](aggregate-stats.json) (the same, for programs), "
              "[evaluations.jsonl](evaluations.jsonl) (one line per case).", ""]
    lines += [total_line(agg["totals"]), ""]
    rows = []
    for b, data in agg["benchmarks"].items():
        models = data["models"]
        label = data["name"] or b
        if data.get("version"):
            label = f"{label} (version {data['version']}{'' if '/versions/' in folders[b] else ', latest'})"
        rows.append([bench_link(label, folders[b]), b, data["kind"], len(models),
                     sum(s["cases"] for s in models.values()), sum(s["judged"] for s in models.values()),
                     sum(s["failed"] for s in models.values()), sum(s["pending"] for s in models.values())])
    lines += ["## Benchmarks", ""]
    lines += table(["benchmark", "id", "kind", "models", "cases", "judged", "failed", "pending"], rows)
    if agg["rejected_files"]:
        lines += ["## Rejected files", ""]
        lines += table(["file", "errors"], [[r["file"], "; ".join(f"{e.get('where')}: {e.get('reason')}"
                                                                  for e in r["errors"])]
                                            for r in agg["rejected_files"]])
    return "\n".join(lines)


def total_line(totals: dict[str, Any]) -> str:
    """The judging of every case in one sentence: calls, tokens and cost ("unknown" when unpriced)."""
    unpriced = (f" ({count_of(totals['unpriced_calls'], 'call')} to a model with no price)"
                if totals["unpriced_calls"] else "")
    return (f"Judging, all cases: {count_of(totals['judge_calls'], 'judge call')}, "
            f"{count_of(totals['tokens'], 'token')}, "
            f"cost {usd(totals['cost'])} USD{unpriced}.")


def render_aggregate_report(agg: dict[str, Any], folders: dict[str, str]) -> str:
    """``aggregate-report.md``: every aggregate of aggregate-stats.json, as tables."""
    lines = ["# Aggregate report", ""] + provenance_lines(agg) + [total_line(agg["totals"]), ""]
    for b, data in agg["benchmarks"].items():
        lines += [f"## {text(data['name'] or b)} ({text(data['kind'])}, id {text(b)})", "",
                  f"Cases and pictures: {link(folders[b] + '/report.md', folders[b] + '/report.md')}", ""]
        if data["models"]:
            lines += table(summary_header(data["kind"]), summary_rows(data["models"], data["kind"]))
        lines += comparison_section(data["comparisons"])
        lines += reconstruction_section(data.get("reconstruction", {}))
        lines += audit_section(data.get("audit", {}))
    for name, collection in (agg.get("reconstruction_collections") or {}).items():
        lines += [f"## Reconstruction collection {text(name)}", "",
                  f"Every document of the collection, from {count_of(len(collection['benchmarks']), 'benchmark')}.", ""]
        lines += reconstruction_section(collection["models"])
    return "\n".join(lines)
