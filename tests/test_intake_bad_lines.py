"""A large responses JSONL file of bad lines is rejected a line at a time (``stages/intake_bad_lines.py``):
the same errors as the file read whole (the first MAX_ERRORS in file order, then the true count of
the rest), in memory that does not grow with the file, and nothing but the rejection appended.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from evalledger import ledger
from evalledger.stages import intake
from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.formats.errors import Problem
from evalledger.stages.intake_bad_lines import line_problems
from evalledger.stages.intake_events import MAX_ERRORS, FirstProblems, error_list
from evalledger.testing.peak_rss import peak_rss_mb
from intake_support import write_sums_benchmark
from large_files_support import CLI, cli, dropped, event_counts, rng

# One kind of line each, ``i`` its number: most are bad in a different way; some are good lines.
LINES = [
    lambda i: json.dumps({"benchmark": "b", "question_id": i, "model": "m", "text": "t"}),        # wrong type
    lambda i: json.dumps({"benchmark": "b", "question_id": f"q{i}", "model": "m"}),                # missing field
    lambda i: '{"benchmark": "b", "question_id": "q%d", "model": "m", "text": "cut' % i,           # bad JSON
    lambda i: json.dumps({"benchmark": "b", "question_id": "q", "model": 3, "text": 4, "x": 5}),   # three at once
    lambda i: '{"benchmark": "b", "question_id": "q", "question_id": "q", "model": "m", "text": "t"}',
    lambda i: json.dumps({"benchmark": "other", "question_id": f"q{i}", "model": "m", "text": "t"}),
    lambda i: json.dumps({"benchmark": "b", "question_id": f"q{i % 7}", "model": "m", "text": "t\u2028é"},
                         ensure_ascii=False),                                                       # good (or a repeat)
    lambda i: '{"benchmark": "b", "question_id": "q", "model": "m", "text": 1e999, "n": 99999999999999999999}',
    lambda i: '{"benchmark": "b", "model": ' + "[" * 70 + "]" * 70 + "}",                           # nested too deep
    lambda i: '{"benchmark": "b", "question_id": "q\\ud800", "model": "m", "text": "t"}',          # lone surrogate
    lambda i: "[1, 2]", lambda i: "not json", lambda i: "", lambda i: " \t", lambda i: "\u00a0",
]
FIRST = [LINES[0], LINES[1], LINES[3], LINES[5], LINES[6],                # a response line: read line by line
         LINES[2], lambda i: '{"id": "a", "tag": "t"}', lambda i: "{}"]  # others: left to the whole read


def _generated(r: random.Random, lines: int) -> tuple[bytes, bool]:
    """A JSONL file: a first line of ``FIRST``, then ``lines`` lines of ``LINES`` drawn at random,
    with CRLF or LF ends, sometimes a BOM, a last line without its end, or a byte not UTF-8; and
    whether it is UTF-8 read as response lines (its first line one, a line with text after it)."""
    end = r.choice(["\n", "\r\n"])
    first = r.randrange(len(FIRST))
    rows = [FIRST[first](0), *(r.choice(LINES)(i) for i in range(1, lines))]
    raw = ("\ufeff" * (r.random() < 0.2) + end.join(rows) + end * (r.random() < 0.7)).encode()
    if r.random() < 0.1:
        at = r.randrange(len(raw))
        return raw[:at] + b"\xff" + raw[at:], False
    return raw, first < 5 and any(row.strip() for row in rows[1:])


def _whole(raw: bytes) -> list[Problem] | None:
    """The problems ``formats.parse`` rejects ``raw`` with, read whole; None when it reads it."""
    try:
        parse(raw, "generated.jsonl")
    except FileRejected as exc:
        return exc.problems
    return None


def test_first_problems_keeps_the_first_ones_in_order_and_counts_the_rest():
    problems = (Problem(f"line {n}", f"reason {n}") for n in range(1, MAX_ERRORS + 2501))   # a generator
    errors = error_list(problems)
    assert [e["where"] for e in errors[:MAX_ERRORS]] == [f"line {n}" for n in range(1, MAX_ERRORS + 1)]
    assert errors[MAX_ERRORS:] == [{"where": "$", "reason": "... and 2500 more errors"}]
    first = FirstProblems(Problem(f"line {n}", "r") for n in range(MAX_ERRORS + 7))
    assert len(first.kept) == MAX_ERRORS and first.more == 7 and len(first) == MAX_ERRORS + 7
    first.extend([Problem("line 0", "r")] * 3)
    assert first.more == 10 and error_list(first)[-1]["reason"] == "... and 10 more errors"
    assert error_list(FirstProblems([Problem("$", "x")])) == [{"where": "$", "reason": "x"}]


def test_generated_files_get_the_problems_of_the_whole_read_or_are_left_to_it(tmp_path):
    r = rng("bad lines as read whole")
    told = 0
    for n in range(150):
        raw, response_lines = _generated(r, r.randrange(2, 60))
        path = tmp_path / f"{n}.jsonl"
        path.write_bytes(raw)
        found, whole = line_problems(path, tmp_path), _whole(raw)
        if found is None:   # left to the whole read: not response lines, or no bad line
            assert not response_lines or whole is None, raw
            continue
        told += 1
        assert whole is not None, raw
        expected = FirstProblems(whole)
        assert (found.kept, found.more) == (expected.kept, expected.more), raw
    assert told > 50, f"only {told} of 150 files told line by line"


def test_past_a_thousand_errors_the_rejection_is_the_whole_reads(tmp_path):
    rows = [LINES[i % 5](i) for i in range(1, MAX_ERRORS * 2)]
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(rows) + "\n")
    got = {}
    for label, spool_above in (("lines", 0), ("whole", 1 << 40), ("inbox", 0)):
        home = ledger.init_home(tmp_path / label)
        with ledger.open_ledger(home) as led:
            result = intake.ingest_path(led, dropped(home, path.name, path.read_bytes()) if label == "inbox" else path,
                                        from_inbox=label == "inbox", spool_above=spool_above)
            got[label] = result.errors
    assert got["lines"] == got["whole"] == got["inbox"] and len(got["lines"]) == MAX_ERRORS + 1
    whole = _whole(path.read_bytes())
    assert whole is not None and got["lines"][-1]["reason"] == f"... and {len(whole) - MAX_ERRORS} more errors"
    note = (tmp_path / "inbox" / "rejected" / "many.jsonl.error.txt").read_text().splitlines()
    assert note[1:] == [f"many.jsonl: {e['where']}: {e['reason']}" for e in got["inbox"]]


def _all_bad(path: Path, size: int) -> int:
    """A responses JSONL file of about ``size`` bytes, every line bad (a type; a missing key and an
    unknown one; its JSON), each padded; how many errors it has."""
    pad = "p" * 1000
    kinds = [lambda i: json.dumps({"benchmark": "b", "question_id": i, "model": "m", "text": pad}),
             lambda i: json.dumps({"benchmark": "b", "question_id": f"q{i}", "model": "m", "note": pad}),
             lambda i: '{"benchmark": "b", "question_id": "q%d", "model": "m", "text": "%s' % (i, pad)]
    lines = size // 1040
    path.write_text("".join(kinds[i % 3](i + 1) + "\n" for i in range(lines)))
    return lines + len(range(1, lines, 3))


def _home(folder: Path) -> Path:
    """A new home in ``folder`` holding the benchmark ``b`` of three questions."""
    home = ledger.init_home(folder)
    with ledger.open_ledger(home) as led:
        assert intake.ingest_path(led, write_sums_benchmark(folder.parent / "b.json", "b", 3)).ok
    return home


def test_a_large_all_bad_responses_file_is_rejected_by_the_cli_in_flat_memory(tmp_path):
    home = _home(tmp_path / "home")
    before = event_counts(home)
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    errors = _all_bad(small, 1_500_000)
    _all_bad(large, 6_000_000)

    shown = cli(home, "ingest", small)
    assert shown.returncode == 1, shown.stdout
    out = shown.stdout + shown.stderr
    assert "small.jsonl: line 1: $.question_id: Input should be a valid string (got 1)" in out, out[-3000:]
    assert "small.jsonl: line 2: $.text: required key is missing" in out
    assert "small.jsonl: line 3, column " in out and "not valid JSON: Unterminated string" in out
    assert f"... and {errors - MAX_ERRORS} more errors" in out
    assert event_counts(home) - before == {"benchmark.rejected": 1}
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.verify().ok

    peaks = {}
    for path in (small, large):
        copy = _home(tmp_path / f"home-{path.stem}")
        code, peaks[path.stem], stderr = peak_rss_mb([*CLI, "--home", str(copy), "ingest", str(path)])
        assert code == 1 and "Traceback" not in stderr, stderr
    # read whole, an 8 MB file peaked 21 MB over a 2 MB one (70 MB against 49 MB)
    assert peaks["large"] <= peaks["small"] + 8, peaks

    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"benchmark": "b", "question_id": f"q{i}", "model": "m", "text": "1"})
                               + "\n" for i in range(3)))
    taken = cli(home, "ingest", answers)
    assert taken.returncode == 0 and "3 new cases" in taken.stdout, taken.stdout + taken.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.verify().ok
