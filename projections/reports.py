"""Render every report file from the read models and write them under ``<home>/reports/``.

``render_into`` is a pure function of the stored read models (cases sorted by id, canonical
JSON with sorted keys, fixed rounding): the same models give the same bytes. It hands each file
to a sink as it is produced (the big ones as streams) and keeps nothing per case: the aggregates
are tallied case by case (``aggregate_stream``) and the report rows wait in a temporary SQLite
file (``report_rows``), so memory stays flat as the home grows (``report_files``: the sinks).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from evalledger.projections import svg
from evalledger.projections.aggregate_stream import AggregateBuilder
from evalledger.projections.agreement import render_agreement, reviewer_agreement
from evalledger.projections.appliers import ALWAYS_STORED, LATEST_CHECKPOINT, new_case
from evalledger.projections.audit import ZONES
from evalledger.projections.benchmark_md import benchmark_lines, render_document
from evalledger.projections.case_pages import pages_of_plan
from evalledger.projections.case_result import case_result
from evalledger.projections.markdown import render_aggregate_report, render_index
from evalledger.projections.reconstruction import document_report, score_histogram
from evalledger.projections.report_files import (  # noqa: F401 (write_files: re-exported for callers)
    INCOMPLETE,
    MANIFEST,
    DictSink,
    FolderSink,
    Sink,
    write_files,
)
from evalledger.projections.report_rows import ReportRows
from evalledger.projections.results import NO_MODEL, group_label, usage_of
from evalledger.projections.store import ReadModelStore, json_bytes

TOP_LEVEL = {"index.md", "aggregate-stats.json", "aggregate-report.md", "evaluations.jsonl", "agreement.md",
             MANIFEST, INCOMPLETE}


def pretty_json(value: Any) -> bytes:
    """Indented canonical JSON with a final newline."""
    return json_bytes(value, indent=True) + b"\n"


def slug(text: str) -> str:
    """A file-name-safe form of an id (letters, digits, . _ - kept)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._") or "_"
    return cleaned[:80]


