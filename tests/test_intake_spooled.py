"""A large native benchmark is taken in from a private spool item by item (issue 15, flat ingest
memory): the same events byte for byte as a file read whole, the same errors for a bad row
anywhere, nothing registered then, and a traced peak that does not grow with the file.

``ingest_path(spool_above=0)`` sends even a small file down the spooled path, so both paths run
on the same files in real homes; the CLI test uses a file over the default threshold.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages import intake_stream
from evalledger.stages.formats.decode import loads
from evalledger.stages.formats.stream import NotStreamable, read_document
from evalledger.stages.intake import ingest_path
from evalledger.stages.intake_read import SPOOL_ABOVE, sha256_of
from evalledger.testing.arithmetic import arithmetic_benchmark
from evalledger.testing.peak_rss import peak_rss_mb
from intake_support import streamed_document

CLI = [sys.executable, "-m", "evalledger"]
SAMPLES = Path(__file__).resolve().parent.parent / "benchmarks" / "samples"
WHOLE = 1 << 40   # spool_above: never spooled, the file is read whole


def events_of(home: Path) -> list[tuple]:
    """Every event as stored (id, stream, type, data bytes, meta but its time)."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [(e.id, e.stream, e.version, e.type, e.schema, str(e.raw_data),
                 json.dumps({k: v for k, v in e.meta.items() if k != "recorded_at"}, sort_keys=True))
                for e in led.read()]


def both_ways(tmp_path: Path, path: Path, before: tuple[Path, ...] = ()) -> tuple[list, list, object, object]:
    """(events, events, result, result) of ``path`` ingested read whole and spooled (each into a
    new home that took the files ``before`` first)."""
    out = []
    for label, spool in (("whole", WHOLE), ("spooled", 0)):
        home = tmp_path / f"{path.stem}-{label}"
        with ledger.open_ledger(home) as led:
            for earlier in before:
                assert ingest_path(led, earlier).ok
            result = ingest_path(led, path, spool_above=spool)
        out.append((events_of(home), result))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def write(tmp_path: Path, name: str, doc: dict, **dump) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, **dump), encoding="utf-8")
    return path


def reordered(doc: dict) -> dict:
    """The same benchmark with its responses first, config before the questions, a description."""
    return {"format": doc["format"], "responses": doc["responses"], "config": doc["config"],
            "description": "reordered — ünïcode", "name": doc["name"], "questions": doc["questions"]}


@pytest.mark.parametrize("case", ["sample", "parts", "reordered", "pretty-bom", "no-responses"])
def test_a_spooled_benchmark_gives_the_same_events_byte_for_byte(tmp_path, case):
    doc = arithmetic_benchmark(1200, "parts")   # 1,200 questions: a registration of two parts
    if case == "sample":
        path = SAMPLES / "pharmacology.benchmark.json"
    elif case == "parts":
        path = write(tmp_path, "parts.json", doc)
    elif case == "reordered":
        path = write(tmp_path, "reordered.json", reordered(arithmetic_benchmark(300, "re")))
    elif case == "pretty-bom":
        path = tmp_path / "pretty.json"
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps(arithmetic_benchmark(40, "p"), indent=3).replace(
            "\n", "\r\n").encode())
    else:
        path = write(tmp_path, "bare.json", {**arithmetic_benchmark(50, "bare"), "responses": []})
    spill = tmp_path / "spill"
    spill.mkdir()
    assert intake_stream.read_native(Path(path), spill, 100_000) is not None   # the spooled path takes it
    whole, spooled, first, second = both_ways(tmp_path, path)
    assert first.status == second.status == "accepted"
    assert second.line() == first.line() and second.warnings == first.warnings
    assert spooled == whole and len(whole) >= 2


def test_a_second_version_and_pending_responses_come_out_as_when_read_whole(tmp_path):
    first = arithmetic_benchmark(30, "versions")
    second = {**first, "questions": first["questions"] + arithmetic_benchmark(31, "x")["questions"][30:]}
    v1, v2 = write(tmp_path, "v1.json", first), write(tmp_path, "v2.json", second)
    whole, spooled, one, other = both_ways(tmp_path, v2, before=(v1,))
    assert "version 2 of 'versions'" in one.line() and other.line() == one.line() and spooled == whole
    waiting = tmp_path / "waiting.jsonl"
    waiting.write_text("".join(json.dumps({"benchmark": "pending", "question_id": "q1", "model": "late",
                                           "text": "12"}) + "\n" for _ in range(1)))
    bench = write(tmp_path, "pending.json", arithmetic_benchmark(20, "pending"))
    whole, spooled, one, other = both_ways(tmp_path, bench, before=(waiting,))
    assert "pending file" in one.line() and other.line() == one.line() and spooled == whole


