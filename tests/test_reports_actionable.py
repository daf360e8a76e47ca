"""Reports a person can act on (issue 16, item 8), through ``evalledger demo`` / ``report`` /
``rebuild`` on real homes judged by the offline judge: every case row links to a section showing
the question, a bounded excerpt of the response around the evidence, the parsed values against the
expected ones and the verdict with its reasons; every failed verdict is listed; text from files is
escaped; wording agrees with counts; the histogram's title clears its labels; missing terms are words."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalledger.projections import svg
from evalledger.projections.case_pages import CASES_PER_PAGE, EXCERPT_CHARS, render_case_pages
from evalledger.projections.markdown import text
from evalledger.projections.wording import count_of, with_article
from watch_support import CLI, cli_env

SVG = "{http://www.w3.org/2000/svg}"
LINK = re.compile(r"\[([^\]\\]+)\]\((cases/[^)#]+)#(case-[0-9a-f]+)\)")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The reports folder of a demo home: the packaged samples judged offline, then reported."""
    where = tmp_path_factory.mktemp("demo")
    proc = subprocess.run([*CLI, "demo", "--dir", str(where)], capture_output=True, text=True,
                          env=cli_env(), cwd=where, timeout=120)
    assert proc.returncode == 0, proc.stderr
    home = Path(re.search(r"^demo home: (.+)$", proc.stdout, re.M).group(1))
    return home / "reports"


def evaluations(reports: Path) -> list[dict]:
    return [json.loads(line) for line in (reports / "evaluations.jsonl").read_text().splitlines()]


def section_of(page: Path, anchor: str) -> str:
    """The markdown of one case's section: from its anchor to the next one."""
    body = page.read_text()
    start = body.index(f'<a id="{anchor}"></a>')
    end = body.find('<a id="case-', start + 1)
    return body[start:end if end > 0 else len(body)]


def attention_rows(report: str) -> list[str]:
    part = report.split("### Cases to look at", 1)[1]
    return [line for line in part.splitlines() if line.startswith("| [")]


def test_every_failed_verdict_is_a_linked_row_whose_section_explains_it(demo):
    report = (demo / "pharmacology-essentials" / "report.md").read_text()
    rows = attention_rows(report)
    linked = {m.group(1): m for m in (LINK.search(r) for r in rows) if m}
    failed = [r for r in evaluations(demo) if r["kind"] == "template" and r["verdict"] == "fail"]
    assert len(failed) > 2 and any(not r["auto_failed"] for r in failed)
    assert {r["case_id"] for r in failed} <= set(linked)
    for result in failed:
        m = linked[result["case_id"]]
        page = demo / "pharmacology-essentials" / m.group(2)
        section = section_of(page, m.group(3))
        assert f"## Question {result['question_id']}, {result['model']}" in section
        assert "Question: " in section and "Response (" in section and "\n> " in section
        assert "| field | parsed | expected | check | result | evidence |" in section
        for name, field in result["fields"].items():
            row = next(line for line in section.splitlines() if line.startswith(f"| {name} |"))
            assert text(field["extracted"]) in row or field["extracted"] in (None, True, False)
        assert "Verdict: **fail" in section
        for reason in result["auto_fail_reasons"]:
            assert text(reason)[:60] in section


def test_side_by_side_cells_link_to_the_case_sections(demo):
    report = (demo / "pharmacology-essentials" / "report.md").read_text()
    table = report.split("### Side by side", 1)[1].split("###", 1)[0]
    links = LINK.findall(table)
    assert len(links) == len([r for r in evaluations(demo) if r["kind"] == "template"])
    for _label, page, anchor in links:
        assert f'<a id="{anchor}"></a>' in (demo / "pharmacology-essentials" / page).read_text()


