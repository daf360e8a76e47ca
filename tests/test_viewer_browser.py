"""The viewer in a real browser: Playwright driving the distribution's Chromium (/usr/bin/chromium)
against ``evalledger view`` running as a subprocess.

Chromium missing is a failure, not a skip: CI installs it with ``.ci/install-browser``.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:                              # reported by the browser fixture as a failure
    expect = sync_playwright = None

from viewer_support import (
    XSS,
    costed_home,
    demo_home,
    failing_home,
    start_viewer,
    stop_viewer,
    usage_by_run,
    xss_home,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium from the distribution's package, driven by Playwright."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with 'bash .ci/install-browser' "
                    "(apt-get install -y chromium); the browser tests need it", pytrace=False)
    if sync_playwright is None:
        pytest.fail("the playwright package is missing: pip install -e '.[test]'", pytrace=False)
    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh page that records every dialog and every console message."""
    context = browser.new_context()
    tab = context.new_page()
    tab.dialogs, tab.console = [], []
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    tab.on("console", lambda message: tab.console.append(message.text))
    tab.set_default_timeout(20_000)
    yield tab
    context.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_home(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def viewer():
    """Start viewers with ``viewer(home, *args)`` -> base URL; all stopped at the end."""
    started = []

    def start(home, *args):
        proc, url = start_viewer(home, *args)
        started.append(proc)
        return url
    yield start
    for proc in started:
        stop_viewer(proc)


def base(url: str) -> str:
    return url.split("?")[0].rstrip("/")


def test_overview_of_the_demo_home(page, demo, viewer):
    page.goto(viewer(demo))
    assert page.locator("h1").inner_text() == "Overview"
    text = page.locator("main").inner_text()
    for expected in ("pharmacology-essentials", "1955-francis-report-summary", "verifyfast-cases.audit",
                     "template", "reconstruction", "audit", "model-alpha", "100.0% [78.5%, 100.0%] (14/14)",
                     "offline-heuristics-1", "zones", "claims", "McNemar"):
        assert expected in text, expected
    head = sqlite3.connect(demo / "ledger.db").execute("SELECT MAX(seq) FROM events").fetchone()[0]
    assert f"seq {head}" in page.locator("#head-seq").inner_text()
    assert page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex"  # css loaded
    page.click("#verify")
    assert page.locator("#verify-status").inner_text().startswith("ok")
    assert not page.dialogs


def test_overview_shows_each_runs_judge_tokens_and_cost(page, tmp_path_factory, viewer, run_cli):
    """Two runs against a stand-in that reports usage: the unpriced one's cost reads "unknown"."""
    home = costed_home(tmp_path_factory.mktemp("costed"), run_cli)
    expected = usage_by_run(home)
    page.goto(viewer(home))
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 2
    for i in range(2):
        cells = rows.nth(i).locator("td").all_inner_texts()
        want = expected[cells[0]]
        assert cells[1:3] == ["openai", "judge-1"]
        assert cells[8] == str(want["tokens"]) and int(cells[7]) == want["calls"]
        assert cells[9] == ("unknown" if want["cost"] is None else f'{want["cost"]:.6f}')
    assert sorted(page.locator("table.runs .cost").all_inner_texts())[-1] == "unknown"
    assert page.locator("#totals").inner_text().endswith("cost unknown USD")


def test_filtering_to_failures(page, demo, viewer):
    page.goto(viewer(demo) + "cases")
    page.select_option("select[name=verdict]", "fail")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r"verdict=fail"))
    fails = sqlite3.connect(demo / "ledger.db").execute(
        "SELECT COUNT(*) FROM proj_cases WHERE verdict = 'fail'").fetchone()[0]
    assert f"{fails} cases" in page.locator(".pageinfo").inner_text()
    badges = page.locator("table.cases tbody .badge").all_inner_texts()
    assert badges and set(badges) == {"fail"} and len(badges) == min(fails, 50)