def unique_names(ids: list[str]) -> dict[str, str]:
    """A distinct slug per id (sorted ids; a short hash is added where two slugs collide)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    counts: dict[str, int] = {}
    for i in ids:
        counts[slug(i)] = counts.get(slug(i), 0) + 1
    for i in sorted(ids):
        name = slug(i)
        if counts[name] > 1 or name in taken:
            name = f"{name}-{hashlib.sha256(str(i).encode()).hexdigest()[:8]}"
        taken.add(name)
        names[i] = name
    return names


def benchmark_folders(benchmarks: dict[str, dict]) -> dict[str, str]:
    """A folder per benchmark, named after the benchmark's name; the paths stay stable across versions.

    The latest version of a name has ``<name>/``; an earlier version N has
    ``<name>/versions/v<N>/``. Benchmarks that share a name without being versions of one another
    (no version numbers, or different kinds) get their id added.
    """
    labels = {b: str(data.get("name") or b) for b, data in benchmarks.items()}
    groups: dict[str, list[str]] = {}
    for bench in sorted(labels):
        groups.setdefault(slug(labels[bench]), []).append(bench)
    out = {}
    for name, members in groups.items():
        versions = {b: benchmarks[b].get("version") or 1 for b in members}
        kinds = {benchmarks[b].get("kind") for b in members}
        versioned = len(set(versions.values())) == len(members) and len(kinds) == 1
        latest = max(members, key=lambda b: versions[b]) if versioned else None
        for bench in members:
            if len(members) == 1 and name not in TOP_LEVEL:
                out[bench] = name
            elif versioned and name not in TOP_LEVEL:
                out[bench] = name if bench == latest else f"{name}/versions/v{versions[bench]}"
            else:
                out[bench] = f"{name}-{slug(bench)[:16]}"
    return out


def version_links(benchmarks: dict[str, dict], folders: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """For each versioned benchmark, (label, relative link) to the other versions of its name."""
    by_name: dict[str, list[str]] = {}
    for bench, data in benchmarks.items():
        if data.get("version") or any(o != bench and benchmarks[o].get("name") == data.get("name")
                                      and benchmarks[o].get("version") for o in benchmarks):
            by_name.setdefault(str(data.get("name")), []).append(bench)
    out: dict[str, list[tuple[str, str]]] = {}
    for members in by_name.values():
        ordered = sorted(members, key=lambda b: benchmarks[b].get("version") or 1)
        for bench in ordered:
            out[bench] = [(f"version {benchmarks[o].get('version') or 1}" + (" (latest)" if o == ordered[-1] else ""),
                           posixpath.relpath(f"{folders[o]}/report.md", folders[bench]))
                          for o in ordered if o != bench]
    return out


# Keys of a template case's state that no aggregate reads (they are shown on the case pages, which
# load their cases again a page at a time); left out of the states held for the whole render.
_PAGE_ONLY = frozenset(("question", "response", "excerpts", "reasoning", "parsed", "risk", "missing_excerpts",
                        "opened", "response_chars", "judged_at"))
class Facts(dict):
    """A case state kept for the aggregates: only its non-empty keys; a missing one reads as the
    empty default every state has (``new_case``), so the aggregates see the same case."""

    def __missing__(self, key: str) -> Any:
        return _DEFAULTS[key]


_DEFAULTS = new_case("")


def aggregate_facts(case: dict) -> dict:
    """The part of a case state the aggregates read: a template case without its page-only keys,
    its empty keys and, of its fields, anything but whether each passed (reconstruction and audit
    cases are kept whole: their aggregates and documents read more). Only the benchmarks with such
    cases keep their facts (``aggregate_stream``); the rest are tallied and let go."""
    if case["kind"] != "template":
        return case
    facts = Facts()
    for key, value in case.items():
        if key in _PAGE_ONLY or (not value and key not in ALWAYS_STORED):
            continue
        if key == "fields":
            value = {name: {"passed": field["passed"]} for name, field in value.items()}
        facts[key] = value
    return facts


def _benchmark_files(sink: Sink, store: ReadModelStore, bench: str, folder: str, data: dict, cases: list[dict],
                     rows: ReportRows, prov: dict, agg: dict) -> None:
    """report.md, pictures, per-document files and case pages of one benchmark, each into ``sink``
    as it is rendered (``cases``: the benchmark's cases kept whole, [] for a tallied one; ``rows``
    every case's report row; ``prov`` the benchmark's own judges and configs)."""
    prov = {**prov, "checkpoint": agg["checkpoint"]}
    pictures: list[tuple[str, str]] = []
    model_names = unique_names(list(data["models"]))
    rated = {m: s for m, s in data["models"].items() if s["pass_rate"] is not None}
    if rated:
        sink.put(f"{folder}/pass-rates.svg", svg.rate_bars(
            list(rated), [s["pass_rate"] for s in rated.values()], [s["pass_rate_ci95"] for s in rated.values()],
            "Pass rate per model (95% Wilson interval)").encode())
        pictures.append(("pass rate per model with its 95% interval", "pass-rates.svg"))
    for model, _ in data.get("reconstruction", {}).items():
        counts = score_histogram([c for c in cases if group_label(c) == model])
        name = f"claim-scores-{model_names[model]}.svg"
        sink.put(f"{folder}/{name}", svg.histogram([str(i) for i in range(11)], counts,
                                                   _titled("Claim scores", model), "score (0-10)").encode())
        pictures.append((f"claim score histogram, {model}", name))
    audit = data.get("audit", {})
    group_names = unique_names(list(audit))
    for key, group in audit.items():
        name = f"zones-{group_names[key]}.svg"
        sink.put(f"{folder}/{name}", svg.confusion_matrix(ZONES, group["matrix"],
                                                          _titled("Zone confusion matrix", key)).encode())
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
        sink.put(f"{folder}/documents/{base}.json", pretty_json({"built_from": prov["ledger_head"], **doc}))
        sink.put(f"{folder}/documents/{base}.md", render_document(doc, prov).encode())
        documents[label] = f"documents/{base}.md"
        document_of[case["case_id"]] = f"documents/{base}.md"
    audit_pictures = [(t, n) for t, n in pictures if t in audit]
    other_pictures = [(t, n) for t, n in pictures if t not in audit]
    group_names = unique_names(rows.groups(bench))
    for rel, body in pages_of_plan(str(data.get("name") or bench), prov, rows.page_plan(bench, group_names),
                                   document_of, lambda ids: _page_cases(store, ids)):
        sink.put(f"{folder}/{rel}", body.encode())
    lines = benchmark_lines(data, prov, other_pictures + audit_pictures, dict(sorted(documents.items())),
                            rows.side_by_side(bench, list(data["models"]), group_names),
                            rows.attention(bench, group_names))
    with sink.stream(f"{folder}/report.md") as out:
        _write_lines(out, lines)


def _write_lines(out: BinaryIO, lines: Iterable[str]) -> None:
    """Write ``"\n".join(lines)`` as UTF-8 a piece at a time (no whole text held)."""
    batch: list[str] = []
    for i, line in enumerate(lines):
        batch.append(line if i == 0 else "\n" + line)
        if len(batch) >= 200:
            out.write("".join(batch).encode())
            batch = []
    out.write("".join(batch).encode())


def _page_cases(store: ReadModelStore, ids: list[str]) -> list[tuple[dict, dict]]:
    """The whole states of one page's cases, read again from the store, with their results."""
    states = store.load_cases(ids)
    return [(states[i], case_result(states[i])) for i in ids]


