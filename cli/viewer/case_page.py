"""The case page: a small HTML frame that carries the case's data as JSON, rendered by ``case.js``.

A case page shows every event of the case (question, response with its excerpts highlighted,
ground truth, the stage timeline with every judge call, fields, traits, claims, audit, notes and
overrides). Rendering that in Python cost several times the queries that fetch it, so the server
sends the rows instead (the way Inspect's viewer does): the case's events with their payloads as
stored (canonical JSON, not decoded and encoded again) and the case's result as the view index
keeps it, inside a ``<script type="application/json">`` data block. The packaged ``case.js``
builds the page from it with ``textContent`` only, so nothing from a benchmark or a judge is ever
parsed as HTML; the CSP forbids inline scripts, and a data block is not one.

Served and exported pages are the same frame (exported ones link the packaged script beside them).
"""

from __future__ import annotations

from urllib.parse import quote

from evalledger.cli.viewer.html import Links, esc, page


def data_block(document: str) -> str:
    """``document`` as the body of a ``<script type="application/json">``: every ``<`` written as
    ``\\u003c`` (the same JSON), so no ``</script>`` or ``<!--`` in the content can end the block."""
    return '<script type="application/json" id="case-data">' + document.replace("<", "\\u003c") + "</script>"


def review_forms(case_id: str, token: str) -> str:
    """The override and note forms (review mode only); both post the launch token."""
    base = f"/case/{quote(case_id, safe='')}"
    hidden = f'<input type="hidden" name="token" value="{esc(token)}">'
    return (f'<section id="review"><h2>Review</h2><form class="review" id="override-form" method="post" '
            f'action="{esc(base)}/override">{hidden}<label>verdict <select name="verdict"><option>pass</option>'
            '<option>fail</option></select></label><label>reason <input name="reason" required></label>'
            '<label>author <input name="author" required></label><button type="submit">override</button></form>'
            f'<form class="review" id="note-form" method="post" action="{esc(base)}/note">{hidden}'
            '<label>note <input name="text" required></label><label>author <input name="author" required></label>'
            '<button type="submit">add note</button></form></section>')


def case_page(case_id: str, document: str, links: Links, review_token: str | None = None) -> str:
    """The whole case page: the frame, the data block, (review mode) the forms, and ``case.js``."""
    body = (f'<h1>Case <code>{esc(case_id)}</code></h1><div id="case-root"></div>'
            '<noscript><p>This page is drawn by its script (packaged with the viewer); the case data '
            'is in the page as JSON.</p></noscript>'
            + (review_forms(case_id, review_token) if review_token else "") + data_block(document))
    return page(f"case {case_id}", body, links, scripts=("case.js",))
