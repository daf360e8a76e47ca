"""The case page: question, response with its excerpts highlighted, ground truth, the stage timeline
with every judge call, fields, traits, claims, audit, notes and overrides, and (review mode) forms.

Built from ``projections.history.case_history`` (the case's events in ledger order, straight from
the ledger) and the case's result from the read models. Everything from the benchmark or a judge is
escaped; excerpts are located in the response by plain string search, never by markup they carry.
"""

from __future__ import annotations

from typing import Any

from evalledger.cli.viewer.html import Links, as_json, esc, page, table, verdict_badge

SUMMARY_KEYS = ("attribute", "similarity", "attempt", "threshold", "field", "trait", "mode", "score", "claim_id",
                "verdict", "auto_failed", "risk", "high", "low", "credit_score", "zone", "stage", "reason", "author")


def call_mode(call: dict) -> str:
    """How a judge call was answered: replayed (from a recorded ledger), cached (a recorded answer
    reused), or live."""
    if call.get("backend") == "replay":
        return "replayed"
    return "cached" if call.get("source_event") else "live"


def _spans(text: str, quotes: list[tuple[str, str, Any]]) -> list[tuple[int, int, str, str]]:
    """Non-overlapping (start, end, css, title) spans of ``quotes`` found in ``text`` (first match,
    exact then case-insensitive); quotes not found are left out."""
    lowered = text.lower()
    found: list[tuple[int, int, str, str]] = []
    for quote, css, similarity in quotes:
        if not quote or not quote.strip():
            continue
        start = text.find(quote)
        if start < 0:
            start = lowered.find(quote.lower())
        if start < 0:
            continue
        end = start + len(quote)
        if all(end <= s or start >= e for s, e, _, _ in found):
            found.append((start, end, css, f"similarity {similarity}"))
    return sorted(found)


def highlight(text: str, quotes: list[tuple[str, str, Any]]) -> str:
    """``text`` escaped, with each quote found in it wrapped in ``<mark>`` (class and similarity)."""
    out, at = [], 0
    for start, end, css, title in _spans(text, quotes):
        out.append(esc(text[at:start]))
        out.append(f'<mark class="{esc(css)}" title="{esc(title)}">{esc(text[start:end])}</mark>')
        at = end
    out.append(esc(text[at:]))
    return "".join(out)


def _quotes(events: list[dict]) -> list[tuple[str, str, Any]]:
    quotes = []
    for row in events:
        data = row["data"] if isinstance(row["data"], dict) else {}
        if row["type"] == "excerpt.extracted":
            quotes.append((str(data.get("text") or ""), "excerpt", data.get("similarity")))
        elif row["type"] in ("excerpt.retried", "excerpt.missing"):
            quotes += [(str(f.get("text") or ""), "failed-quote", f.get("similarity"))
                       for f in data.get("failed") or [] if isinstance(f, dict)]
    return quotes


def _event_body(row: dict) -> str:
    """What one event says: a summary line, its quotes, then the whole payload (collapsed)."""
    data = row["data"] if isinstance(row["data"], dict) else {}
    summary = " · ".join(f"{esc(k)} {esc(data[k])}" for k in SUMMARY_KEYS if k in data)
    parts = [f'<p class="summary">{summary}</p>' if summary else ""]
    if row["type"] == "excerpt.extracted":
        parts.append(f'<p>quote <mark class="excerpt">{esc(data.get("text"))}</mark> similarity '
                     f'{esc(data.get("similarity"))}</p>')
    if row["type"] in ("excerpt.retried", "excerpt.missing"):
        parts += [f'<p class="failed">failed quote <mark class="failed-quote">{esc(f.get("text"))}</mark> similarity '
                  f'{esc(f.get("similarity"))} (threshold {esc(data.get("threshold"))})</p>'
                  for f in data.get("failed") or [] if isinstance(f, dict)]
    if row["type"] == "note.added":
        parts.append(f'<blockquote class="note">{esc(data.get("text"))}</blockquote>')
    parts.append(f'<details><summary>payload</summary><pre>{as_json(data)}</pre></details>')
    return "".join(parts)


