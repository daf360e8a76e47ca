"""The curves of a what-if sweep: each point's headline metric per benchmark and model, computed
from that point's case states by the functions ``report`` computes them with, and a line chart.

Per benchmark and model: the pass rate (template cases), the share of claims fully reconstructed
(reconstruction), the zone accuracy and the exact credit-score match rate (audit), each as
``aggregate-stats.json`` states it.
"""

from __future__ import annotations

from html import escape
from typing import Any

from evalledger.projections.audit import audit_groups
from evalledger.projections.catch_up import update
from evalledger.projections.reconstruction import aggregate_stats
from evalledger.projections.results import group_cases, group_pass_rate
from evalledger.projections.store import ReadModelStore

COLOURS = ("#4a78b5", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6", "#7f7f7f", "#2c4d75")


def point_metrics(led) -> dict[str, dict[str, Any]]:
    """``{"<benchmark> / <model>": {"metric", "value", "cases"}}`` of one (replayed) ledger."""
    store = ReadModelStore(led)
    try:
        update(led, store)
        return headline_metrics(list(store.iter_cases()))
    finally:
        store.close()


def headline_metrics(cases: list[dict]) -> dict[str, dict[str, Any]]:
    """Each benchmark / model's headline metric over these case states, by the very functions that
    write them into ``aggregate-stats.json`` (``build_aggregates``): the pass rate, the share of
    claims fully reconstructed, the zone accuracy and exact credit-score match rate."""
    by_benchmark: dict[str, list[dict]] = {}
    for case in cases:
        by_benchmark.setdefault(str(case["benchmark"]), []).append(case)
    out: dict[str, dict[str, Any]] = {}
    for bench in sorted(by_benchmark):
        group = sorted(by_benchmark[bench], key=lambda c: c["case_id"])
        by_model = {model: members for (_, model), members in group_cases(group).items()}
        for model, members in sorted(by_model.items()):
            rate = group_pass_rate(members)
            if rate is not None:
                out[f"{bench} / {model}"] = {"metric": "pass_rate", "value": rate, "cases": len(members)}
        for model, members in sorted(by_model.items()):
            if any(c["kind"] == "reconstruction" for c in members):
                recon = aggregate_stats(members)
                out[f"{bench} / {model}"] = {"metric": "pct_fully_reconstructed",
                                             "value": recon["overall"]["pct_fully_reconstructed"],
                                             "cases": recon["total_documents"]}
        audited = [c for c in group if c["kind"] == "audit"]
        for name, audit in sorted(audit_groups(audited).items() if audited else ()):
            out[f"{bench} / {name}"] = {"metric": "zone_accuracy", "value": audit["zone_accuracy"],
                                        "cases": audit["compared"]}
            out[f"{bench} / {name} exact"] = {"metric": "exact_match_rate", "value": audit["exact_match_rate"],
                                              "cases": audit["compared"]}
    return out


def curves(key: str, points: list[tuple[Any, dict[str, dict[str, Any]], int]]) -> dict[str, Any]:
    """The sweep document: per point its value, metrics and unrecorded requests; per series its curve."""
    series: dict[str, dict[str, Any]] = {}
    for value, metrics, _ in points:
        for name, m in metrics.items():
            entry = series.setdefault(name, {"metric": m["metric"], "points": []})
            entry["points"].append([value, m["value"]])
    return {"key": key, "values": [p[0] for p in points],
            "points": [{"value": v, "metrics": m, "unrecorded_requests": u} for v, m, u in points],
            "series": dict(sorted(series.items()))}


def format_curves(doc: dict[str, Any]) -> str:
    """The sweep as a table: one row per point, one column per benchmark / model."""
    names = list(doc["series"])
    lines = [f"what-if over {doc['key']}: {len(doc['values'])} point(s), answered from recorded judge calls only"]
    for name in names:
        lines.append(f"  {_printable(name)}: {doc['series'][name]['metric']}")
    header = [doc["key"]] + [_printable(n) for n in names]
    lines.append(" | ".join(header))
    for point in doc["points"]:
        cells = [str(point["value"])]
        for name in names:
            m = point["metrics"].get(name)
            cells.append("n/a" if m is None or m["value"] is None else _format_value(m["metric"], m["value"]))
        if point["unrecorded_requests"]:
            cells.append(f"({point['unrecorded_requests']} request(s) never recorded)")
        lines.append(" | ".join(cells))
    return "\n".join(lines) + "\n"


def _format_value(metric: str, value: float) -> str:
    # pct_fully_reconstructed is already a percentage; the others are shares
    return f"{value:.2f}%" if metric == "pct_fully_reconstructed" else f"{value * 100:.2f}%"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in str(text))


def line_chart(doc: dict[str, Any]) -> str:
    """An SVG line chart of every series against the swept value (y: 0-100%), fixed layout."""
    width, height, left, top, plot_w, plot_h = 640, 320, 50, 30, 420, 220
    values = [float(v) for v in doc["values"]]
    low, high = min(values), max(values)
    span = (high - low) or 1.0

    def x_of(v: float) -> int:
        return left + round(plot_w * (float(v) - low) / span)

    def y_of(share: float) -> int:
        return top + plot_h - round(plot_h * share)

    body = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>']
    for tick in (0, 25, 50, 75, 100):
        body.append(f'<text x="{left - 6}" y="{y_of(tick / 100) + 4}" text-anchor="end" '
                    f'font-family="sans-serif" font-size="11">{tick}%</text>')
    for v in doc["values"]:
        body.append(f'<text x="{x_of(v)}" y="{top + plot_h + 16}" text-anchor="middle" '
                    f'font-family="sans-serif" font-size="11">{escape(str(v))}</text>')
    for i, (name, s) in enumerate(doc["series"].items()):
        colour = COLOURS[i % len(COLOURS)]
        scale = 100.0 if s["metric"] == "pct_fully_reconstructed" else 1.0
        pts = [(x_of(v), y_of(y / scale)) for v, y in s["points"] if y is not None]
        if pts:
            body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                        + " ".join(f"{x},{y}" for x, y in pts) + '"/>')
            body += [f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>' for x, y in pts]
        body.append(f'<rect x="{left + plot_w + 14}" y="{top + i * 18}" width="10" height="10" fill="{colour}"/>')
        body.append(f'<text x="{left + plot_w + 30}" y="{top + i * 18 + 9}" font-family="sans-serif" '
                    f'font-size="11">{escape(_printable(name)[:24])}</text>')
    body.append(f'<text x="{left + plot_w // 2}" y="{height - 10}" text-anchor="middle" font-family="sans-serif" '
                f'font-size="12">{escape(doc["key"])}</text>')
    title = f"What-if: {doc['key']}"
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width // 2}" y="18" text-anchor="middle" font-family="sans-serif" font-size="12" '
        f'font-weight="bold">{escape(title)}</text>', *body, "</svg>", ""])