BAD = {
    "unknown question at the end": lambda d: d["responses"][-1].update(question_id="nope"),
    "a model answers twice": lambda d: d["responses"].append(dict(d["responses"][0])),
    "a bad ground truth in the last question": lambda d: d["questions"][-1]["template"]["fields"][0].update(
        ground_truth="many"),
    "an unknown key at the top": lambda d: d.update(extra=1),
    "no questions": lambda d: d.update(questions=[]),
    "responses over the size limit": lambda d: [r.update(text="7" * 200_001) for r in d["responses"][::3]],
    "a long response and an unknown question": lambda d: (d["responses"][0].update(text="7" * 200_001),
                                                           d["responses"][-1].update(question_id="nope")),
}


@pytest.mark.parametrize("damage", sorted(BAD))
def test_a_bad_row_anywhere_gives_the_same_error_and_registers_nothing(tmp_path, damage):
    doc = arithmetic_benchmark(200, "bad")
    BAD[damage](doc)
    path = write(tmp_path, "bad.json", doc)
    whole, spooled, first, second = both_ways(tmp_path, path)
    assert first.status == second.status == "rejected"
    assert second.errors == first.errors and second.error_lines() == first.error_lines()
    assert spooled == whole and [e[3] for e in spooled] == ["benchmark.rejected"]


def test_responses_over_the_size_limit_are_found_by_the_stream_reader(tmp_path):
    """The stream reader keeps over-long responses as problems (in the whole read's words) rather
    than giving the file up to be read whole: the comparison above went through it."""
    doc = arithmetic_benchmark(50, "long")
    BAD["responses over the size limit"](doc)
    path = write(tmp_path, "long.json", doc)
    folder = tmp_path / "spill"
    folder.mkdir()
    spilled = intake_stream.read_native(path, folder, 200_000)
    assert spilled is not None and len(spilled.oversized) == len(doc["responses"][::3])
    first = spilled.oversized.kept[0]
    assert first.where == "$.responses[0]" and first.reason.startswith("the response is 200001 characters")


@pytest.mark.parametrize("text", [
    '{"format": "evalledger/benchmark@1", "name": "x", "questions": [{"id": "a"}, {"id": NaN}]}',
    '{"format": "evalledger/benchmark@1", "name": "x", "name": "y", "questions": []}',
    '{"format": "evalledger/benchmark@1", "name": "x", "questions": [{"id": "a"}, {"id": "b"}',
    '{"format": "evalledger/benchmark@1", "name": "x", "questions": [1, 99999999999999999999]}',
    '{"format": "evalledger/benchmark@1", "name": "\\ud800", "questions": []}',
    '{"format": "evalledger/benchmark@1", "questions": [] } trailing',
])
def test_the_stream_reader_says_no_to_what_the_whole_reader_refuses(tmp_path, text):
    with pytest.raises(NotStreamable):
        for _ in read_document(io.BytesIO(text.encode()), frozenset({"questions"}), read_size=3):
            pass
    path = tmp_path / "bad.json"
    path.write_text(text)
    whole, spooled, first, second = both_ways(tmp_path, path)
    assert first.status == "rejected" and second.errors == first.errors and spooled == whole


@pytest.mark.parametrize("read_size", [1, 2, 5, 64, 4096])
def test_the_stream_reader_gives_what_a_whole_parse_gives_at_any_window(read_size):
    doc = {"format": "evalledger/benchmark@1", "n": 12345678901234, "f": 1.5e-300, "t": [True, None, "é\u2028"],
           "questions": [{"k": i * 1.25, "s": "x" * i, "e": 1e5, "neg": -0.0} for i in range(40)],
           "responses": [], "z": {"deep": [[[{"a": "\\\"]"}]]]}}
    raw = json.dumps(doc, indent=1, ensure_ascii=bool(read_size % 2)).encode()
    got = streamed_document(io.BytesIO(raw), read_size)
    assert json.dumps(got, sort_keys=True) == json.dumps(loads(raw.decode()), sort_keys=True)