def _call_block(call: dict, full: dict | None) -> str:
    """One judge call: role, backend, model, mode, tokens, latency; request, feedback and reply."""
    data = (full or {}).get("data") or {}
    request = data.get("request") or {}
    payload = request.get("payload") if isinstance(request, dict) else None
    feedback = payload.get("feedback") if isinstance(payload, dict) else None
    fb = f'<p class="feedback">retry feedback: {as_json(feedback)}</p>' if feedback else ""
    return (f'<div class="call" id="seq-{esc(call["seq"])}"><p>judge call <a href="#seq-{esc(call["seq"])}">seq '
            f'{esc(call["seq"])}</a>: {esc(call["role"])} · {esc(call["backend"])}/{esc(call["model"])} · attempt '
            f'{esc(call["attempt"])} · {esc(call_mode(data))} · tokens {esc(call["tokens"])} · latency '
            f'{esc(data.get("latency_ms"))} ms{" · error " + esc(call["error"]) if call.get("error") else ""}</p>{fb}'
            f'<details><summary>request</summary><pre>{as_json(request)}</pre></details>'
            f'<details><summary>reply</summary><pre>{as_json(data.get("reply"))}</pre>'
            + (f'<pre>{esc(data.get("raw_reply"))}</pre>' if data.get("raw_reply") else "")
            + "</details></div>")


def timeline(history: dict, links: Links) -> str:
    """Every non-call event in ledger order, each with the judge calls behind it."""
    calls = {row["seq"]: row for row in history["events"] if row["type"] == "judge.called"}
    items = []
    for row in history["events"]:
        if row["type"] == "judge.called":
            continue
        cause = (f' · caused by <a href="{esc(links.case(history["case_id"], row["causation_seq"]))}">seq '
                 f'{esc(row["causation_seq"])}</a>' if row.get("causation_seq") else "")
        behind = "".join(_call_block(c, calls.get(c["seq"])) for c in row.get("judge_calls", []))
        if row.get("computed"):
            behind += '<p class="computed">computed by code, no judge call</p>'
        items.append(f'<li class="event {esc(row["type"].replace(".", "-"))}" id="seq-{esc(row["seq"])}">'
                     f'<p class="event-head"><a href="#seq-{esc(row["seq"])}">seq {esc(row["seq"])}</a> '
                     f'<b>{esc(row["type"])}</b> · {esc(row.get("stage") or "-")} · {esc(row.get("recorded_at"))} · '
                     f'<code>{esc(row["hash"][:12])}</code>{cause}</p>{_event_body(row)}{behind}</li>')
    return f'<ol class="timeline">{"".join(items)}</ol>'


def _result_sections(result: dict | None) -> str:
    if result is None:
        return '<p>No read model for this case yet.</p>'
    out = []
    if result["fields"]:
        out.append("<h2>Fields</h2>" + table(
            ["field", "primitive", "expected", "extracted", "verdict"],
            [[esc(n), as_json(f.get("primitive")), as_json(f.get("expected")), as_json(f.get("extracted")),
              esc({True: "pass", False: "fail"}.get(f.get("passed"), "undecided"))]
             for n, f in result["fields"].items()], "fields"))
    if result["risk"]:
        out.append("<h2>Risk</h2>" + table(["attribute", "assessment"],
                                           [[esc(a), f"<pre>{as_json(r)}</pre>"] for a, r in result["risk"].items()]))
    if result["reasoning"]:
        out.append(f'<h2>Reasoning</h2><pre class="reasoning">{as_json(result["reasoning"])}</pre>')
    if result["traits"] or result["traits_auto_failed"]:
        out.append("<h2>Rubric traits</h2>" + table(
            ["trait", "mode", "score", "reasoning"],
            [[esc(n), esc(t.get("mode")), esc(t.get("score")), esc(t.get("reasoning"))]
             for n, t in result["traits"].items()]
            + [[esc(n), "", "auto-failed", ""] for n in result["traits_auto_failed"]], "traits"))
    if result.get("claims"):
        out.append("<h2>Reconstruction claims</h2>" + table(
            ["claim", "type", "score", "justification", "evidence"],
            [[esc(c.get("claim_id")), esc(c.get("claim_type")), esc(c.get("score")), esc(c.get("justification")),
              esc(", ".join(map(str, c.get("evidence_refs") or [])))] for c in result["claims"]], "claims"))
    if result.get("audit"):
        audit = result["audit"]
        credit = audit.get("credit") or {}
        errors = [e for key in ("facts_errors", "logic_errors") for e in audit.get(key) or []]
        out.append(f'<h2>Audit</h2><p>credit score {esc(credit.get("credit_score"))} zone {esc(credit.get("zone"))} '
                   f'(expected {esc(audit.get("expected_credit_score"))} {esc(audit.get("expected_zone"))})</p>'
                   + table(["severity", "level", "detail"],
                           [[esc(e.get("severity")), esc(e.get("level")), esc(e.get("detail"))]
                            for e in sorted(errors, key=lambda e: str(e.get("severity")))], "errors"))
    if result["failures"]:
        out.append("<h2>Failed stages</h2>" + table(["stage", "reason"], [[esc(f["stage"]), esc(f["reason"])]
                                                                        for f in result["failures"]]))
    return "".join(out)


