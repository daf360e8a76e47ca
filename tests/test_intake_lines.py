"""A responses JSONL file ingested after its benchmark is read line by line from its spool
(``stages/intake_lines.py``): the same events as the file read whole, in bounded memory; a bad
line gives the whole-file error (file, line, reason) and opens nothing."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages import intake_events as ev
from evalledger.stages.intake import ingest_path
from evalledger.stages.intake_lines import read_response_lines
from evalledger.stages.intake_read import SPOOL_ABOVE
from intake_support import write_sums_benchmark

QUESTIONS = 40
WHOLE = 1 << 40            # a spool_above no file reaches: the file is read whole


def _write_benchmark(path: Path, questions: int = QUESTIONS) -> Path:
    """A native benchmark of ``questions`` questions and no responses."""
    return write_sums_benchmark(path, "lines", questions)


def _response(i: int, padding: int, questions: int = QUESTIONS) -> dict:
    return {"benchmark": "lines", "question_id": f"q{i % questions}", "model": f"m{i // questions}",
            "text": f"It is {i % questions + 1}. é" + "x" * padding}


def _write_responses(path: Path, count: int, padding: int = 0, crlf: bool = False,
                     questions: int = QUESTIONS) -> Path:
    """A responses JSONL file of ``count`` lines, each text padded by ``padding`` characters."""
    end = "\r\n" if crlf else "\n"
    path.write_text("\n" + "".join(json.dumps(_response(i, padding, questions), ensure_ascii=False) + end
                                   for i in range(count)), encoding="utf-8", newline="")
    return path


def _events(home: Path) -> list[tuple]:
    """Every event's seq, stream, type, data and meta but its time, in order (hashes cover the time)."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [(e.seq, e.stream, e.type, e.data, {k: v for k, v in e.meta.items() if k != "recorded_at"})
                for e in led.read()]


def _ingest(tmp_path: Path, label: str, responses: Path, spool_above: int, questions: int = QUESTIONS) -> Path:
    home = ledger.init_home(tmp_path / label)
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, _write_benchmark(tmp_path / "b.benchmark.json", questions), spool_above=WHOLE).ok
        result = ingest_path(led, responses, spool_above=spool_above)
        assert result.status == "accepted", result
    return home


@pytest.mark.parametrize("count, padding, crlf, questions", [
    (30, 0, False, QUESTIONS), (3000, 400, True, QUESTIONS), (ev.PART_CASES + 40, 120, False, QUESTIONS),
    (5000, 10, False, 2500)])     # the last: a benchmark registered in 3 parts, its questions found in each
def test_streamed_and_whole_file_ingest_give_the_same_events(tmp_path, count, padding, crlf, questions):
    responses = _write_responses(tmp_path / "r.responses.jsonl", count, padding, crlf, questions)
    streamed = _ingest(tmp_path, "streamed", responses, spool_above=0, questions=questions)
    whole = _ingest(tmp_path, "whole", responses, spool_above=WHOLE, questions=questions)
    events = _events(streamed)
    assert events == _events(whole)
    assert sum(1 for e in events if e[2] == "case.opened") == count


