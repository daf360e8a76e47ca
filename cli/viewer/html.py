"""HTML building blocks of the viewer: escaping, the page frame, links that work served or exported.

Everything that came from a benchmark file or a judge goes through ``esc`` (or ``attr``) before
it reaches a page; links to content are built from ids with ``urllib.parse.quote``, never from
text a file supplied as a URL, so a ``javascript:`` link in a benchmark stays text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from evalledger.projections.store import json_bytes

# Most values (ids, names, numbers) hold no character HTML gives a meaning to: one regex search
# finds that and skips the five replacements of ``html.escape`` (the bulk of rendering a page).
_SPECIAL = re.compile(r"[&<>\"']").search
# Ids made of these characters are their own URL quoting (``quote(x, safe="")`` gives them back).
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch


def esc(value: Any) -> str:
    """``value`` as HTML text (quotes escaped too, so it is also safe inside an attribute)."""
    text = value if value.__class__ is str else ("" if value is None else str(value))
    if _SPECIAL(text) is None:
        return text
    return html.escape(text, quote=True)


def quote_id(value: str) -> str:
    """An id as one URL path segment (``quote(value, safe="")``, without its cost for plain ids)."""
    return value if _URL_SAFE(value) else quote(value, safe="")


def as_json(value: Any) -> str:
    """A JSON value as indented, escaped text for a ``<pre>``."""
    return esc(json_bytes(value, indent=True).decode("utf-8"))


@dataclass(frozen=True)
class Links:
    """Where each page is: absolute paths when served, relative ``.html`` files when exported.

    ``depth`` is how many folders below the site root the page being rendered sits (exported
    case pages sit in ``case/``), so an exported site works opened from any folder.
    """

    static: bool = False
    depth: int = 0
    token: str | None = None          # the review token, carried by served links in review mode

    def _root(self) -> str:
        if not self.static:
            return "/"
        return "".join(["..", "/"] * self.depth)      # parent folders, one per level below the root

    def _query(self, params: dict[str, Any]) -> str:
        params = {k: v for k, v in params.items() if v not in (None, "", False)}
        if self.token and not self.static:
            params["token"] = self.token
        return ("?" + urlencode(params)) if params else ""

    def overview(self) -> str:
        """The overview page."""
        return self._root() + ("index.html" if self.static else self._query({}))

    def cases(self, **params: Any) -> str:
        """The case table with these filters, sort and page (exported: the unfiltered pages only)."""
        if self.static:
            return self._root() + f"cases-{int(params.get('page') or 1)}.html"
        return "/cases" + self._query(params)

    def case(self, case_id: str, seq: int | None = None) -> str:
        """A case page (at the event ``seq`` when given)."""
        anchor = f"#seq-{seq}" if seq else ""
        if self.static:
            return self._root() + f"case/{quote_id(case_id)}.html{anchor}"
        return f"/case/{quote_id(case_id)}" + (self._query({}) if self.token else "") + anchor

    def compare(self) -> str:
        """The comparison with the other home."""
        return self._root() + ("compare.html" if self.static else "compare" + self._query({}))

    def verify(self) -> str:
        """The on-demand verify (served) or the verify result taken at export time."""
        return self._root() + ("verify.html" if self.static else "verify" + self._query({}))

    def asset(self, name: str) -> str:
        """A packaged static file (css, js)."""
        return self._root() + "static/" + name


def page(title: str, body: str, links: Links, live: bool = True, scripts: tuple[str, ...] = ()) -> str:
    """A whole HTML page: no inline script or style (the CSP forbids them), one packaged css, the
    live-update script (served pages), and the packaged ``scripts`` this page draws itself with
    (deferred: they run once the page is parsed, served or exported)."""
    before, after = _frame(links, live, scripts)
    return f"{before}{esc(title)} - evalledger</title>{after}{body}</main></body></html>\n"


@lru_cache(maxsize=32)
def _frame(links: Links, live: bool, scripts: tuple[str, ...]) -> tuple[str, str]:
    """The page around its title and its body, which depends only on the links (kept: every case
    page of a launch has the same frame)."""
    nav = (f'<nav><a href="{esc(links.overview())}">overview</a> '
           f'<a href="{esc(links.cases())}">cases</a> '
           f'<a href="{esc(links.compare())}">compare</a></nav>')
    script = "" if links.static or not live else f'<script src="{esc(links.asset("view.js"))}"></script>'
    script += "".join(f'<script src="{esc(links.asset(name))}" defer></script>' for name in scripts)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
            f'<link rel="stylesheet" href="{esc(links.asset("view.css"))}">{script}</head>'
            f'<body><header><span class="brand">evalledger view</span>{nav}</header><main id="main">')


def table(headers: list[str], rows: list[list[str]], css: str = "") -> str:
    """A table; ``rows`` hold HTML already escaped by the caller."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{esc(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def verdict_badge(verdict: Any) -> str:
    """A verdict as a coloured label (the class is chosen from a fixed set, never from content)."""
    css = {"pass": "pass", "fail": "fail"}.get(verdict, "none")
    return f'<span class="badge {css}">{esc(verdict if verdict is not None else "-")}</span>'
