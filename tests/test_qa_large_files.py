"""Large files with damage at random places, through the paths only large files take: the spool
(``intake_read``), the item-by-item native benchmark (``intake_stream``), registration in parts,
a later version's lineage a part at a time (``intake_lineage``), responses JSONL line by line
(``intake_lines``) and pending responses in parts (``intake_pending``).

Every damaged file must be rejected with one ``benchmark.rejected`` event naming the file, the
place (item index, field, line) and the reason, filed in rejected/ beside its note, and nothing
else: the ledger verifies, and a good file ingested afterwards is registered, judged and
reported. The seed is printed (``large_files_support.SEED``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evalledger import ledger
from evalledger.stages import intake
from large_files_support import (
    ANSWERED,
    QUESTIONS,
    assert_healthy,
    assert_healthy_by_cli,
    assert_rejected_alone,
    benchmark,
    cli,
    column_of,
    dropped,
    event_counts,
    home_with_version_one,
    jsonl,
    judged_and_reported,
    large,
    question,
    response_rows,
    rng,
)

SECOND_PART = range(1000, QUESTIONS)   # intake_events.PART_QUESTIONS: these land in the registration's second part
DEEP = 10_000
HUGE = 5 << 20


def _nested(depth: int) -> object:
    """A value nested ``depth`` lists deep (built without recursion)."""
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def _deep_json(depth: int) -> bytes:
    """The JSON text of ``_nested(depth)`` (json.dumps would recurse past Python's limit)."""
    return b"[" * depth + b"1" + b"]" * depth


def damaged_benchmark(kind: str, k: int, other: int, version: int = 1) -> tuple[bytes, str, str]:
    """A large native benchmark (``version`` of ``benchmark``) with one damage of ``kind`` at
    question ``k`` (``other``: an earlier question or response it collides with); (bytes, the
    place an error must name, a part of its reason)."""
    doc = benchmark(version=version)
    q = doc["questions"][k]
    where, reason = f"$.questions[{k}]", ""
    if kind == "wrong type":
        q["template"]["fields"][0]["ground_truth"] = "twelve"
        where, reason = f"{where}.template.fields[0].ground_truth", "does not fit the field type int"
    elif kind == "missing field":
        del q["question"]
        where, reason = f"{where}.question", "required key is missing"
    elif kind == "id of another part":
        q["id"] = f"q{other}"
        where, reason = f"{where}.id", f"duplicate question id 'q{other}' (first at $.questions[{other}])"
    elif kind == "id with a trailing space":
        q["id"] = f"q{other} "
        where, reason = f"{where}.id", "String should match pattern"
    elif kind == "huge string":
        q["question"] = "x" * HUGE
        where, reason = f"{where}.question", "at most 1000000 characters"
    elif kind == "huge unknown key":
        q["k" * HUGE] = 1
        reason = "unknown key"
    elif kind == "repeated response":
        doc["responses"][other + 1] = dict(doc["responses"][other])
        where, reason = f"$.responses[{other + 1}]", "already answered question"
    raw = json.dumps(doc).encode()
    marker = json.dumps(f"q{k}").encode()   # (the id of question k, for the damages made in its bytes)
    at = raw.find(b'"id": ' + marker + b",") + len(b'"id": ')
    if kind == "lone surrogate":
        raw = raw[:at] + b'"q\\ud800"' + raw[at + len(marker):]
        where, reason = f"{where}.id", "unpaired surrogate"
    elif kind == f"nesting {DEEP} deep":
        raw = raw[:at] + _deep_json(DEEP) + raw[at + len(marker):]
        where, reason = f"{where}.id", "nesting deeper than 64 levels"
    elif kind == "bad JSON":
        raw = raw[:at] + b"{," + raw[at:]
        line, column = column_of(raw, at + 1)
        where, reason = f"line {line}, column {column}", "not valid JSON"
    elif kind == "cut short":   # within the responses, after every question
        raw = raw[:len(raw) - 2 - other]
        where, reason = "line 1, column", "not valid JSON"
    return large(raw), where, reason


BENCHMARK_DAMAGE = ["wrong type", "missing field", "id of another part", "id with a trailing space", "huge string",
                    "huge unknown key", "repeated response", "lone surrogate", f"nesting {DEEP} deep", "bad JSON",
                    "cut short"]


def _ingest(home, name: str, raw: bytes) -> intake.IngestResult:
    """``raw`` dropped into the inbox as ``name`` and ingested from there (the daemon's way)."""
    path = dropped(home, name, raw)
    with ledger.open_ledger(home) as led:
        return intake.ingest_path(led, path, from_inbox=True)


def _rejected_by_cli_or_api(home, name: str, raw: bytes, where: str, reason: str, by_cli: bool) -> None:
    """Drop ``raw`` into the inbox as ``name`` and ingest it, with ``evalledger ingest`` (exit 1,
    its error printed) or ``ingest_path`` (quicker); it must be rejected."""
    if not by_cli:
        assert _ingest(home, name, raw).status == "rejected"
        return
    done = cli(home, "ingest", dropped(home, name, raw))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"{name}: {where}" in done.stdout and reason in done.stdout, done.stdout


@pytest.mark.parametrize("kind", BENCHMARK_DAMAGE)
def test_a_large_benchmark_damaged_deep_inside_is_rejected_naming_the_place_and_registers_nothing(tmp_path, kind):
    r = rng(f"benchmark {kind}")
    home = ledger.init_home(tmp_path / "home")
    k, other = r.choice(SECOND_PART), r.randrange(0, 2 * len(ANSWERED) - 1)
    raw, where, reason = damaged_benchmark(kind, k, other if kind.startswith("repeated") else other % 1000)
    result = _ingest(home, "big.json", raw)
    assert result.status == "rejected", result.line()
    assert_rejected_alone(home, Counter(), "big.json", where, reason)
    with ledger.open_ledger(home) as led:
        assert led.verify().ok
    good = _ingest(home, "good.json", large(json.dumps(benchmark()).encode()))
    assert good.status == "accepted" and good.cases_opened == 2 * len(ANSWERED), good.line()
    assert_healthy(home)


def test_after_rejected_large_benchmarks_a_good_one_is_registered_judged_and_reported(tmp_path):
    r = rng("benchmark then good")
    home = ledger.init_home(tmp_path / "home")
    for number, kind in enumerate(r.sample(["wrong type", "id of another part", "cut short"], 3)):
        raw, where, reason = damaged_benchmark(kind, r.choice(SECOND_PART), r.randrange(1000))
        before = event_counts(home)
        _rejected_by_cli_or_api(home, f"bad{number}.json", raw, where, reason, by_cli=number == 0)
        assert_rejected_alone(home, before, f"bad{number}.json", where, reason)
    # the good file holds what is valid but odd: NUL and a line separator in strings, ids equal
    # but for Unicode normalisation or case (ids are compared exactly: each is its own question)
    doc = benchmark()
    doc["questions"][1201] = {**question(1201), "id": "caf\u00e9"}
    doc["questions"][1202] = {**question(1202), "id": "cafe\u0301"}
    doc["questions"][1203] = {**question(1203), "id": "Q3", "question": "What is \u0000 plus\u2028 0?"}
    doc["responses"] += [{"question_id": qid, "model": "m\u0000odd", "text": "The sum is 2400.\u0000"}
                         for qid in ("caf\u00e9", "cafe\u0301", "Q3")]
    done = cli(home, "ingest", dropped(home, "good.json", large(json.dumps(doc).encode())))
    cases = 2 * len(ANSWERED) + 3
    assert done.returncode == 0 and f"{cases} new cases" in done.stdout, done.stdout + done.stderr
    judged_and_reported(home, cases)
    assert_healthy_by_cli(home)


def damaged_lines(kind: str, k: int, other: int, name: str = "big", count: int = 7000) -> tuple[bytes, str, str]:
    """A large responses JSONL file for benchmark ``name`` with one damage of ``kind`` on line
    ``k + 1`` (``other``: an earlier line it repeats); (bytes, place, part of the reason)."""
    rows = response_rows(name, count)
    where, reason = f"line {k + 1}", ""
    if kind == "wrong type":
        rows[k]["text"] = 5
        where, reason = f"{where}: $.text", "valid string"
    elif kind == "missing field":
        del rows[k]["model"]
        where, reason = f"{where}: $.model", "required key is missing"
    elif kind == "unknown question":
        rows[k]["question_id"] = "q-none"
        where, reason = f"{where}: $.question_id", "unknown question id 'q-none'"
    elif kind == "repeated pair":
        rows[k] = dict(rows[other])
        reason = f"already answered question '{rows[other]['question_id']}' at line {other + 1}"
    elif kind == "another benchmark":
        rows[k]["benchmark"] = "other"
        where, reason = f"{where}: $.benchmark", "one file, one benchmark"
    elif kind == "huge string":
        rows[k]["text"] = "y" * HUGE
        where, reason = f"{where}: $.text", "at most 1000000 characters"
    lines = jsonl(rows).split(b"\n")
    if kind == "lone surrogate":
        lines[k] = lines[k].replace(b'"text": "', b'"text": "\\udc00', 1)
        where, reason = f"{where}: $.text", "unpaired surrogate"
    elif kind == f"nesting {DEEP} deep":
        lines[k] = lines[k].replace(b'"model": ', b'"model": ' + _deep_json(DEEP) + b', "x": ', 1)
        where, reason = f"{where}: $.model", "nesting deeper than 64 levels"
    elif kind == "bad JSON":
        lines[k] = lines[k][:-7]
        where, reason = f"{where}, column", "not valid JSON"
    elif kind == "not UTF-8":
        lines[k] = lines[k][:40] + b"\xff" + lines[k][40:]
        where, reason = f"{where}, byte", "not valid UTF-8"
    return large(b"\n".join(lines)), where, reason


LINE_DAMAGE = ["wrong type", "missing field", "unknown question", "repeated pair", "another benchmark", "huge string",
               "lone surrogate", f"nesting {DEEP} deep", "bad JSON", "not UTF-8"]


def _small_benchmark(home) -> None:
    """Register benchmark ``big`` from a small file (its questions without padding), no responses."""
    doc = {**benchmark(), "questions": [{**q, "question": q["question"].rstrip(". ")} for q in benchmark()["questions"]],
           "responses": []}
    assert _ingest(home, "small.json", json.dumps(doc).encode()).status == "accepted"


@pytest.mark.parametrize("kind", LINE_DAMAGE)
def test_a_large_responses_file_damaged_on_a_random_line_is_rejected_naming_the_line(tmp_path, kind):
    r = rng(f"lines {kind}")
    home = ledger.init_home(tmp_path / "home")
    _small_benchmark(home)
    k = r.randrange(3500, 7000)
    raw, where, reason = damaged_lines(kind, k, r.randrange(0, 3000))
    before = event_counts(home)
    result = _ingest(home, "answers.jsonl", raw)
    assert result.status == "rejected", result.line()
    assert_rejected_alone(home, before, "answers.jsonl", where, reason)
    good = _ingest(home, "good.jsonl", damaged_lines("none", 0, 0)[0])
    assert good.status == "accepted" and good.cases_opened == 7000, good.line()
    assert_healthy(home)


def test_large_pending_responses_with_a_bad_line_are_rejected_when_their_benchmark_arrives(tmp_path):
    r = rng("pending")
    home = ledger.init_home(tmp_path / "home")
    k = r.randrange(10_000, 12_000)   # in the pending event's second part (intake_events.PART_CASES)
    raw, where, reason = damaged_lines("unknown question", k, 0, count=12_000)
    held = cli(home, "ingest", dropped(home, "early.jsonl", raw))
    assert held.returncode == 0 and "12000 responses wait for benchmark 'big'" in held.stdout, held.stdout + held.stderr
    status = cli(home, "status")
    assert "pending responses: 1" in status.stdout, status.stdout
    before = event_counts(home)
    arrived = cli(home, "ingest", dropped(home, "bench.json", large(json.dumps(benchmark()).encode())))
    assert arrived.returncode == 0, arrived.stdout + arrived.stderr
    assert f"pending file early.jsonl rejected: 1 error, first {where}: {reason}" in arrived.stdout, arrived.stdout
    gained = event_counts(home) - before
    assert gained["case.opened"] == 2 * len(ANSWERED) and gained["benchmark.registered"] == 1, gained
    with ledger.open_ledger(home, readonly=True) as led:
        [resolved] = [e.data for e in led.read(types=["responses.registered"]) if e.data.get("rejected")]
    assert resolved["errors"][0]["where"] == where and reason in resolved["errors"][0]["reason"]
    status = cli(home, "status")
    assert "pending responses: 0" in status.stdout and f"early.jsonl  1 error  {where}" in status.stdout, status.stdout
    good = cli(home, "ingest", dropped(home, "late.jsonl", damaged_lines("none", 0, 0, count=7000)[0]))
    assert good.returncode == 0 and "7000 new cases" in good.stdout, good.stdout + good.stderr
    assert_healthy_by_cli(home)


def test_a_damaged_large_second_version_registers_nothing_and_a_good_one_is_rebound(tmp_path):
    r = rng("lineage")
    home = home_with_version_one(tmp_path)
    for number, kind in enumerate(["wrong type", "id of another part", f"nesting {DEEP} deep", "cut short"]):
        raw, where, reason = damaged_benchmark(kind, r.choice(SECOND_PART), r.randrange(1000), version=2)
        before = event_counts(home)
        _rejected_by_cli_or_api(home, f"v2-bad{number}.json", raw, where, reason, by_cli=number == 0)
        assert_rejected_alone(home, before, f"v2-bad{number}.json", where, reason)
    rebind = cli(home, "rebind", "big")
    assert rebind.returncode == 2 and "one version" in rebind.stderr, rebind.stdout + rebind.stderr
    second = cli(home, "ingest", dropped(home, "v2.json", large(json.dumps(benchmark(version=2)).encode())))
    assert second.returncode == 0 and "version 2 of 'big'" in second.stdout, second.stdout + second.stderr
    assert "1 added (q1500)" in second.stdout and "215 changed" in second.stdout, second.stdout
    rebind = cli(home, "rebind", "big")
    assert rebind.returncode == 0 and "to version 2" in rebind.stdout, rebind.stdout + rebind.stderr
    judged_and_reported(home, 4 * len(ANSWERED))
    assert_healthy_by_cli(home)