def test_a_large_responses_file_is_streamed_by_the_cli(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", _write_benchmark(tmp_path / "b.benchmark.json"), home=home).returncode == 0
    responses = _write_responses(tmp_path / "r.responses.jsonl", 6000, padding=200)
    assert responses.stat().st_size > SPOOL_ABOVE
    done = run_cli("ingest", responses, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "accepted" in done.stdout
    with ledger.open_ledger(home, readonly=True) as led:
        assert sum(1 for _ in led.read(types=["case.opened"])) == 6000
        assert led.verify().ok
    assert _events(home)[2:] == _events(_ingest(tmp_path, "whole", responses, spool_above=WHOLE))[2:]


@pytest.mark.parametrize("bad, reason", [('{"benchmark": "lines", "question_id": ', "line 2501"),
                                         ('{"benchmark": "lines", "question_id": "q1", "model": "m0", "text": 5}',
                                          "line 2501: $.text"),
                                         ('{"benchmark": "lines", "question_id": "q999", "model": "z", "text": "t"}',
                                          "line 2501: $.question_id")])
def test_a_bad_line_mid_file_names_file_line_and_reason_and_opens_nothing(tmp_path, run_cli, bad, reason):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", _write_benchmark(tmp_path / "b.benchmark.json"), home=home).returncode == 0
    path = _write_responses(tmp_path / "bad.responses.jsonl", 5000, padding=300)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[2500] = bad                       # line 2501 of the file (its first line is blank)
    path.write_text("\n".join(lines), encoding="utf-8")
    assert path.stat().st_size > SPOOL_ABOVE
    before = _events(home)
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "bad.responses.jsonl" in out and reason in out, out
    after = _events(home)
    assert after[:len(before)] == before
    assert [e[2] for e in after[len(before):]] == ["benchmark.rejected"]     # the rejection, nothing opened
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.verify().ok


@pytest.mark.parametrize("unknown", ["every", "last"])
def test_responses_naming_unknown_questions_are_rejected_as_when_read_whole(tmp_path, unknown):
    """A large responses file naming questions its benchmark lacks was read whole to find its errors
    (a file of unknown ids held every line); found a line at a time now, with the same rejection:
    the first 1,000 errors and how many more, byte for byte the whole read's."""
    path = _write_responses(tmp_path / "unknown.responses.jsonl", 3000, padding=400)
    lines = path.read_text(encoding="utf-8").split("\n")
    for n in range(1, len(lines)) if unknown == "every" else [len(lines) - 2]:
        if lines[n]:
            lines[n] = lines[n].replace('"question_id": "q', '"question_id": "unknown-q')
    path.write_text("\n".join(lines), encoding="utf-8")
    assert path.stat().st_size > SPOOL_ABOVE
    homes = []
    for label, spool_above in (("whole", WHOLE), ("lines", SPOOL_ABOVE)):
        home = ledger.init_home(tmp_path / label)
        with ledger.open_ledger(home) as led:
            assert ingest_path(led, _write_benchmark(tmp_path / "b.benchmark.json"), spool_above=WHOLE).ok
            result = ingest_path(led, path, spool_above=spool_above)
        assert result.status == "rejected" and "unknown question id" in result.errors[0]["reason"]
        homes.append(_events(home))
    assert homes[0] == homes[1]
    errors = homes[1][-1][3]["errors"]
    assert homes[1][-1][2] == "benchmark.rejected"
    assert len(errors) == (1001 if unknown == "every" else 1)
    if unknown == "every":
        assert errors[-1]["reason"] == "... and 2000 more errors"


def test_finding_unknown_question_ids_does_not_hold_the_file(tmp_path):
    """12,000 lines naming unknown questions (5.9 MB): the whole read held ~34 MB (every line
    parsed) to reject them; a line at a time, about half the file's size at most."""
    path = _write_responses(tmp_path / "unknown.responses.jsonl", 12_000, padding=400)
    path.write_text(path.read_text(encoding="utf-8").replace('"question_id": "q', '"question_id": "unknown-q'),
                    encoding="utf-8")
    home = ledger.init_home(tmp_path / "h")
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, _write_benchmark(tmp_path / "b.benchmark.json"), spool_above=WHOLE).ok
        tracemalloc.start()
        try:
            result = ingest_path(led, path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert result.status == "rejected" and result.errors[-1]["reason"] == "... and 11000 more errors"
    assert peak < path.stat().st_size * 0.75, (peak, path.stat().st_size)


@pytest.mark.parametrize("registered", [True, False])
def test_responses_over_the_size_limit_are_rejected_as_when_read_whole(tmp_path, registered):
    """6,000 responses of 420 characters against a limit of 400 (3 MB): rejected with the
    whole read's errors (the first 1,000 and a count), found a line at a time, whether or not the
    benchmark is registered (the limit is checked first either way)."""
    path = _write_responses(tmp_path / "long.responses.jsonl", 6000, padding=420)
    assert path.stat().st_size > SPOOL_ABOVE
    outcomes = []
    for label, spool_above in (("whole", WHOLE), ("lines", SPOOL_ABOVE)):
        home = ledger.init_home(tmp_path / label)
        with ledger.open_ledger(home) as led:
            if registered:
                assert ingest_path(led, _write_benchmark(tmp_path / "b.benchmark.json"), spool_above=WHOLE).ok
            tracemalloc.start()
            try:
                result = ingest_path(led, path, spool_above=spool_above, max_response_chars=400)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert result.status == "rejected"
        outcomes.append(_events(home))
        if label == "lines":   # read whole, the file's lines were all held (~5.7 times its size)
            assert peak < path.stat().st_size * 1.5, (peak, path.stat().st_size)
    assert outcomes[0] == outcomes[1]
    errors = outcomes[1][-1][3]["errors"]
    assert errors[0]["where"] == "line 2" and "over the limit of 400 per response" in errors[0]["reason"]
    assert errors[-1]["reason"] == "... and 5000 more errors"


def test_the_line_reader_takes_plain_responses_and_leaves_the_rest_to_the_whole_read(tmp_path):
    """What the streamed path takes (so the comparisons above went through it) and what it leaves."""
    good = _write_responses(tmp_path / "good.jsonl", 50, crlf=True)
    taken = read_response_lines(good, _folder(tmp_path, "a"), 10_000)
    assert taken is not None and taken.count == 50 and taken.benchmark_ref == "lines"
    assert [r.where for r in taken.responses()][:2] == ["line 2", "line 3"]
    repeated = tmp_path / "repeat.jsonl"
    repeated.write_text(good.read_text() + json.dumps(_response(7, 0)) + "\n")
    one_line = tmp_path / "one.jsonl"
    one_line.write_text(json.dumps(_response(0, 0)) + "\n")
    audit = tmp_path / "audit.jsonl"
    audit.write_text("".join(json.dumps({"id": f"a{i}", "tag": "t", "model_output": "x", "context_input": "c"}) + "\n"
                             for i in range(3)))
    for n, path in enumerate((repeated, one_line, audit)):
        assert read_response_lines(path, _folder(tmp_path, f"b{n}"), 10_000) is None, path.name
    over = read_response_lines(good, _folder(tmp_path, "c"), 5)               # over the size limit: kept as problems
    assert over is not None and len(over.oversized) == 50
    assert over.oversized.kept[0].where == "line 2" and "over the limit of 5 per response" in over.oversized.kept[0].reason


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder
