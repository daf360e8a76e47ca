"""The viewer's list pages: overview, case table, comparison and verify, rendered to HTML strings.

Each function takes plain data (aggregates, a page of index rows, a diff) and a ``Links``; none
reads a file or calls a judge. Every value from a benchmark or a judge is escaped (``esc``).
"""

from __future__ import annotations

import math

from evalledger.cli.viewer.html import Links, as_json, esc, page, table, verdict_badge
from evalledger.cli.viewer.index import NO_RUN, VERDICT_FILTERS
from evalledger.projections.markdown import usd


def _rate(summary: dict) -> str:
    if summary.get("pass_rate") is None:
        return "-"
    low, high = summary.get("pass_rate_ci95") or (None, None)
    interval = f" [{low:.1%}, {high:.1%}]" if low is not None else ""
    return f"{summary['pass_rate']:.1%}{interval} ({summary['passed']}/{summary['cases']})"


def _benchmark_section(bench: dict, links: Links) -> str:
    """One benchmark: kind, models with pass rates and intervals, usage, claim and zone summaries."""
    name = bench.get("name") or bench["benchmark"]
    rows = [[f'<a href="{esc(links.cases(benchmark=bench["benchmark"], model=_model_filter(model)))}">{esc(model)}</a>',
             esc(s["cases"]), esc(s["judged"]), esc(s["failed"]), esc(_rate(s)),
             esc(s["auto_failed"]), esc(s["overridden"]), esc(s["tokens"]), esc(usd(s.get("cost")))]
            for model, s in sorted(bench["models"].items())]
    out = [f'<section class="benchmark"><h3>{esc(name)} <small>{esc(bench.get("kind"))} · '
           f'{esc(bench["benchmark"])}</small></h3>',
           table(["model", "cases", "judged", "failed stage", "pass rate [95% CI]", "auto-failed",
                  "overridden", "tokens", "cost (USD)"], rows, "summary")]
    for model, stats in sorted((bench.get("reconstruction") or {}).items()):
        docs = stats.get("by_document") or []
        claims = sum(d.get("claim_count", 0) for d in docs)
        mean = [d.get("average_score") for d in docs]
        out.append(f'<p class="claims">claims ({esc(model)}): {esc(claims)} scored, mean score per document '
                   f'{esc(", ".join(str(m) for m in mean))}</p>')
    for model, audit in sorted((bench.get("audit") or {}).items()):
        matrix = audit.get("matrix") or {}
        zones = sorted({z for row in matrix.values() for z in row} | set(matrix))
        grid = table(["expected \\ scored", *zones],
                     [[esc(expected), *[esc((matrix.get(expected) or {}).get(z, 0)) for z in zones]]
                      for expected in zones], "zones")
        out.append(f'<p class="zones">zones ({esc(model)}): {esc(audit.get("exact_matches"))}/'
                   f'{esc(audit.get("compared"))} exact, cross-band {esc(audit.get("cross_band"))}</p>{grid}')
    for comparison in bench.get("comparisons") or []:
        out.append(f'<p class="comparison">{esc(comparison.get("verdict"))}: difference '
                   f'{esc(comparison.get("difference"))} {esc(comparison.get("difference_ci95"))}</p>')
    out.append("</section>")
    return "".join(out)


def _model_filter(model: str) -> str | None:
    """The table's model filter for a model label (cases without a model get no filter)."""
    from evalledger.projections.results import NO_MODEL
    return None if model == NO_MODEL else model


def _run_label(run_id: str) -> str:
    """A run's id, or what its calls were when they were recorded outside any run."""
    return "(outside any run)" if run_id == NO_RUN else run_id


def _runs_section(runs: dict[str, dict]) -> str:
    """Each run: its judge backend and model, config hashes, counts, and the tokens and cost of its
    judge calls (cost "unknown" when a call was unpriced, never 0)."""
    rows = []
    for run_id, run in sorted(runs.items()):
        started, completed = run.get("started") or {}, run.get("completed") or {}
        judge = completed.get("judge") or started.get("judge") or {}
        hashes = sorted(set(started.get("configs") or {}) | set(completed.get("configs") or {}))
        usage = run.get("usage") or {}
        state = "completed" if completed else ("running or stopped" if started else "-")
        rows.append([esc(_run_label(run_id)), esc(judge.get("backend")), esc(judge.get("model")),
                     esc(", ".join(h[:12] for h in hashes)), esc(completed.get("cases", started.get("pending"))),
                     esc(completed.get("judged")), esc(completed.get("failed")), esc(usage.get("calls", 0)),
                     f'<span class="tokens">{esc(usage.get("tokens", 0))}</span>',
                     f'<span class="cost">{esc(usd(usage.get("cost")))}</span>', esc(state)])
    return "<h2>Runs</h2>" + table(["run", "judge backend", "judge model", "config hashes", "cases", "judged",
                                    "failed", "judge calls", "tokens", "cost (USD)", "state"], rows, "runs")


