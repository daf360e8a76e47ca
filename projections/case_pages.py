"""Case pages: one section per case that says what a reader needs to act on it.

Each section shows the question, an excerpt of the response around the evidence the judge used,
each parsed value against its expected value, and the verdict with its reasons. Cases are laid
out per benchmark and model, ``CASES_PER_PAGE`` to a page, each section with its own anchor, so
100,000 cases make a few hundred pages rather than 100,000 files. Everything that came from a
file or a judge is escaped (``markdown.text``): a hostile id or response shows as text.
"""

from __future__ import annotations

import posixpath
from typing import Any, Callable, Iterable, Iterator

from evalledger.projections.benchmark_md import verdict_text
from evalledger.projections.markdown import fmt, provenance_lines, table, text
from evalledger.projections.results import group_label
from evalledger.projections.wording import count_of

PAGES = "cases"           # the case pages' folder inside a benchmark's folder
CASES_PER_PAGE = 500
EXCERPT_CHARS = 320       # the response excerpt shown per case, at most
CONTEXT_BEFORE = 100      # how much of it comes before the evidence
QUESTION_CHARS = 600
REASON_CHARS = 400        # one reason, one judge's reasoning, one evidence excerpt


def safe_id(case_id: str) -> str:
    """A case id as it may stand in an anchor or a command (ids are hex digests; anything else is
    made safe all the same)."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_") else "-" for ch in str(case_id))


def anchor(case_id: str) -> str:
    """The anchor of a case's section."""
    return "case-" + safe_id(case_id)