def _reviews(history: dict, result: dict | None, links: Links) -> str:
    rows = []
    for row in history["events"]:
        data = row["data"] if isinstance(row["data"], dict) else {}
        if row["type"] in ("note.added", "verdict.overridden"):
            what = (f'override → {verdict_badge(data.get("verdict"))} ({esc(data.get("reason"))})'
                    if row["type"] == "verdict.overridden" else f'note: {esc(data.get("text"))}')
            rows.append([f'<a href="{esc(links.case(history["case_id"], row["seq"]))}">seq {esc(row["seq"])}</a>',
                         esc(data.get("author") or "anonymous"), what])
    original = verdict_badge((result or {}).get("original_verdict"))
    return (f'<h2>Notes and overrides</h2><p>original verdict {original} · verdict in force '
            f'{verdict_badge((result or {}).get("verdict"))}</p>' + table(["event", "author", "what"], rows, "reviews"))


def review_forms(case_id: str, token: str, links: Links) -> str:
    """The override and note forms (review mode only); both post the launch token."""
    from urllib.parse import quote
    base = f"/case/{quote(case_id, safe='')}"
    hidden = f'<input type="hidden" name="token" value="{esc(token)}">'
    return (f'<h2>Review</h2><form class="review" id="override-form" method="post" action="{esc(base)}/override">'
            f'{hidden}<label>verdict <select name="verdict"><option>pass</option><option>fail</option></select>'
            '</label><label>reason <input name="reason" required></label>'
            '<label>author <input name="author" required></label><button type="submit">override</button></form>'
            f'<form class="review" id="note-form" method="post" action="{esc(base)}/note">{hidden}'
            '<label>note <input name="text" required></label><label>author <input name="author" required></label>'
            '<button type="submit">add note</button></form>')


def _truth_table(question: dict) -> str:
    """The template's fields with their ground truth and primitive (empty for other kinds)."""
    template = question.get("template") if isinstance(question.get("template"), dict) else {}
    fields = [f for f in template.get("fields") or [] if isinstance(f, dict)]
    if not fields:
        return ""
    return table(["field", "type", "ground truth", "verified with"],
                 [[esc(f.get("name")), esc(f.get("type")), as_json(f.get("ground_truth")),
                   as_json(f.get("verify_with"))] for f in fields], "truth")


def case_page(history: dict, result: dict | None, links: Links, review_token: str | None = None) -> str:
    """The whole case page."""
    opened = next((r for r in history["events"] if r["type"] == "case.opened"), None)
    data = opened["data"] if opened and isinstance(opened["data"], dict) else {}
    question = data.get("question") if isinstance(data.get("question"), dict) else {}
    response = data.get("response")
    response_html = (highlight(response, _quotes(history["events"])) if isinstance(response, str)
                     else as_json(response))
    truth = {k: v for k, v in question.items() if k not in ("question", "id")}
    status = (result or {}).get("status")
    body = (f'<h1>Case <code>{esc(history["case_id"])}</code></h1>'
            f'<p class="meta">benchmark {esc(data.get("benchmark_name") or history["benchmark"])} · model '
            f'{esc(history["model"])} · question {esc(history["question_id"])} · kind {esc(history["kind"])} · '
            f'status {esc(status)} · verdict {verdict_badge((result or {}).get("verdict"))}</p>'
            f'<h2>Question</h2><pre class="question">{esc(question.get("question"))}</pre>'
            f'<h2>Response</h2><pre class="response" id="response">{response_html}</pre>'
            f'<h2>Ground truth</h2>{_truth_table(question)}<details><summary>the whole question (template, rubric, '
            f'expected values)</summary><pre class="truth">{as_json(truth)}</pre></details>'
            + _result_sections(result) + _reviews(history, result, links)
            + (review_forms(history["case_id"], review_token, links) if review_token else "")
            + f'<h2>Stage timeline</h2>{timeline(history, links)}')
    return page(f"case {history['case_id']}", body, links)
