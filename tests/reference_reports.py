"""The report renderer as it was before reports were streamed (every case, result and file held
in memory): the reference the streamed renderer must equal byte for byte
(tests/test_reports_streamed.py). Kept verbatim; only the imports are gathered here."""

from __future__ import annotations

from typing import Any

from evalledger.projections import svg
from evalledger.projections.aggregate import build_aggregates, provenance
from evalledger.projections.agreement import render_agreement, reviewer_agreement
from evalledger.projections.appliers import LATEST_CHECKPOINT
from evalledger.projections.audit import ZONES
from evalledger.projections.benchmark_md import render_benchmark, render_document
from evalledger.projections.case_pages import (
    CASES_PER_PAGE,
    anchor,
    case_section,
    page_groups,
    page_names,
    relative,
)
from evalledger.projections.case_result import case_result
from evalledger.projections.markdown import provenance_lines, render_aggregate_report, render_index, text
from evalledger.projections.reconstruction import document_report, score_histogram
from evalledger.projections.reports import (
    _titled,
    benchmark_folders,
    pretty_json,
    slug,
    unique_names,
    version_links,
)
from evalledger.projections.results import group_label, usage_of
from evalledger.projections.store import ReadModelStore, json_bytes
from evalledger.projections.wording import count_of


def render_case_pages(title: str, prov: dict[str, Any], cases: list[dict], results: list[dict],
                      group_names: dict[str, str], documents: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Every case page of one benchmark: (page path -> markdown, case id -> its link; both
    relative to the benchmark folder). ``group_names`` gives each group's file-safe name and
    ``documents`` each reconstruction case's document page (relative to the benchmark folder)."""
    pages: dict[str, str] = {}
    links: dict[str, str] = {}
    for group, idx in page_groups(results).items():
        chunks = [idx[k:k + CASES_PER_PAGE] for k in range(0, len(idx), CASES_PER_PAGE)]
        names = page_names(group_names[group], len(chunks))
        for number, (name, chunk) in enumerate(zip(names, chunks), start=1):
            lines = [f"# Cases: {text(title)}, {text(group)}", ""] + provenance_lines(prov)
            lines += [f"Page {number} of {len(chunks)} ({count_of(len(chunk), 'case')}, in case-id order). "
                      f"Back to [the benchmark's report]({relative('report.md', name)})."
                      + ("" if len(chunks) == 1 else " Pages: " + ", ".join(
                          f"[{k}]({relative(n, name)})" for k, n in enumerate(names, start=1)) + "."), ""]
            for i in chunk:
                doc = documents.get(results[i]["case_id"])
                lines += case_section(cases[i], results[i], relative(doc, name) if doc else None)
                links[results[i]["case_id"]] = f"{name}#{anchor(results[i]['case_id'])}"
            pages[name] = "\n".join(lines)
    return pages, links



def _benchmark_files(bench: str, folder: str, data: dict, cases: list[dict], results: list[dict],
                     agg: dict, position: tuple[int, str], runs: dict) -> dict[str, bytes]:
    """report.md, pictures and per-document files of one benchmark."""
    files: dict[str, bytes] = {}
    prov = {**provenance(position, cases, None),   # this benchmark's own judges and configs
            "checkpoint": agg["checkpoint"]}
    pictures: list[tuple[str, str]] = []
    model_names = unique_names(list(data["models"]))
    rated = {m: s for m, s in data["models"].items() if s["pass_rate"] is not None}
    if rated:
        files[f"{folder}/pass-rates.svg"] = svg.rate_bars(
            list(rated), [s["pass_rate"] for s in rated.values()], [s["pass_rate_ci95"] for s in rated.values()],
            "Pass rate per model (95% Wilson interval)").encode()
        pictures.append(("pass rate per model with its 95% interval", "pass-rates.svg"))
    for model, _ in data.get("reconstruction", {}).items():
        counts = score_histogram([c for c in cases if group_label(c) == model])
        name = f"claim-scores-{model_names[model]}.svg"
        files[f"{folder}/{name}"] = svg.histogram([str(i) for i in range(11)], counts,
                                                  _titled("Claim scores", model), "score (0-10)").encode()
        pictures.append((f"claim score histogram, {model}", name))
    audit = data.get("audit", {})
    group_names = unique_names(list(audit))
    for key, group in audit.items():
        name = f"zones-{group_names[key]}.svg"
        files[f"{folder}/{name}"] = svg.confusion_matrix(ZONES, group["matrix"],
                                                         _titled("Zone confusion matrix", key)).encode()
        pictures.append((key, name))
    documents: dict[str, str] = {}
    document_of: dict[str, str] = {}
    recon = [c for c in cases if c["kind"] == "reconstruction"]
    per_doc: dict[str, int] = {}
    for case in recon:
        per_doc[case["question_id"]] = per_doc.get(case["question_id"], 0) + 1
    for case in recon:
        doc = document_report(case, usage_of(case))
        base = slug(doc["doc_id"]) + ("" if per_doc[case["question_id"]] == 1 else f".{slug(case['model'])}")
        label = doc["doc_id"] + ("" if per_doc[case["question_id"]] == 1 else f" ({case['model']})")
        files[f"{folder}/documents/{base}.json"] = pretty_json({"built_from": prov["ledger_head"], **doc})
        files[f"{folder}/documents/{base}.md"] = render_document(doc, prov).encode()
        documents[label] = f"documents/{base}.md"
        document_of[case["case_id"]] = f"documents/{base}.md"
    audit_pictures = [(t, n) for t, n in pictures if t in audit]
    other_pictures = [(t, n) for t, n in pictures if t not in audit]
    group_names = unique_names(list(page_groups(results)))
    pages, case_links = render_case_pages(str(data.get("name") or bench), prov, cases, results, group_names,
                                          document_of)
    files.update({f"{folder}/{rel}": body.encode() for rel, body in pages.items()})
    text = render_benchmark(data, prov, results, other_pictures + audit_pictures,
                            dict(sorted(documents.items())), case_links)
    files[f"{folder}/report.md"] = text.encode()
    return files


def render_files(store: ReadModelStore) -> dict[str, bytes]:
    """Every report file, relative path -> bytes, rendered from the read models alone."""
    position = store.position()
    cases = list(store.iter_cases())
    benchmarks = store.load_keyed("proj_benchmarks")
    runs = store.load_keyed("proj_runs")
    checkpoint = store.load_keyed("proj_checkpoints").get(LATEST_CHECKPOINT)
    agg = build_aggregates(position, cases, benchmarks, runs, checkpoint)
    results = [case_result(c) for c in cases]
    files: dict[str, bytes] = {
        "aggregate-stats.json": pretty_json(agg),
        "evaluations.jsonl": b"".join(json_bytes(r) + b"\n" for r in results),
    }
    folders = benchmark_folders(agg["benchmarks"])
    by_bench: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_bench.setdefault(str(case["benchmark"]), []).append(i)
    links = version_links(agg["benchmarks"], folders)
    for bench, data in agg["benchmarks"].items():
        idx = by_bench.get(bench, [])
        files.update(_benchmark_files(bench, folders[bench], {**data, "version_links": links.get(bench, [])},
                                      [cases[i] for i in idx],
                                      [results[i] for i in idx], agg, position, runs))
    files["index.md"] = render_index(agg, folders).encode()
    files["agreement.md"] = render_agreement(reviewer_agreement(cases), agg["ledger_head"],
                                             agg["checkpoint"]).encode()
    files["aggregate-report.md"] = render_aggregate_report(agg, folders).encode()
    return dict(sorted(files.items()))

