"""Readers for the five input formats of FORMATS.md, recognised by content.

``parse(raw, filename)`` returns a ParsedFile or raises FileRejected listing every problem found
(each with the place and the reason). Nothing here touches the ledger, and nothing executes any
part of a file: Karenina template source is only read with ``ast``.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from evalledger.stages.formats.decode import (
    _JSON_SPACE,
    decode_text,
    first_json_line,
    iter_jsonl_lines,
    loads,
    parse_jsonl,
)
from evalledger.stages.formats.errors import FileRejected, Problem
from evalledger.stages.formats.model import FORMAT_NAMES, ParsedBenchmark, ParsedFile, ParsedResponse

__all__ = ["FORMAT_NAMES", "FileRejected", "ParsedBenchmark", "ParsedFile", "ParsedResponse", "Problem",
           "jsonl_kind", "line_order", "parse"]

_AUDIT_KEYS = {"tag", "model_output", "context_input"}
_RESPONSE_KEYS = {"question_id", "model", "text"}
_FORMAT_HELP = ("expected one of: a native benchmark ({\"format\": \"evalledger/benchmark@1\"}), responses "
                "({\"format\": \"evalledger/responses@1\"} or JSONL lines with benchmark, question_id, model, "
                "text), a reconstruction ({\"format\": \"evalledger/reconstruction@1\"}), VerifyFast audit JSONL "
                "(id, tag, difficulty, description, context_input, model_output), or a Karenina checkpoint "
                "(JSON-LD with \"@type\": \"DataFeed\")")


def parse(raw: bytes, filename: str = "input") -> ParsedFile:
    """Recognise and read one file's bytes. Raises FileRejected with every problem found."""
    text = decode_text(raw)
    stem = PurePath(filename).stem or "benchmark"
    try:
        doc = loads(text)
    except FileRejected as whole_error:
        first = first_json_line(text)
        if isinstance(first, dict) and text.lstrip().startswith("{") and "\n" in text.strip():
            return _read_lines(text, first, stem)
        if PurePath(filename).suffix.lower() == ".jsonl":
            # a .jsonl whose first line is bad: the first line that parses decides the format
            rows, _ = parse_jsonl(text)
            if not rows:
                _reject_pretty_printed(text)
            if isinstance(rows[0][1], dict):
                return _read_lines(text, rows[0][1], stem)
        raise whole_error
    if isinstance(doc, dict) and not _looks_like_line(doc):
        del text   # a large document is read whole: not the text too while it is checked
        return _read_document(doc)
    if isinstance(doc, dict):
        return _read_lines(text, doc, stem)
    raise FileRejected([Problem("$", f"the top level is {_kind(doc)}, not an object; {_FORMAT_HELP}")])


def _looks_like_line(doc: dict) -> bool:
    """A one-line JSONL file (an audit case or a response line) parses as a single object."""
    return "format" not in doc and "@type" not in doc and "doc_id" not in doc and (
        bool(_AUDIT_KEYS & doc.keys()) or "question_id" in doc)


def _read_document(doc: dict) -> ParsedFile:
    """A JSON document: native benchmark, responses, reconstruction or Karenina checkpoint."""
    from evalledger.stages.formats import native, reconstruction
    fmt = doc.get("format")
    if fmt == native.BENCHMARK_FORMAT:
        return native.read_benchmark(doc)
    if fmt == native.RESPONSES_FORMAT:
        return native.read_responses(doc)
    if fmt == "evalledger/reconstruction@1" or (fmt is None and {"doc_id", "original_claims"} <= doc.keys()):
        return reconstruction.read_reconstruction(doc)
    if doc.get("@type") == "DataFeed" or "dataFeedElement" in doc:
        from evalledger.stages.formats import karenina
        return karenina.read_checkpoint(doc)
    if fmt is not None:
        raise FileRejected([Problem("$.format", f"unknown format {fmt!r}; {_FORMAT_HELP}")])
    for key, expected in (("questions", native.BENCHMARK_FORMAT), ("responses", native.RESPONSES_FORMAT)):
        if key in doc:
            raise FileRejected([Problem("$.format", f'required key is missing: a file with "{key}" starts '
                                                    f'with "format": "{expected}"')])
    raise FileRejected([Problem("$", f"not a recognised format; {_FORMAT_HELP}")])


def _read_lines(text: str, first: dict, stem: str) -> ParsedFile:
    """A JSONL file: audit cases, response lines or reconstruction documents, decided by the
    first line's keys."""
    from evalledger.stages.formats import audit, native, reconstruction
    kind = jsonl_kind(first)
    if kind == "reconstruction":
        reader = lambda rows: reconstruction.read_reconstruction_lines(rows, stem)  # noqa: E731
    elif kind == "audit":
        reader = lambda rows: audit.read_audit(rows, stem)  # noqa: E731
    elif kind == "responses":
        reader = native.read_responses_lines
    else:   # said before every line is parsed: a 4 MB file of "{}" lines took 22 s to say it
        raise FileRejected([Problem("line 1", f"not a recognised JSONL format; {_FORMAT_HELP}")])
    rows, problems = parse_jsonl(text)
    if not rows:
        _reject_pretty_printed(text)
    try:
        parsed = reader(rows)
    except FileRejected as exc:
        problems.extend(exc.problems)
        parsed = None
    if problems or parsed is None:
        raise FileRejected(sorted(problems, key=line_order))
    return parsed


def jsonl_kind(first: dict) -> str | None:
    """The JSONL format a file whose first line is ``first`` is read as: ``reconstruction``,
    ``audit`` or ``responses``; None for none of them."""
    if {"doc_id", "original_claims"} <= first.keys():
        return "reconstruction"
    if _AUDIT_KEYS & first.keys():
        return "audit"
    if _RESPONSE_KEYS & first.keys():
        return "responses"
    return None


def _reject_pretty_printed(text: str) -> None:
    """Reject JSONL none of whose lines is a value that can be kept, naming the bad lines and why,
    instead of reading an empty file; else return.

    Only a file of several lines whose first bad line is not valid JSON gets the pretty-printed
    hint (with that first line alone): a line that parses but cannot be kept (an unpaired surrogate
    escape, a duplicate key) is one whole value, and saying it spreads over lines sent people
    looking for a formatting fault that was not there."""
    rows, problems = parse_jsonl(text)
    if rows:
        return
    if not problems:
        raise FileRejected([Problem("line 1", "no JSON value on any line")])
    first = problems[0]
    if not (first.reason.startswith("not valid JSON") and _several_lines(text)):
        raise FileRejected(sorted(problems, key=line_order))
    raise FileRejected([first, Problem(first.where.split(":")[0].split(",")[0],
                                       "a JSONL file holds one whole JSON object per line; this one "
                                       "spreads a value over several lines (pretty-printed JSON?)")])


def _several_lines(text: str) -> bool:
    """True when ``text`` has more than one non-blank line (as ``parse_jsonl`` splits it)."""
    return sum(1 for line in iter_jsonl_lines(text) if line.strip(_JSON_SPACE)) > 1


def line_order(problem: Problem) -> tuple[int, str]:
    """The order a JSONL file's problems are shown in: by line number, then place."""
    head = problem.where.split(":")[0].split(",")[0]
    number = head.removeprefix("line ").strip()
    return (int(number) if number.isdigit() else 0, problem.where)


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__)
