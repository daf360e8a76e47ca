"""Raw-file limits: encoding, emptiness, JSON syntax, nesting, numbers, duplicate keys."""

from __future__ import annotations

import json

import pytest

from evalledger.stages.formats import FileRejected, decode, parse
from intake_support import BENCHMARK


def problems_of(raw: bytes) -> list[tuple[str, str]]:
    with pytest.raises(FileRejected) as info:
        parse(raw, "input.json")
    return [(p.where, p.reason) for p in info.value.problems]


def test_a_utf8_bom_is_accepted():
    parsed = parse(b"\xef\xbb\xbf" + json.dumps(BENCHMARK).encode(), "bom.json")
    assert parsed.benchmark.name == "chromosomes"


@pytest.mark.parametrize("raw", [b"", b"   \n\n", b"\xef\xbb\xbf"])
def test_empty_files_are_rejected(raw):
    assert problems_of(raw) == [("$", "the file is empty")]


def test_invalid_utf8_names_the_line_and_byte():
    raw = b'{"format": "evalledger/benchmark@1",\n"name": "caf\xe9"}'
    [(where, reason)] = problems_of(raw)
    assert where == "line 2, byte 49" and "not valid UTF-8" in reason


def test_truncated_json_names_line_and_column():
    text = json.dumps(BENCHMARK, indent=2)
    [(where, reason)] = problems_of(text[: len(text) // 2].encode())
    assert where.startswith("line ") and ", column " in where and reason.startswith("not valid JSON")


def test_nesting_beyond_the_limit_is_rejected_with_its_path():
    doc = {"format": "evalledger/benchmark@1", "name": "deep", "config": {}}
    node = doc["config"]
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    [(where, reason)] = problems_of(json.dumps(doc).encode())
    assert where.startswith("$.config.x.x") and "nesting deeper than 64 levels" in reason


def test_pathological_nesting_does_not_crash_the_parser():
    [(where, reason)] = problems_of(b"[" * 100_000 + b"]" * 100_000)
    assert "nesting deeper" in reason


@pytest.mark.parametrize("number, reason", [
    ("1e999", "too large to represent"),
    ("123456789012345678901234567890", "does not fit in 64 bits"),
    ("NaN", "NaN and Infinity are not allowed"),
    ("-Infinity", "NaN and Infinity are not allowed"),
])
def test_numbers_that_cannot_be_stored_are_rejected_with_their_path(number, reason):
    raw = json.dumps(BENCHMARK).replace('"ground_truth": 23', f'"ground_truth": {number}').encode()
    [(where, why)] = problems_of(raw)
    assert where == "$.questions[0].template.fields[0].ground_truth" and reason in why


@pytest.mark.parametrize("number, fits", [
    ("999999999999999999", True), ("-99999999999999999", True),          # 18 characters: the short path
    ("9223372036854775807", True), ("-9223372036854775808", True),       # the 64-bit limits
    ("9223372036854775808", False), ("-9223372036854775809", False),     # one past them
    ("-0", True), ("0", True),
])
def test_integers_are_kept_exactly_up_to_the_64_bit_limits(number, fits):
    value = decode.loads('{"n": %s}' % number) if fits else None
    if fits:
        assert value == {"n": int(number)}
    else:
        with pytest.raises(FileRejected) as err:
            decode.loads('{"n": %s}' % number)
        assert "does not fit in 64 bits" in str(err.value.problems)


def test_duplicate_keys_are_ambiguous_and_rejected():
    raw = json.dumps(BENCHMARK).replace('"name": "chromosomes"', '"name": "a", "name": "b"').encode()
    assert problems_of(raw) == [("$.name", "duplicate key in the same object")]


def test_unpaired_surrogates_are_rejected():
    raw = json.dumps(BENCHMARK).replace("How many", "\\ud800 How many").encode()
    [(where, reason)] = problems_of(raw)
    assert where == "$.questions[0].question" and "surrogate" in reason


def test_a_top_level_array_is_not_a_format():
    [(where, reason)] = problems_of(b"[1, 2]")
    assert where == "$" and "not an object" in reason