def test_a_failed_case_shows_its_failing_quote_highlighted(page, tmp_path, viewer, run_cli):
    ids = failing_home(tmp_path / "home")
    page.goto(viewer(tmp_path / "home") + "cases?verdict=auto-failed")
    page.click("a.case-link")
    page.wait_for_url(re.compile(ids["failed_quote"]))
    failed = page.locator("mark.failed-quote").first
    assert failed.inner_text() == "approved in 1999 by the EMA" and failed.is_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('mark.failed-quote')).backgroundColor") \
        == "rgb(255, 196, 196)"
    found = page.locator("#response mark.excerpt")
    assert found.inner_text() == "approved in 2001 by the FDA" and found.get_attribute("title") == "similarity 0.97"
    assert "similarity 0.41" in page.locator("li.excerpt-retried").inner_text()
    main = page.locator("main").inner_text()
    assert "excerpt.retried" in main and "case.auto_failed" in main
    assert "judge call" in main and "latency 12.5 ms" in main and " · live · " in main
    seqs = [int(i.split("-")[1]) for i in page.evaluate("Array.from(document.querySelectorAll('li.event')).map(e => e.id)")]
    assert seqs == sorted(seqs) and len(seqs) >= 5                                   # ledger order, linked by seq
    page.evaluate("window.stillTheSamePage = true")
    assert run_cli("note", ids["failed_quote"], "looked at the EMA quote", "--author", "cy",
                   home=tmp_path / "home").returncode == 0
    expect(page.locator("table.reviews")).to_contain_text("looked at the EMA quote", timeout=30_000)   # redrawn live
    assert page.evaluate("window.stillTheSamePage") is True
    page.goto(viewer(tmp_path / "home") + f"case/{ids['overridden']}")
    assert page.locator("main p", has_text="original verdict").inner_text() == \
        "original verdict pass · verdict in force fail"
    assert "dose unit wrong" in page.locator("table.reviews").inner_text()


def test_an_exported_case_page_shows_what_the_served_one_shows(page, tmp_path, viewer):
    """The static export's case page (opened from disk, no server) draws the same content as the
    served page: both are drawn by the packaged case.js from the same data."""
    from evalledger.cli.viewer import export_site
    ids = failing_home(tmp_path / "home")
    export_site(tmp_path / "home", tmp_path / "site")
    url = viewer(tmp_path / "home")
    for case_id in ids.values():
        page.goto(url + f"case/{case_id}")
        page.wait_for_selector(f"body[data-case-drawn='{case_id}']", state="attached")
        served = page.locator("#case-root").inner_text()
        page.goto((tmp_path / "site" / "case" / f"{case_id}.html").as_uri())
        page.wait_for_selector(f"body[data-case-drawn='{case_id}']", state="attached")
        assert page.locator("#case-root").inner_text() == served
        assert page.locator("mark").count() >= 1 if case_id == ids["failed_quote"] else True


def test_compare_a_home_with_its_replay(page, demo, tmp_path, viewer, run_cli):
    replayed = tmp_path / "replayed"
    done = run_cli("replay", "--into", replayed, "--quiet", home=demo, timeout=300)
    assert done.returncode == 0, done.stderr
    case_id = sqlite3.connect(replayed / "ledger.db").execute(
        "SELECT case_id FROM proj_cases WHERE verdict = 'pass' ORDER BY case_id LIMIT 1").fetchone()[0]
    assert run_cli("override", case_id, "--verdict", "fail", "--reason", "replay reviewed", "--author", "ana",
                   home=replayed).returncode == 0
    url = viewer(demo, "--compare", str(replayed))
    page.goto(url + "compare")
    assert re.match(r"1 of \d+ cases changed", page.locator("#compare-summary").inner_text())
    row = page.locator("table.changes tbody tr")
    assert "verdict" in row.inner_text() and "verdict.overridden" in row.inner_text()
    page.click("table.changes a.case-link")
    page.wait_for_url(re.compile(case_id))
    page.goto(url + "cases?changed=1")
    assert page.locator("a.case-link").all_inner_texts() == [case_id]


def test_review_override_then_history_shows_both_verdicts(page, demo, tmp_path, viewer, run_cli):
    home = tmp_path / "copy"
    shutil.copytree(demo, home)
    case_id = sqlite3.connect(home / "ledger.db").execute(
        "SELECT case_id FROM proj_cases WHERE verdict = 'pass' AND kind = 'template' LIMIT 1").fetchone()[0]
    url = viewer(home, "--review")
    assert "token=" in url
    page.goto(url)
    page.goto(page.url.split("?")[0] + f"case/{case_id}?" + url.split("?")[1])
    page.select_option("#override-form select[name=verdict]", "fail")
    page.fill("#override-form input[name=reason]", "units missing")
    page.fill("#override-form input[name=author]", "ana")
    page.click("#override-form button")
    page.wait_for_selector("text=verdict in force")
    assert "units missing" in page.locator("table.reviews").inner_text()
    assert page.locator("main .meta .badge").inner_text() == "fail"
    history = run_cli("history", case_id, home=home)
    assert history.returncode == 0
    assert re.search(r"case\.judged .*verdict='pass'", history.stdout)
    assert re.search(r"verdict\.overridden .*verdict='fail' author='ana' reason='units missing'", history.stdout)


