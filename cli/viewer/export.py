"""``evalledger view --export DIR``: the viewer's pages as a self-contained static site.

The same renderers as the server, with relative links (``Links(static=True)``): ``index.html``,
``verify.html`` (the verify result at export time), ``cases-N.html`` (the unfiltered table, page by
page), ``case/<id>.html``, ``compare.html``, ``static/view.css`` and ``static/case.js`` (case pages
draw themselves from the data they carry). The live-update script is not written: an exported site
has nothing live to do.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from evalledger.cli.viewer import pages
from evalledger.cli.viewer.case_page import case_page
from evalledger.cli.viewer.html import Links
from evalledger.cli.viewer.state import HomeView


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def export_site(home: str | Path, out_dir: str | Path, compare: str | Path | None = None) -> int:
    """Write the static site of ``home`` into ``out_dir``; returns the number of pages written."""
    from evalledger.cli.viewer.server import asset_bytes, check_homes
    check_homes(home, compare)
    out = Path(out_dir)
    view = HomeView(home, compare)
    written = 0
    try:
        with view.reading():   # the whole site from one snapshot of the read models
            top, below = Links(static=True), Links(static=True, depth=1)
            aggregates, runs = view.overview()
            _write(out / "index.html", pages.overview_page(aggregates, runs, top))
            _write(out / "verify.html", pages.verify_page(view.verify(), top))
            (out / "static").mkdir(parents=True, exist_ok=True)
            for name in ("view.css", "case.js"):
                (out / "static" / name).write_bytes(asset_bytes(name))
            written += 2
            page_no, pages_total = 1, 1
            while page_no <= pages_total:
                result = view.cases({}, "case", False, page_no)
                pages_total = result["pages"]
                _write(out / f"cases-{page_no}.html", pages.cases_page(result, {}, "case", False, {}, top))
                written += 1
                page_no += 1
            for case_id in view.all_case_ids():
                _write(out / "case" / f"{quote(case_id, safe='')}.html",
                       case_page(case_id, view.case_document(case_id), below))
                written += 1
            diff = view.diff()
            _write(out / "compare.html", pages.compare_page(diff, str(home), str(compare), top) if diff
                   else pages.no_compare_page(top))
            written += 1
    finally:
        view.close()
    return written
