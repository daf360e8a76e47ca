"""Reports written as a stream equal, byte for byte, those of the renderer that held every case,
result and file in memory (tests/reference_reports.py), on a varied home: the demo's template,
reconstruction and audit benchmarks, repeats, an override and a confirmation, and a benchmark
with more than one case page per model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import reference_reports
from evalledger import ledger, projections
from evalledger.projections import case_pages
from evalledger.projections.reports import MANIFEST, render_into, write_reports
from evalledger.projections.store import ReadModelStore
from reports_support import StreamsNoted, reference_files

PAGE = 7     # cases per page in these tests: a few cases make several pages


def _template(name: str, questions: int, deep: bool) -> dict:
    """A template benchmark of ``questions`` arithmetic questions answered by a right and a wrong model."""
    qs, responses = [], []
    for i in range(questions):
        a, b = 12 + i % 80, 3 + i % 17
        qs.append({"id": f"q{i}", "question": f"What is {a} times {b}?", "template": {"fields": [
            {"name": "result", "type": "int", "description": "The product", "ground_truth": a * b,
             "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}})
        responses += [{"question_id": f"q{i}", "model": "right", "text": f"{a} x {b} = {a * b}."},
                      {"question_id": f"q{i}", "model": "wrong", "text": f"{a} x {b} = {a * b + 1}."}]
    return {"format": "evalledger/benchmark@1", "name": name, "questions": qs, "responses": responses,
            "config": {"deep_judgment_enabled": deep}}


def _folder_files(reports: Path) -> dict[str, bytes]:
    return {p.relative_to(reports).as_posix(): p.read_bytes()
            for p in sorted(reports.rglob("*")) if p.is_file() and p.name != MANIFEST}





class _WatchedStore(ReadModelStore):
    """A store that notes how many whole case states each page read asks for."""

    def __init__(self, led):
        super().__init__(led)
        self.loads: list[int] = []

    def load_cases(self, case_ids):
        ids = list(case_ids)
        self.loads.append(len(ids))
        return super().load_cases(ids)





def test_streamed_reports_equal_the_in_memory_renderer_on_a_varied_home(tmp_path, run_cli, monkeypatch):
    demo = run_cli("demo", "--dir", tmp_path)
    assert demo.returncode == 0, demo.stderr
    home = Path(re.search(r"^demo home: (.+)$", demo.stdout, re.M).group(1))
    repeated = tmp_path / "repeated.benchmark.json"
    repeated.write_text(json.dumps(_template("repeated", 4, deep=True)))
    assert run_cli("ingest", repeated, home=home).returncode == 0
    assert run_cli("run", "--repeats", "3", "--quiet", home=home).returncode in (0, 1)
    paged = tmp_path / "paged.benchmark.json"          # more than one case page per model
    paged.write_text(json.dumps(_template("paged", 2 * PAGE + 3, deep=False)))
    assert run_cli("ingest", paged, home=home).returncode == 0
    assert run_cli("run", "--quiet", home=home).returncode in (0, 1)
    with ledger.open_ledger(home, readonly=True) as led:
        judged = sorted(e.data["case_id"] for e in led.read(types=["case.judged"]))
    assert run_cli("override", judged[0], "--verdict", "pass", "--reason", "checked by hand", "--author", "ann",
                   home=home).returncode == 0
    assert run_cli("confirm", judged[1], "--author", "bob", home=home).returncode in (0, 1)
    assert run_cli("report", home=home).returncode == 0

    expected = reference_files(home)
    kinds = json.loads(expected["aggregate-stats.json"])["benchmarks"].values()
    assert {b["kind"] for b in kinds} == {"template", "reconstruction", "audit"}
    assert any("repeats" in m for b in kinds for m in b["models"].values())
    assert _folder_files(home / "reports") == expected          # written by ``evalledger report``
    assert (home / "reports" / MANIFEST).read_text().splitlines() == sorted(expected)

    # With small pages: several pages per model, each read on its own, in both renderers.
    monkeypatch.setattr(case_pages, "CASES_PER_PAGE", PAGE)
    monkeypatch.setattr(reference_reports, "CASES_PER_PAGE", PAGE)
    paged_expected = reference_files(home)
    assert any(re.search(r"^paged/cases/[^/]+/3\.md$", rel) for rel in paged_expected)
    out = tmp_path / "out"
    with ledger.open_ledger(home, readonly=True) as led:
        store, sink = _WatchedStore(led), StreamsNoted()
        try:
            render_into(store, sink)
            loads, cases = list(store.loads), store.case_count()
            write_reports(store, out)
            # Again, over an earlier render with a file this one does not produce: unchanged files
            # keep their bytes and times (the streamed evaluations.jsonl too), the stale one goes.
            (out / "paged" / "old.md").write_text("left by an earlier render")
            (out / MANIFEST).write_text((out / MANIFEST).read_text() + "paged/old.md\n")
            times = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != MANIFEST}
            write_reports(store, out)
        finally:
            store.close()
        assert projections.render(led) == paged_expected
    assert dict(sorted(sink.files.items())) == paged_expected
    # evaluations.jsonl and every benchmark's report.md (a row per question) come in pieces
    assert sink.streamed[0] == "evaluations.jsonl"
    assert sorted(sink.streamed[1:]) == sorted(r for r in paged_expected if r.endswith("/report.md"))
    assert max(loads) <= PAGE and sum(loads) == cases   # each case read once more, a page at a time
    assert _folder_files(out) == paged_expected
    assert not (out / "paged" / "old.md").exists() and not list(out.rglob(".*.tmp"))
    assert all(p.stat().st_mtime_ns == t for p, t in times.items() if p.exists())