def clip(value: Any, limit: int) -> str:
    """``value`` as text, cut at ``limit`` characters with an ellipsis that says so."""
    words = " ".join(fmt(value).split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


def evidence_texts(case: dict, result: dict) -> list[str]:
    """What the verdict rests on, best first: the recorded excerpts, then the parsed values (or,
    for an audit, the claims the errors quote)."""
    found = [e["text"] for per in (result.get("excerpts") or {}).get("template", {}).values()
             for e in per if isinstance(e.get("text"), str)]
    found += [str(f["extracted"]) for f in result["fields"].values()
              if f.get("extracted") not in (None, "", True, False)]
    values = (case.get("parsed") or {}).get("values")
    if isinstance(values, dict):
        found += [str(v) for v in values.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    for slot in ("facts_errors", "logic_errors"):
        found += [str(e.get("claim")) for e in (result.get("audit") or {}).get(slot) or []
                  if isinstance(e, dict) and e.get("claim")]
    return [t for t in found if t.strip()]


def excerpt_window(response: str, evidence: list[str]) -> tuple[int, int]:
    """(start, end) of the response excerpt: around the first piece of evidence found in it
    (case-insensitive), else its beginning; at most EXCERPT_CHARS long, cut at spaces."""
    lowered = response.lower()
    at = next((i for i in (lowered.find(e.lower().strip()[:200]) for e in evidence) if i >= 0), 0)
    start = max(0, at - CONTEXT_BEFORE)
    end = min(len(response), start + EXCERPT_CHARS)
    start = max(0, end - EXCERPT_CHARS)
    if start > 0 and " " in response[start:at]:
        start = response.index(" ", start) + 1
    if end < len(response) and " " in response[at:end]:
        end = response.rindex(" ", at, end)
    return start, end


def response_lines(case: dict, result: dict) -> list[str]:
    """The response excerpt as a quote, with where it sits in the whole response."""
    response = case.get("response")
    if not isinstance(response, str) or not response.strip():
        return ["Response: none recorded for this case.", ""]
    total = case.get("response_chars") or len(response)
    start, end = excerpt_window(response, evidence_texts(case, result))
    cut_before, cut_after = start > 0, end < total
    body = ("…" if cut_before else "") + text(response[start:end], line_start=not cut_before) \
        + ("…" if cut_after else "")
    where = "the whole response" if not (cut_before or cut_after) else \
        f"characters {start + 1}-{end} of {total}, around the evidence"
    return [f"Response ({where}):", "", "> " + body, ""]


def check_text(primitive: Any) -> str:
    """A field's check as a reader needs it: its type and what it expects ("ContainsAny substrings:
    ['cox-1', ...]"), bounded."""
    if not isinstance(primitive, dict):
        return fmt(primitive)
    params = "; ".join(f"{k}: {v}" for k, v in sorted(primitive.items()) if k != "type" and v not in (None, [], {}))
    return clip(f"{primitive.get('type')} {params}".strip(), REASON_CHARS)


def field_rows(result: dict) -> list[list[Any]]:
    """One row per verified field: parsed value, expected value, check, result, the evidence."""
    excerpts = (result.get("excerpts") or {}).get("template", {})
    rows = []
    for name, f in result["fields"].items():
        check = check_text(f.get("primitive"))
        outcome = {True: "passed", False: "failed", None: "undecided"}.get(f.get("passed"), fmt(f.get("passed")))
        if f.get("auto_failed"):
            outcome += " (case auto-failed)"
        evidence = "; ".join(clip(e.get("text"), REASON_CHARS) for e in excerpts.get(name, [])) or "none"
        rows.append([name, clip(f.get("extracted"), REASON_CHARS), clip(f.get("expected"), REASON_CHARS),
                     check, outcome, evidence])
    return rows


def reason_lines(result: dict) -> list[str]:
    """Why the case got its verdict: the reasons, stage failures, abstention, the judge's reasoning."""
    lines = [f"- {text(clip(r, REASON_CHARS), line_start=True)}" for r in result["auto_fail_reasons"]]
    lines += [f"- {text(f['stage'])} failed: {text(clip(f['reason'], REASON_CHARS))}" for f in result["failures"]]
    if result.get("abstained"):
        lines.append("- abstained: " + text(clip((result.get("abstention") or {}).get("evidence"), REASON_CHARS)))
    reasoning = (result.get("reasoning") or {}).get("reasoning")
    if isinstance(reasoning, dict):
        lines += [f"- judge's reasoning on {text(k)}: {text(clip(v, REASON_CHARS))}" for k, v in sorted(reasoning.items())]
    elif reasoning:
        lines.append("- judge's reasoning: " + text(clip(reasoning, REASON_CHARS)))
    for name, t in result["traits"].items():
        lines.append(f"- trait {text(name)}: {text(t.get('score'))}"
                     + (f" ({text(clip(t['reasoning'], REASON_CHARS))})" if t.get("reasoning") else ""))
    return lines


def audit_lines(result: dict) -> list[str]:
    """An audit case: its credit score and zone against the expected ones, and the errors found."""
    a = result["audit"]
    credit = a.get("credit") or {}
    lines = [f"Credit score {fmt(credit.get('credit_score'))} ({fmt(credit.get('zone'))}), expected "
             f"{fmt(a.get('expected_credit_score'))} ({fmt(a.get('expected_zone'))}); tag {text(a.get('tag'))}.", ""]
    errors = [(phase, e) for phase in ("facts", "logic") for e in a.get(f"{phase}_errors") or [] if isinstance(e, dict)]
    lines += [f"- {phase} error ({text(e.get('severity'))}): {text(clip(e.get('detail'), REASON_CHARS))}; "
              f"claim: {text(clip(e.get('claim'), REASON_CHARS))}" for phase, e in errors]
    return lines + ([""] if errors else [])


def verdict_line(result: dict) -> str:
    """The verdict (or score) of any kind of case, in one line."""
    if result["kind"] == "reconstruction":
        m = result.get("calculated_metrics") or {}
        return (f"Verdict: status {text(result['status'])}; average claim score {fmt(m.get('average_score'))} over "
                f"{count_of(m.get('total_claims') or 0, 'scored claim')}.")
    if result["kind"] == "audit":
        return f"Verdict: status {text(result['status'])}."
    return f"Verdict: **{text(verdict_text(result))}**."


def case_section(case: dict, result: dict, document: str | None) -> list[str]:
    """One case's section: anchor, question, response excerpt, parsed against expected, verdict."""
    lines = [f'<a id="{anchor(result["case_id"])}"></a>', "",
             f"## Question {text(result['question_id'])}, {text(group_label(result))}", "",
             f"Case {text(result['case_id'])}; its events: `evalledger history {safe_id(result['case_id'])}`.", ""]
    question = (case.get("question") or {}).get("question")
    if question:
        lines += ["Question: " + text(clip(question, QUESTION_CHARS)), ""]
    if result["kind"] == "reconstruction":
        if document:
            lines += [f"Claims and evidence: [the document's page]({document}).", ""]
    else:
        lines += response_lines(case, result)
    if result["fields"]:
        lines += table(["field", "parsed", "expected", "check", "result", "evidence"], field_rows(result))
    if result["kind"] == "audit":
        lines += audit_lines(result)
    lines += [verdict_line(result), ""]
    reasons = reason_lines(result)
    return lines + (["Reasons:", "", *reasons, ""] if reasons else [])


def relative(path: str, page: str) -> str:
    """A link from ``page`` to ``path``, both relative to the benchmark folder."""
    return posixpath.relpath(path, posixpath.dirname(page))


def page_groups(results: list[dict]) -> dict[str, list[int]]:
    """The indexes of ``results`` per group (model, or model and profile), in case-id order."""
    groups: dict[str, list[int]] = {}
    for i in sorted(range(len(results)), key=lambda i: results[i]["case_id"]):
        groups.setdefault(group_label(results[i]), []).append(i)
    return groups


def page_names(base: str, count: int) -> list[str]:
    """The files of a group's ``count`` pages, relative to the benchmark folder:
    ``cases/<base>.md``, then ``cases/<base>/2.md`` ... (a file-safe name has no "/", so no two
    groups' pages can meet)."""
    return [f"{PAGES}/{base}.md" if k == 0 else f"{PAGES}/{base}/{k + 1}.md" for k in range(count)]


def render_case_pages(title: str, prov: dict[str, Any], cases: list[dict], results: list[dict],
                      group_names: dict[str, str], documents: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Every case page of one benchmark: (page path -> markdown, case id -> its link; both
    relative to the benchmark folder). ``group_names`` gives each group's file-safe name and
    ``documents`` each reconstruction case's document page (relative to the benchmark folder)."""
    by_id = {r["case_id"]: (c, r) for c, r in zip(cases, results)}
    pages = dict(iter_case_pages(title, prov, results, group_names, documents,
                                 lambda ids: [by_id[i] for i in ids]))
    return pages, case_links(results, group_names)


def page_plan(rows: list[dict], group_names: dict[str, str]) -> Iterator[tuple[str, list[str], int, list[str]]]:
    """(group, page names, page number - 1, case ids) for every case page, from ``rows`` (anything
    with ``case_id``, ``model`` and ``profile``: a result or a smaller row of it)."""
    for group, idx in page_groups(rows).items():
        chunks = [idx[k:k + CASES_PER_PAGE] for k in range(0, len(idx), CASES_PER_PAGE)]
        names = page_names(group_names[group], len(chunks))
        for number, chunk in enumerate(chunks):
            yield group, names, number, [rows[i]["case_id"] for i in chunk]


def case_links(rows: list[dict], group_names: dict[str, str]) -> dict[str, str]:
    """Case id -> the link to its section (page relative to the benchmark folder, and anchor)."""
    return {case_id: f"{names[number]}#{anchor(case_id)}"
            for _, names, number, ids in page_plan(rows, group_names) for case_id in ids}


def iter_case_pages(title: str, prov: dict[str, Any], rows: list[dict], group_names: dict[str, str],
                    documents: dict[str, str],
                    load: Callable[[list[str]], list[tuple[dict, dict]]]) -> Iterator[tuple[str, str]]:
    """Each case page of one benchmark as (path relative to the benchmark folder, markdown), one
    at a time: ``load`` gives the (case, result) pairs of one page's case ids, so only one page's
    cases are held at once."""
    return pages_of_plan(title, prov, page_plan(rows, group_names), documents, load)


def pages_of_plan(title: str, prov: dict[str, Any], plan: Iterable[tuple[str, list[str], int, list[str]]],
                  documents: dict[str, str],
                  load: Callable[[list[str]], list[tuple[dict, dict]]]) -> Iterator[tuple[str, str]]:
    """``iter_case_pages`` from a page plan (``page_plan``'s tuples, or a streamed report's)."""
    for group, names, number, ids in plan:
        name = names[number]
        lines = [f"# Cases: {text(title)}, {text(group)}", ""] + provenance_lines(prov)
        lines += [f"Page {number + 1} of {len(names)} ({count_of(len(ids), 'case')}, in case-id order). "
                  f"Back to [the benchmark's report]({relative('report.md', name)})."
                  + ("" if len(names) == 1 else " Pages: " + ", ".join(
                      f"[{k}]({relative(n, name)})" for k, n in enumerate(names, start=1)) + "."), ""]
        for case, result in load(ids):
            doc = documents.get(result["case_id"])
            lines += case_section(case, result, relative(doc, name) if doc else None)
        yield name, "\n".join(lines)


__all__ = ["render_case_pages", "iter_case_pages", "case_links", "CASES_PER_PAGE", "anchor", "excerpt_window"]