def _totals(aggregates: dict) -> str:
    """Tokens and cost over every benchmark and model; the cost is "unknown" when any is."""
    summaries = [m for b in aggregates["benchmarks"].values() for m in b["models"].values()]
    costs = [m.get("cost") for m in summaries]
    cost = None if any(c is None for c in costs) else math.fsum(costs)
    return (f'<p id="totals">tokens {esc(sum(m.get("tokens") or 0 for m in summaries))}, cost '
            f'{esc(usd(cost))} USD</p>')


def overview_page(aggregates: dict, runs: dict, links: Links, verify_note: str = "") -> str:
    """The overview: ledger head and verify, judges with tokens, each benchmark, the runs."""
    head = aggregates["ledger_head"]
    judges = table(["backend", "model", "calls", "note"],
                   [[esc(j["backend"]), esc(j["model"]), esc(j["calls"]), esc(j.get("note") or "")]
                    for j in aggregates["judges"]], "judges")
    benches = "".join(_benchmark_section(b, links) for _, b in sorted(aggregates["benchmarks"].items()))
    body = (f'<h1>Overview</h1><p class="head">ledger head <span id="head-seq">seq {esc(head["seq"])}</span> '
            f'<code>{esc(head["hash"])}</code> · <a class="button" id="verify" href="{esc(links.verify())}">'
            f'verify</a> {verify_note}</p>'
            f'<p>config hashes: {esc(", ".join(aggregates["config_hashes"]) or "-")}</p>'
            f'<h2>Judges</h2>{judges}{_totals(aggregates)}<h2>Benchmarks</h2>{benches}'
            + _runs_section(runs))
    return page("overview", body, links)


def verify_page(report, links: Links) -> str:
    """The result of ``led.verify()``: ok, or every problem and warning."""
    status = "ok" if report.ok else "FAILED"
    items = "".join(f"<li class=\"problem\">{esc(p)}</li>" for p in report.problems)
    items += "".join(f"<li class=\"warning\">{esc(w)}</li>" for w in report.warnings)
    body = (f'<h1>Verify</h1><p id="verify-status" class="{"ok" if report.ok else "failed"}">{status}: hash chain '
            f'recomputed up to seq {esc(report.head.seq)} <code>{esc(report.head.hash)}</code></p><ul>{items}</ul>')
    return page("verify", body, links, live=False)


def _filter_form(filters: dict, sort: str, descending: bool, options: dict, compare: bool, queue: int = 0) -> str:
    def select(name: str, values: list[str], labels: dict | None = None) -> str:
        opts = '<option value="">all</option>' + "".join(
            f'<option value="{esc(v)}"{" selected" if filters.get(name) == v else ""}>'
            f'{esc((labels or {}).get(v, v))}</option>' for v in values)
        return f'<label>{esc(name)} <select name="{esc(name)}">{opts}</select></label>'
    changed = (f'<label><input type="checkbox" name="changed" value="1"{" checked" if filters.get("changed") else ""}>'
               f' changed vs compared home</label>') if compare else ""
    changed += (f'<label><input type="checkbox" name="queue" value="1"{" checked" if filters.get("queue") else ""}>'
                f' in the review queue ({queue})</label>') if queue else ""
    return ('<form class="filters" method="get" action="/cases">'
            + select("verdict", list(VERDICT_FILTERS), {"failed-stage": "failed stage"})
            + select("benchmark", options["benchmarks"]) + select("model", options["models"])
            + f'<label>search <input type="search" name="q" value="{esc(filters.get("q"))}"></label>' + changed
            + f'<input type="hidden" name="sort" value="{esc(sort)}">'
            + ('<input type="hidden" name="desc" value="1">' if descending else "")
            + (f'<input type="hidden" name="token" value="{esc(filters["token"])}">' if filters.get("token") else "")
            + '<button type="submit">filter</button></form>')