def test_the_cli_ingests_a_large_benchmark_through_its_spool(tmp_path):
    cases = 5000
    path = write(tmp_path, "large.json", arithmetic_benchmark(cases // 2, "large"))
    assert path.stat().st_size > SPOOL_ABOVE
    home = tmp_path / "home"
    subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
    done = subprocess.run([*CLI, "--home", str(home), "ingest", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{cases} new cases" in done.stdout
    sha, _ = sha256_of(path)
    # the file is kept as read, and no spool or spill is left behind
    assert sorted(p.name for p in (home / "processed").iterdir()) == [f"{sha}.json"]
    assert (home / "processed" / f"{sha}.json").read_bytes() == path.read_bytes()
    check = subprocess.run([*CLI, "--home", str(home), "verify"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    again = subprocess.run([*CLI, "--home", str(home), "ingest", str(path)], capture_output=True, text=True)
    assert again.returncode == 0 and "0 new cases" in again.stdout


CHILD = """
import sys
from evalledger import ledger
from evalledger.stages.intake import ingest_path
with ledger.open_ledger(sys.argv[1]) as led:
    assert ingest_path(led, sys.argv[2], spool_above=int(sys.argv[3])).ok
"""


def peak_mb(tmp_path: Path, cases: int, spool_above: int) -> float:
    """Peak RSS (MB) of a process ingesting a ``cases``-case benchmark into a new home (its own
    peak: started from a small launcher, not from this test process, whose size Linux would carry
    into the child's figure)."""
    path = write(tmp_path, f"b{cases}.json", arithmetic_benchmark(cases // 2, "mem"))
    code, peak, errors = peak_rss_mb([sys.executable, "-c", CHILD, str(tmp_path / f"home{cases}-{spool_above}"),
                                      str(path), str(spool_above)])
    assert code == 0, errors[-2000:]
    return peak


def test_spooled_ingest_memory_does_not_grow_with_the_file(tmp_path):
    small, large = peak_mb(tmp_path, 4000, 0), peak_mb(tmp_path, 12000, 0)
    # Read whole, the peak grows ~3 KB a case (the parsed file, then the questions and responses
    # kept for the events); spooled, well under 1 KB a case (mostly the case ids of one event).
    per_case_kb = (large - small) * 1024 / 8000
    assert per_case_kb < 1.5, f"the peak grows {per_case_kb:.2f} KB a case ({small:.0f} -> {large:.0f} MB)"


def test_a_spooled_benchmark_in_a_postgresql_store_keeps_its_file_and_the_same_events(tmp_path):
    from postgres_support import postgres_home
    path = write(tmp_path, "pg.json", arithmetic_benchmark(150, "pg"))
    found = []
    for label, spool in (("whole", WHOLE), ("spooled", 0)):
        home = postgres_home(tmp_path / label)
        with ledger.open_ledger(home) as led:
            assert ingest_path(led, path, spool_above=spool).cases_opened == 300
            sha, _ = sha256_of(path)
            # kept in the store itself (not only in this home's processed/), for every machine
            assert led.recorder.file_bytes(sha) == path.read_bytes()
        found.append(events_of(home))
    assert found[0] == found[1]


def later_version(doc: dict, tag: str) -> dict:
    """``doc`` as its next version: a question changed in each part, one removed, two added."""
    questions = [dict(q) for q in doc["questions"]]
    for number in (5, len(questions) - 3):
        questions[number] = {**questions[number], "question": questions[number]["question"] + f" ({tag})"}
    del questions[7]
    extra = arithmetic_benchmark(len(doc["questions"]) + 2, "x")["questions"][-2:]
    kept = {q["id"] for q in questions}
    return {**doc, "questions": questions + [dict(q, id=f"{q['id']}-{tag}") for q in extra],
            "responses": [r for r in doc["responses"] if r["question_id"] in kept]}


def test_later_versions_of_a_registration_in_parts_come_out_as_when_read_whole(tmp_path):
    # 1,200 questions: both versions are registered in two parts, and the earlier one is read a part at a time
    first = arithmetic_benchmark(1200, "big")
    second = later_version(first, "v2")
    third = later_version(second, "v3")
    v1, v2, v3 = (write(tmp_path, f"v{n}.json", doc) for n, doc in ((1, first), (2, second), (3, third)))
    whole, spooled, one, other = both_ways(tmp_path, v3, before=(v1, v2))
    assert "version 3 of 'big': 2 changed (q1199, q5), 2 added (q1201-v3, q1202-v3), 1 removed (q8)" in one.line()
    assert other.line() == one.line()
    assert spooled == whole


def test_a_later_version_is_spooled_and_its_memory_does_not_grow_with_the_file(tmp_path):
    def peak(cases: int) -> float:
        first = arithmetic_benchmark(cases // 2, "grow")
        home = tmp_path / f"home{cases}"
        with ledger.open_ledger(home) as led:
            assert ingest_path(led, write(tmp_path, f"v1-{cases}.json", first)).ok
        v2 = write(tmp_path, f"v2-{cases}.json", later_version(first, "v2"))
        code, mb, errors = peak_rss_mb([sys.executable, "-c", CHILD, str(home), str(v2), "0"])
        assert code == 0, errors[-2000:]
        with ledger.open_ledger(home, readonly=True) as led:
            [latest] = [e.data for e in led.read(types=["benchmark.registered"]) if e.data.get("version") == 2]
        assert latest["changes"]["removed"] == ["q7"]
        return mb

    small, large = peak(2000), peak(8000)
    # read whole (as a later version was before), the peak grew ~3 KB a case
    per_case_kb = (large - small) * 1024 / 6000
    assert per_case_kb < 1.5, f"the peak grows {per_case_kb:.2f} KB a case ({small:.0f} -> {large:.0f} MB)"