def _whole_benchmarks(store: ReadModelStore) -> set[str]:
    """The benchmarks (as ``str``) with a case of another kind than template: their aggregates
    read whole cases, so theirs are kept; every other benchmark is tallied case by case."""
    return {str(b) for (b,) in store.conn.execute(
        "SELECT DISTINCT benchmark FROM proj_cases WHERE kind IS NOT 'template'")}


def render_into(store: ReadModelStore, sink: Sink) -> None:
    """Render every report file from the read models alone into ``sink``, each as it is produced.

    Two passes over the cases, in case-id order: the first writes ``evaluations.jsonl`` line by
    line, tallies the aggregates (``aggregate_stream``) and spills each case's report row to a
    temporary file (``report_rows``); the case pages then read their cases again, one page at a
    time, and each ``report.md`` is written as a stream. The bytes equal those of rendering with
    every case in memory.
    """
    position = store.position()
    benchmarks = store.load_keyed("proj_benchmarks")
    runs = store.load_keyed("proj_runs")
    checkpoint = store.load_keyed("proj_checkpoints").get(LATEST_CHECKPOINT)
    builder = AggregateBuilder(_whole_benchmarks(store))
    rows = ReportRows()
    try:
        with sink.stream("evaluations.jsonl") as out:
            for case in store.iter_cases():
                result = case_result(case)
                out.write(json_bytes(result) + b"\n")
                builder.add(aggregate_facts(case))
                rows.add(result)
        rows.finish()
        agg = builder.finish(position, benchmarks, runs, checkpoint, rows.paired_counts)
        sink.put("aggregate-stats.json", pretty_json(agg))
        folders = benchmark_folders(agg["benchmarks"])
        links = version_links(agg["benchmarks"], folders)
        for bench, data in agg["benchmarks"].items():
            _benchmark_files(sink, store, bench, folders[bench], {**data, "version_links": links.get(bench, [])},
                             builder.benchmark_cases(bench), rows, builder.benchmark_provenance(bench, position), agg)
    finally:
        rows.close()
    sink.put("index.md", render_index(agg, folders).encode())
    sink.put("agreement.md", render_agreement(reviewer_agreement(builder.reviewed), agg["ledger_head"],
                                              agg["checkpoint"]).encode())
    sink.put("aggregate-report.md", render_aggregate_report(agg, folders).encode())


def render_files(store: ReadModelStore) -> dict[str, bytes]:
    """Every report file, relative path -> bytes, rendered from the read models alone (in memory:
    ``write_reports`` writes them to a folder without holding them all)."""
    sink = DictSink()
    render_into(store, sink)
    return dict(sorted(sink.files.items()))


def write_reports(store: ReadModelStore, directory: Path) -> list[Path]:
    """Render every report file into ``directory`` as it is produced (only changed files are
    rewritten, stale ones removed); every report path back."""
    sink = FolderSink(directory)
    try:
        render_into(store, sink)
        return sink.finish()   # inside: a manifest that cannot be written leaves a folder of two renders too
    except BaseException as exc:   # a KeyboardInterrupt leaves a half-written folder too
        sink.abort(exc)
        raise


def _titled(title: str, group: str) -> str:
    """A picture's title for one model or profile ("(no model)" names none: the title stands alone)."""
    return title if group == NO_MODEL else f"{title}, {group}"
