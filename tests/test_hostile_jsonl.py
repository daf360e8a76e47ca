"""JSONL that other tools write: Unicode line separators inside strings, CRLF, pretty-printed
objects. Lines are split on ``\\n`` only, and every error names the right line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.formats.decode import jsonl_lines, parse_jsonl
from intake_support import events

# Characters str.splitlines() treats as line ends, but JSON keeps raw inside a string (or, for the
# control characters, rejects as a character of that line).
UNICODE_BREAKS = ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e"]


def line(question: str, text: str, benchmark: str = "bench") -> str:
    """One responses JSONL line, with non-ASCII characters kept raw (as most writers do)."""
    return json.dumps({"benchmark": benchmark, "question_id": question, "model": "m", "text": text},
                      ensure_ascii=False)


def test_unicode_line_separators_inside_strings_are_text_not_line_ends():
    texts = [f"a{sep}b" for sep in UNICODE_BREAKS]
    raw = "\n".join(line(f"q{i}", t) for i, t in enumerate(texts)) + "\n"
    parsed = parse(raw.encode(), "r.jsonl")
    assert [r.response for r in parsed.responses] == texts
    assert [r.where for r in parsed.responses] == [f"line {i + 1}" for i in range(len(texts))]


def test_vertical_tab_and_form_feed_in_a_string_are_reported_on_their_own_line():
    raw = "\n".join([line("q1", "ok"), line("q2", "ok"), line("q3", "ok")]).replace('"q2"', '"q\x0b2\x0c"')
    try:
        parse(raw.encode(), "r.jsonl")
    except FileRejected as exc:
        wheres = [p.where for p in exc.problems]
    assert wheres and all(w.startswith("line 2,") for w in wheres), wheres


def test_crlf_line_ends_are_accepted_and_numbered_like_lf():
    raw = "\r\n".join([line("q1", "x"), line("q2", "y\u2028z"), "{bad"]) + "\r\n"
    rows, problems = parse_jsonl(raw)
    assert [n for n, _ in rows] == [1, 2] and rows[1][1]["text"] == "y\u2028z"
    assert [p.where.split(",")[0] for p in problems] == ["line 3"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20), min_size=1,
                max_size=8), st.sampled_from(["\n", "\r\n"]), st.integers(min_value=0, max_value=7))
def test_any_text_round_trips_with_correct_line_numbers(texts, newline, bad_at):
    lines = [line(f"q{i}", t) for i, t in enumerate(texts)]
    bad_at = bad_at % len(lines)
    lines[bad_at] = '{"broken": '
    rows, problems = parse_jsonl(newline.join(lines) + newline)
    assert [n for n, _ in rows] == [i + 1 for i in range(len(lines)) if i != bad_at]
    assert [value["text"] for _, value in rows] == [t for i, t in enumerate(texts) if i != bad_at]
    assert [p.where.split(",")[0] for p in problems] == [f"line {bad_at + 1}"]


@given(st.text(max_size=60))
def test_jsonl_lines_splits_on_newline_only(text):
    pieces = jsonl_lines(text)
    assert all("\n" not in piece for piece in pieces)
    assert "\n".join(pieces).replace("\r\n", "\n") == text.replace("\r\n", "\n").removesuffix("\n") \
        or text.endswith("\r")


def test_a_pretty_printed_responses_jsonl_is_rejected_with_line_and_reason(home, run_cli, tmp_path):
    record = {"benchmark": "bench", "question_id": "q1", "model": "m", "text": "t"}
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(record, indent=2) + "\n")
    two = tmp_path / "two.jsonl"
    two.write_text((json.dumps(record, indent=2) + "\n") * 2)
    done = run_cli("ingest", one, two, home=home)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "StopIteration" not in done.stderr
    for name in ("one.jsonl", "two.jsonl"):
        assert f"rejected {name}" in done.stdout
        assert f"{name}: line 1, column 2: not valid JSON" in done.stdout
        assert f"{name}: line 1: a JSONL file holds one whole JSON object per line" in done.stdout
    rejected = events(ledger.open_ledger(home), "benchmark.rejected")
    assert [e.data["file"] for e in rejected] == ["one.jsonl", "two.jsonl"]


def test_a_one_line_jsonl_with_an_unpaired_surrogate_is_rejected_for_it_not_as_pretty_printed(
        home, run_cli, tmp_path):
    # one line each, whole values: only the surrogate escape is wrong, so only it is named
    audit = {"id": "x1", "tag": "clean", "difficulty": "easy", "description": "d", "context_input": "c",
             "model_output": "\ud800"}   # json.dumps writes the lone surrogate as its escape
    files = {"q.jsonl": '{"q": "\\ud800"}\n', "a.jsonl": json.dumps(audit) + "\n",
             "two.jsonl": '{"q": "\\ud800"}\n{"r": "\\udc00"}\n'}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="ascii")
    paths = [tmp_path / name for name in files]
    for command in ("validate", "ingest"):
        done = run_cli(command, *paths, home=home)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "pretty-printed" not in done.stdout and "several lines" not in done.stdout, done.stdout
        surrogate = "text holds an unpaired surrogate escape (\\ud800-\\udfff), which is not valid Unicode"
        assert f"q.jsonl: line 1: $.q: {surrogate}" in done.stdout, done.stdout
        assert f"a.jsonl: line 1: $.model_output: {surrogate}" in done.stdout, done.stdout
        assert f"two.jsonl: line 1: $.q: {surrogate}" in done.stdout, done.stdout
        assert f"two.jsonl: line 2: $.r: {surrogate}" in done.stdout, done.stdout
    rejected = events(ledger.open_ledger(home), "benchmark.rejected")
    assert sorted(e.data["file"] for e in rejected) == sorted(files)


def test_a_one_line_jsonl_that_is_not_json_is_not_called_pretty_printed(tmp_path):
    try:
        parse(b'{"benchmark": "b", "question_id": }\n', "r.jsonl")
    except FileRejected as exc:
        assert [p.where for p in exc.problems] == ["line 1, column 35"]
        assert "several lines" not in str(exc)
    else:
        raise AssertionError("a line that is not JSON was accepted")


def test_a_jsonl_file_with_a_bad_first_line_reports_every_line_by_number(home, run_cli, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(['{"benchmark": ', line("q2", "a\u2028b"), line("q3", "c\x85d"), "[1"]) + "\n",
                    encoding="utf-8")
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [row for row in done.stdout.splitlines() if row.startswith("    r.jsonl: ")]
    assert [e.split(": ")[1].split(",")[0] for e in errors] == ["line 1", "line 4"], done.stdout