def test_audit_and_reconstruction_summaries_have_no_template_columns(demo):
    for folder in ("verifyfast-cases.audit", "1955-francis-report-summary"):
        report = (demo / folder / "report.md").read_text()
        header = report.split("## Summary", 1)[1].strip().splitlines()[0]
        assert header == "| model | cases | judged | failed | pending | judge calls | judge retries | tokens | cost (USD) |"
        assert "pass rate" not in report.lower() and "passed" not in header
    aggregate = (demo / "aggregate-report.md").read_text()
    audit_part = aggregate.split("## verifyfast-cases.audit", 1)[1].split("\n## ", 1)[0]
    assert "| pass rate |" not in audit_part and "| judge calls |" in audit_part
    template = (demo / "pharmacology-essentials" / "report.md").read_text()
    assert "| passed | pass rate | 95% CI |" in template


def test_counts_and_articles_agree_in_every_report(demo):
    files = [p for p in demo.rglob("*.md")]
    for path in files:
        body = path.read_text()
        assert not re.search(r"(?<![\d.])1 (calls|documents|cases|tokens|judge calls|benchmarks|scored claims)\b",
                             body), path
        assert not re.search(r"\ba (audit|input|error)\b", body), path
    recon = (demo / "1955-francis-report-summary" / "report.md").read_text()
    assert ": 1 call\n" in recon and "1 document, 9 scored claims" in recon
    assert count_of(1, "judge call") == "1 judge call" and count_of(0, "case") == "0 cases"
    assert count_of(2, "summary") == "2 summaries" and with_article("audit") == "an audit"


def test_missing_terms_are_the_words_the_claim_used(demo):
    page = next((demo / "1955-francis-report-summary" / "documents").glob("*.md")).read_text()
    rows = [line for line in page.splitlines() if "; missing: " in line]
    assert rows
    for row in rows:
        claim_text = row.rstrip(" |").rsplit(" | ", 1)[1].lower()
        words = set(re.findall(r"[a-z0-9]+", claim_text))
        missing = row.split("; missing: ", 1)[1].split(".", 1)[0].split(", ")
        for term in missing:
            assert all(part in words for part in term.split("-")), (term, claim_text)
    assert "missing: declared, potent" in page


def band(label: ET.Element) -> tuple[int, int]:
    """The y-range a text's glyphs take: a font size above its baseline to a quarter of it below."""
    y, size = int(label.get("y")), int(label.get("font-size"))
    return y - size, y + size // 4


def test_the_claim_histogram_title_clears_the_count_labels(demo):
    drawn = [(demo / "1955-francis-report-summary" / "claim-scores-model-alpha.svg").read_text(),
             svg.histogram([str(i) for i in range(11)], [0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 7], "Claim scores, m", "score")]
    for picture in drawn:
        root = ET.fromstring(picture)
        texts = list(root.iter(f"{SVG}text"))
        title = next(t for t in texts if t.get("font-weight") == "bold")
        axis = int(next(root.iter(f"{SVG}line")).get("y1"))            # the bars stand on it
        counts = [t for t in texts if t is not title and int(t.get("y")) < axis]   # written over the bars
        assert len(counts) == 11 and all(t.text.isdigit() for t in counts)
        top, bottom = band(title)
        for label in counts:
            low, high = band(label)
            assert high < top or low > bottom, (label.text, band(label), band(title))


def test_rebuild_writes_the_case_pages_byte_identical(demo, run_cli):
    before = {p: p.read_bytes() for p in sorted(demo.rglob("*")) if p.is_file()}
    assert any("/cases/" in str(p) for p in before)
    done = run_cli("rebuild", home=demo.parent)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in sorted(demo.rglob("*")) if p.is_file()} == before


HOSTILE_ID = "q1](http://evil.example)<b>"
HOSTILE_MODEL = "m<script>alert(1)</script>"
FILLER = "Filler sentence about cells and biology. " * 40
RESPONSE = (FILLER + "A human cell has 24 pairs of chromosomes [click](http://evil.example) "
            "<img src=x onerror=alert('x')>. " + "More filler text follows here. " * 40)