def test_a_file_dropped_while_the_page_is_open_appears_without_reload(page, tmp_path, viewer, run_cli):
    home = tmp_path / "home"
    failing_home(home)
    page.goto(viewer(home) + "cases")
    assert "3 cases" in page.locator(".pageinfo").inner_text()
    page.wait_for_selector("body[data-head]", state="attached")                  # the event stream is open
    page.evaluate("window.stillTheSamePage = true")
    ingest = subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "ingest",
                               str(SAMPLES / "pharmacology.benchmark.json")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert ingest.wait(120) == 0, ingest.stderr.read()
    expect(page.locator(".pageinfo")).to_contain_text("31 cases", timeout=30_000)
    assert run_cli("run", "--judge", "offline", home=home, timeout=300).returncode == 0
    page.locator("table.cases .badge.pass").nth(1).wait_for(timeout=60_000)
    assert page.evaluate("window.stillTheSamePage") is True                       # swapped, not reloaded
    assert int(page.get_attribute("body", "data-live-updates")) >= 2


def test_hostile_benchmark_renders_inert(page, tmp_path, viewer):
    ids = xss_home(tmp_path / "home")
    url = viewer(tmp_path / "home")
    for path in ["", "cases", "cases?q=%3Cscript", "compare", *[f"case/{i}" for i in ids]]:
        page.goto(url + path)
        page.wait_for_load_state("load")
        for link in page.locator("a").all():
            href = link.get_attribute("href") or ""
            assert not href.lower().startswith("javascript:"), href
        assert page.evaluate("document.querySelectorAll('img, svg, iframe, object').length") == 0
        scripts = page.evaluate("Array.from(document.scripts).map(s => [s.src, s.type])")
        assert all(src.endswith(("/static/view.js", "/static/case.js")) or (src == "" and kind == "application/json")
                   for src, kind in scripts), scripts                           # a case page's data block
    page.goto(url + f"case/{ids[0]}")
    page.wait_for_selector(f"body[data-case-drawn='{ids[0]}']", state="attached")
    assert XSS[0] in page.locator("main").inner_text()                         # shown as text
    assert any(XSS[0] in text for text in page.locator("pre").all_inner_texts())  # drawn by case.js, as text
    page.locator("main a").last.click()
    assert page.dialogs == []
    assert not [m for m in page.console if "Content Security Policy" in m], page.console


DOCS = Path(__file__).resolve().parents[1] / "docs"
SCREENSHOTS = {"view-overview.png": "", "view-cases.png": "cases?verdict=fail&model=model-beta",
               "view-case.png": "case/{failed}"}
VIEWPORT = {"width": 1100, "height": 720}


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_docs_screenshots_are_current(browser, demo, viewer, tmp_path):
    """Regenerates the screenshots docs/view.md shows and checks the committed ones match them in
    dimensions and, loosely, in size (timestamps and hashes differ from run to run, so pixels are
    not compared). EVALLEDGER_UPDATE_SCREENSHOTS=1 writes the new ones into docs/."""
    import os
    failed = sqlite3.connect(demo / "ledger.db").execute(
        "SELECT case_id FROM proj_cases WHERE verdict = 'fail' AND model = 'model-beta' ORDER BY question_id "
        "LIMIT 1").fetchone()[0]
    url = viewer(demo)
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    tab = context.new_page()
    update = os.environ.get("EVALLEDGER_UPDATE_SCREENSHOTS") == "1"
    try:
        for name, path in SCREENSHOTS.items():
            tab.goto(url + path.format(failed=failed))
            fresh = tab.screenshot(type="png")
            assert len(fresh) < 250_000, (name, len(fresh))                          # small enough for docs/
            if update:
                (DOCS / name).write_bytes(fresh)
            committed = DOCS / name
            assert committed.exists(), f"{committed} missing: run EVALLEDGER_UPDATE_SCREENSHOTS=1 pytest {__file__}"
            old = committed.read_bytes()
            assert png_size(old) == png_size(fresh) == (VIEWPORT["width"], VIEWPORT["height"]), name
            assert 0.6 < len(old) / len(fresh) < 1.6, (f"{name} looks out of date ({len(old)} vs {len(fresh)} bytes): "
                                                     "regenerate with EVALLEDGER_UPDATE_SCREENSHOTS=1")
    finally:
        context.close()