def cases_page(result: dict, filters: dict, sort: str, descending: bool, options: dict, links: Links,
               compare: bool = False, queue: int = 0) -> str:
    """The case table: one page of rows, sortable headers, the filter form, page links."""
    params = {k: v for k, v in filters.items() if k != "token"}

    def header(label: str, key: str) -> str:
        flip = descending if key == sort else False
        arrow = (" ▼" if descending else " ▲") if key == sort else ""
        return f'<a href="{esc(links.cases(**params, sort=key, desc=int(not flip) if key == sort else 0))}">' \
               f'{esc(label)}{arrow}</a>'
    rows = []
    for r in result["rows"]:
        flags = " ".join(name for name, on in (("overridden", r["overridden"]), ("auto-failed", r["auto_failed"]),
                                              ("failed stage", r["failed_stage"])) if on)
        rows.append([f'<a class="case-link" href="{esc(links.case(r["case_id"]))}">{esc(r["case_id"])}</a>',
                     esc(r["benchmark"]), esc(r["model"]), esc(r["question_id"]), esc(r["status"]),
                     verdict_badge(r["verdict"]), esc(flags), esc(r["question"])])
    head_cells = [header("case", "case"), header("benchmark", "benchmark"), header("model", "model"),
                  header("question", "question"), header("status", "status"), header("verdict", "verdict"),
                  "flags", "question text"]
    grid = ('<table class="cases"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head_cells)
            + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
                                               for row in rows) + "</tbody></table>")
    page_no, pages = result["page"], result["pages"]
    nav = []
    if page_no > 1:
        nav.append(f'<a rel="prev" href="{esc(links.cases(**params, sort=sort, desc=int(descending), page=page_no - 1))}">'
                   "previous</a>")
    nav.append(f'<span class="pageinfo">page {page_no} of {pages} · {result["total"]} cases</span>')
    if page_no < pages:
        nav.append(f'<a rel="next" href="{esc(links.cases(**params, sort=sort, desc=int(descending), page=page_no + 1))}">'
                   "next</a>")
    form = "" if links.static else _filter_form(filters, sort, descending, options, compare, queue)
    body = f'<h1>Cases</h1>{form}<p class="pager">{" ".join(nav)}</p>{grid}'
    return page("cases", body, links)


def compare_page(diff: dict, label_a: str, label_b: str, links: Links) -> str:
    """Changed verdicts, scores and metrics between two homes, each change linked to its case."""
    rows = []
    for case in diff["changed_cases"]:
        changes = "<br>".join(f'{esc(c["what"])}: {as_json(c["a"])} → {as_json(c["b"])}' for c in case["changes"])
        events = case["events"]
        because = "<br>".join(f"only in A: {esc(t[:200])}" for t in events["only_in_a"][:6])
        because += "<br>".join(f"only in B: {esc(t[:200])}" for t in events["only_in_b"][:6])
        rows.append([f'<a class="case-link" href="{esc(links.case(case["case_id"]))}">{esc(case["case_id"])}</a>',
                     esc(case["benchmark"]), esc(case["model"]), esc(case["question_id"]), changes,
                     f'<span class="because">{because}</span>'])
    metrics = [[esc(m["metric"]), as_json(m["a"]), as_json(m["b"]), "usage" if m["usage"] else "result"]
               for m in diff["metric_changes"]]
    ha, hb = diff["a"]["ledger_head"], diff["b"]["ledger_head"]
    body = (f'<h1>Compare</h1><p>A: {esc(label_a)} (seq {esc(ha["seq"])} <code>{esc(ha["hash"][:16])}</code>)<br>'
            f'B: {esc(label_b)} (seq {esc(hb["seq"])} <code>{esc(hb["hash"][:16])}</code>)</p>'
            f'<p id="compare-summary">{len(diff["changed_cases"])} of {esc(diff["cases_compared"])} cases changed; '
            f'{len(metrics)} metrics changed</p>'
            + table(["case", "benchmark", "model", "question", "changes", "events that explain it"], rows, "changes")
            + "<h2>Metrics (paired McNemar and bootstrap figures included)</h2>"
            + table(["metric", "A", "B", "kind"], metrics, "metrics"))
    return page("compare", body, links)


def no_compare_page(links: Links) -> str:
    """The compare page when no other home was given. No form asks for one: a page never opens a
    path it was sent (the other home is named at launch only), so such a form could only reload
    this page."""
    body = ('<h1>Compare</h1><p>No home to compare with. Start the viewer with '
            '<code>evalledger view --compare OTHER_HOME</code> (the other home is named at launch only: '
            'a page never opens a path it was sent).</p>')
    return page("compare", body, links)


def error_page(status: int, message: str, links: Links) -> str:
    """A page naming what went wrong (a missing case, a refused write)."""
    return page(f"error {status}", f'<h1>{status}</h1><p class="error">{esc(message)}</p>', links, live=False)