def test_hostile_ids_and_responses_show_as_text_and_the_excerpt_is_bounded(tmp_path, run_cli):
    bench = {"format": "evalledger/benchmark@1", "name": "quiz [x](http://evil.example)", "config": {},
             "questions": [{"id": HOSTILE_ID, "question": "How many chromosome pairs? <i>now</i>",
                            "template": {"fields": [{"name": "pair_count", "type": "int",
                                                     "description": "The number of chromosome pairs",
                                                     "ground_truth": 23, "verify_with": {"type": "NumericExact"}}]}}],
             "responses": [{"question_id": HOSTILE_ID, "model": HOSTILE_MODEL, "text": RESPONSE}]}
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "hostile.json").write_text(json.dumps(bench))
    done = run_cli("demo", "--samples", samples, "--dir", tmp_path)       # ingest, judge offline, report
    assert done.returncode == 0, done.stderr
    home = Path(re.search(r"^demo home: (.+)$", done.stdout, re.M).group(1))
    case_id = json.loads((home / "reports" / "evaluations.jsonl").read_text())["case_id"]
    done = run_cli("override", case_id, "--verdict", "pass", "--reason", "see [proof](http://evil.example)",
                   "--author", "<b>rev</b>", home=home)
    assert done.returncode == 0, done.stderr
    assert run_cli("report", home=home).returncode == 0
    reports = home / "reports"
    assert "see [proof\\](http\\://evil.example)" in (reports / "agreement.md").read_text()
    pages = list(reports.rglob("*.md"))
    assert any("/cases/" in str(p) for p in pages)
    for page in pages:
        body = page.read_text()
        unescaped = re.sub(r'<a id="case-[0-9a-f]+"></a>', "", body)       # the report's own anchors
        assert not re.search(r"(?<!\\)\]\(http", unescaped), page           # no link to the hostile URL
        assert not re.search(r"(?<!\\)<", unescaped), page                   # no HTML at all
        assert not re.search(r"(?<!\\)https?://", unescaped), page          # no bare URL GFM would link
    [case_page] = [p for p in pages if "/cases/" in str(p)]
    body = case_page.read_text()
    assert "## Question q1\\](http\\://evil.example)\\<b\\>, m\\<script\\>alert(1)\\</script\\>" in body
    quote = next(line for line in body.splitlines() if line.startswith("> "))
    shown = quote[2:].replace("\\", "")
    assert "24 pairs of chromosomes [click](http://evil.example)" in shown
    assert shown.startswith("…") and shown.endswith("…") and len(shown) <= EXCERPT_CHARS + 2
    assert f"of {len(RESPONSE)}, around the evidence" in body
    assert "| pair_count | 24 | 23 | NumericExact | failed |" in body
    assert "Verdict: **pass (overridden by \\<b\\>rev\\</b\\>: see [proof\\](http\\://evil.example); original fail)**" in body


def test_case_pages_are_bounded_in_size_and_each_case_keeps_its_link():
    results, cases = [], []
    for i in range(CASES_PER_PAGE + 3):
        case_id = f"{i:016x}"
        results.append({"case_id": case_id, "benchmark": "b", "kind": "template", "question_id": f"q{i}",
                        "model": "m", "status": "judged", "verdict": "pass", "original_verdict": "pass",
                        "override": None, "auto_failed": False, "abstained": False, "auto_fail_reasons": [],
                        "fields": {}, "excerpts": {}, "failures": [], "reasoning": None, "traits": {}})
        cases.append({"case_id": case_id, "question": {"question": "?"}, "response": "yes " * 2000})
    prov = {"ledger_head": {"seq": 1, "hash": "h"}, "judges": [], "config_hashes": []}
    pages, links = render_case_pages("b", prov, cases, results, {"m": "m"}, {})
    assert sorted(pages) == ["cases/m.md", "cases/m/2.md"]
    assert pages["cases/m.md"].count('<a id="case-') == CASES_PER_PAGE
    assert pages["cases/m/2.md"].count('<a id="case-') == 3
    assert "Back to [the benchmark's report](../../report.md). Pages: [1](../m.md), [2](2.md)." in pages["cases/m/2.md"]
    assert links[f"{CASES_PER_PAGE:016x}"] == f"cases/m/2.md#case-{CASES_PER_PAGE:016x}"
    assert links[f"{0:016x}"] == f"cases/m.md#case-{0:016x}"
    assert max(len(line) for page in pages.values() for line in page.splitlines()) < EXCERPT_CHARS + 200
