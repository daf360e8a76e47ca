"""Ingest's JSONL parsing takes one line at a time: neither format detection nor the row parse
holds a second, split copy of the whole file's text (#15 target 2, flat memory of ingest)."""

from __future__ import annotations

import json
import tracemalloc

from evalledger.stages.formats.decode import first_json_line, iter_jsonl_lines, jsonl_lines, parse_jsonl


def _big_jsonl(rows: int) -> str:
    """A JSONL text of many ~1 KB rows, with CRLF and blank lines among them."""
    line = json.dumps({"id": "q", "answer": "x" * 1000})
    return "".join(f"{line}\r\n" if i % 7 else f"{line}\n\n" for i in range(rows))


def _peak(fn, *args) -> int:
    """The peak of traced memory, in bytes, while fn runs."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_format_detection_reads_only_the_first_line():
    text = _big_jsonl(5000)  # ~5 MB
    assert first_json_line(text) == {"id": "q", "answer": "x" * 1000}
    # The old code split the whole text into a list of lines first: a peak of the file's size.
    assert _peak(first_json_line, text) < 200_000


def test_iterated_lines_match_the_split_lines():
    for text in ["", "\n", "a", "a\n", "a\r\n\r\nb", "a\n\n", "\r\n", "a\u2028b\nc\r"]:
        expected = text.split("\n")
        if expected and expected[-1] == "":
            expected.pop()
        expected = [x[:-1] if x.endswith("\r") else x for x in expected]
        assert list(iter_jsonl_lines(text)) == expected == jsonl_lines(text)


def test_row_parse_does_not_hold_a_split_copy_of_the_file():
    text = _big_jsonl(3000)
    rows, problems = parse_jsonl(text)
    assert not problems and len(rows) == 3000
    assert rows[7][0] == 9  # blank lines still count in line numbers
    # Parsed rows keep their strings (~1 KB each); a split copy of the text would add ~3 MB more.
    assert _peak(parse_jsonl, text) < len(text) * 1.6
