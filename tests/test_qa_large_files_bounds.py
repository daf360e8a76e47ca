"""What a large damaged file costs to reject, and how its errors read: the place of a value nested
thousands deep, errors quoting a huge value cut to a readable length, a large file of lines of no
known format refused without parsing every line, and the checks of a parsed document in memory
that does not grow with its size.
"""

from __future__ import annotations

import json
import random
import time
import tracemalloc

import pytest

from evalledger import ledger
from evalledger.stages import intake
from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.formats.decode import MAX_DEPTH, check_tree, loads, too_deep
from evalledger.stages.formats.errors import Problem
from evalledger.stages.intake_events import ERROR_TEXT_CHARS, MAX_ERRORS, error_list
from large_files_support import dropped, large, rng


def _random_nested(r: random.Random, depth: int) -> tuple[object, str]:
    """A value holding one chain of objects and lists ``depth`` deep among siblings (keys with
    escapes, strings holding brackets), and its JSON text (composed: json.dumps recurses)."""
    value: object = r.choice([1, "x", None])
    text = json.dumps(value)
    for _ in range(depth):
        if r.random() < 0.5:
            before = [r.randrange(9) for _ in range(r.randrange(3))]
            value = [*before, value, [1]]
            text = "[" + "".join(f"{b}, " for b in before) + text + ", [1]]"
        else:
            key = r.choice(["k", "a b", "\u00e9", 'q\\"uote', "1"])
            value = {"before": {"x": [1, "]}[{,"]}, key: value, "after": 2}
            text = '{"before": {"x": [1, "]}[{,"]}, ' + json.dumps(key) + ": " + text + ', "after": 2}'
    return value, text


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200, 5000])
def test_too_deep_names_a_place_check_tree_names(depth):
    r = rng(f"too deep {depth}")
    for _ in range(5):
        value, text = _random_nested(r, depth)
        assert too_deep(text) in check_tree(value)   # (the first in the text; check_tree names all)


def test_a_value_nested_ten_thousand_deep_is_named_at_its_place_in_a_document_and_a_line():
    deep = "[" * 10_000 + "]" * 10_000
    with pytest.raises(FileRejected) as caught:
        loads('{"questions": [{"id": "q1"}, {"id": ' + deep + "}]}")
    [problem] = caught.value.problems
    assert problem.where.startswith("$.questions[1].id[0][0]") and "nesting deeper" in problem.reason
    with pytest.raises(FileRejected) as caught:
        loads('{"model": ' + deep + "}", where="line 7: $")
    assert caught.value.problems[0].where.startswith("line 7: $.model[0]")


def test_error_texts_are_cut_and_counted():
    long = Problem("$.questions[3]." + "k" * 5_000_000, "unknown key (not part of this format)")
    errors = error_list([long] * (MAX_ERRORS + 5))
    assert len(errors) == MAX_ERRORS + 1 and errors[-1]["reason"] == "... and 5 more errors"
    assert errors[0]["where"] == "$.questions[3]." + "k" * (ERROR_TEXT_CHARS - 15) + "... (cut: 5000015 characters)"
    assert errors[0]["reason"] == long.reason
    assert error_list([Problem("$", "x" * ERROR_TEXT_CHARS)])[0]["reason"] == "x" * ERROR_TEXT_CHARS


def test_a_large_file_of_lines_in_no_known_format_is_refused_at_its_first_line_quickly(tmp_path):
    home = ledger.init_home(tmp_path / "home")
    raw = large(b"{}\n" * 700_000)            # 2 MB: every line parsed first took about 9 s
    start = time.perf_counter()
    with ledger.open_ledger(home) as led:
        result = intake.ingest_path(led, dropped(home, "objects.jsonl", raw), from_inbox=True)
    took = time.perf_counter() - start
    assert result.status == "rejected" and result.errors[0]["where"] == "line 1", result.line()
    assert "not a recognised JSONL format" in result.errors[0]["reason"]
    assert took < 4, f"{took:.1f} s to refuse a file by its first line"


def test_checking_a_large_parsed_document_holds_no_path_per_value():
    items = list(range(300_000))
    tracemalloc.start()
    try:
        assert check_tree({"questions": items}) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"{peak} bytes to check 300,000 numbers"   # a path a value: ~40 MB


def test_a_large_list_is_still_refused_with_its_place():
    with pytest.raises(FileRejected) as caught:
        parse(b"[" + b",".join([b"1"] * 100_000) + b"]", "numbers.json")
    assert caught.value.problems[0].where == "$" and "top level is a list" in caught.value.problems[0].reason
    bad = json.dumps({"format": "x", "n": [1] * 50_000 + [2**70]}).encode()
    with pytest.raises(FileRejected) as caught:
        parse(bad, "numbers.json")
    assert [p.where for p in caught.value.problems] == ["$.n[50000]"]
