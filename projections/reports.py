"""Render every report file from the read models and write them under ``<home>/reports/``.

``render_files`` is a pure function of the stored read models (cases sorted by id, canonical
JSON with sorted keys, fixed rounding): the same models give the same bytes. ``write_files``
writes only what changed (atomically) and removes files an earlier render wrote that this one
no longer produces, so an updated folder equals a rebuilt one file for file.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import threading
from pathlib import Path
from typing import Any

from evalledger.projections import svg
from evalledger.projections.aggregate import build_aggregates, provenance
from evalledger.projections.agreement import render_agreement, reviewer_agreement
from evalledger.projections.appliers import LATEST_CHECKPOINT
from evalledger.projections.audit import ZONES
from evalledger.projections.benchmark_md import render_benchmark, render_document
from evalledger.projections.case_pages import page_groups, render_case_pages
from evalledger.projections.case_result import case_result
from evalledger.projections.markdown import render_aggregate_report, render_index
from evalledger.projections.reconstruction import document_report, score_histogram
from evalledger.projections.results import NO_MODEL, group_label, usage_of
from evalledger.projections.store import ReadModelStore, json_bytes

MANIFEST = ".evalledger-reports"
TOP_LEVEL = {"index.md", "aggregate-stats.json", "aggregate-report.md", "evaluations.jsonl", "agreement.md",
             MANIFEST}


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


def write_files(directory: Path, files: dict[str, bytes]) -> list[Path]:
    """Write the rendered files (only those whose bytes changed), drop stale ones; all paths back."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = directory / MANIFEST
    previous = set(manifest.read_text().splitlines()) if manifest.exists() else set()
    written = []
    for rel, data in files.items():
        path = directory / rel
        written.append(path)
        if path.exists() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, data)
    for rel in sorted(previous - set(files)):
        stale = directory / rel
        if stale.is_file():
            stale.unlink(missing_ok=True)
        for parent in stale.parents:            # folders the stale file leaves empty go too
            if parent == directory or not parent.is_dir() or any(parent.iterdir()):
                break
            try:
                parent.rmdir()
            except OSError:                      # another reporter just wrote into it
                break
    _drop_dead_temporaries(directory)
    _atomic_write(manifest, "".join(rel + "\n" for rel in files).encode())
    return written


def _drop_dead_temporaries(directory: Path) -> None:
    """Remove the temporary files of reporters that died between writing and renaming (a SIGKILL):
    ``.<name>.<pid>.<thread>.tmp`` whose process is gone. A live reporter's are left alone."""
    for tmp in directory.rglob(".*.tmp"):
        parts = tmp.name.rsplit(".", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except PermissionError:   # alive, another user's
            continue


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file named for this process and thread, then rename over ``path``
    (two reporters at once, a daemon's and a user's, never see or leave half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _titled(title: str, group: str) -> str:
    """A picture's title for one model or profile ("(no model)" names none: the title stands alone)."""
    return title if group == NO_MODEL else f"{title}, {group}"
